"""Replay the shared recordings through Hermes 0.19.0 and through hermeslab, and compare the defect totals.

Every recorded assistant message is one model call; compression runs whenever
the trigger fires. Hermes runs in its reference worker (its own
``should_compress`` and ``compress()``, stubbed summary); hermeslab runs
``hermeslab.eval.replay_compression`` with the ``seed`` preset (extractive
summariser) and with the ``hermes-0.19`` preset (the worker's fixed summary
text). Totals are summed over all sessions of each file; seconds are wall
time of each side in this run.

Usage: python benchmarks/recordings_replay.py [--window N] [--datasets DIR] [FILE ...]
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hermeslab.policies.loading import apply_preset
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.core.config import Config
from hermeslab.eval.replay_compression import FixedSummariser, replay_recordings, sum_totals
from hermeslab.reference.client import HermesReference

DEFAULT_FILES = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl")


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def hermes_side(ref: HermesReference, sessions: list[dict], window: int) -> dict:
    started = time.perf_counter()
    results = ref.replay_many(sessions, context_length=window)
    totals: dict[str, float] = {}
    for result in results:
        for key, value in result["totals"].items():
            totals[key] = totals.get(key, 0) + value
    return {**totals, "seconds": round(time.perf_counter() - started, 1)}


def hermeslab_side(sessions: list[dict], window: int, preset: str) -> dict:
    summariser = ExtractiveSummariser() if preset == "seed" else FixedSummariser()
    started = time.perf_counter()
    reports = replay_recordings(sessions, config=apply_preset(Config(), preset), summariser=summariser,
                                context_length=window)
    unfittable = [{"session": r.session_id, "call": e.call, "detail": e.detail} for r in reports for e in r.events]
    return {**sum_totals(reports), "seconds": round(time.perf_counter() - started, 1), "unfittable": unfittable}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    options = parser.parse_args()
    if options.window <= 0:
        parser.error("--window must be a positive number of tokens")

    report: dict = {"benchmark": "recordings_replay", "window": options.window, "files": {}}
    with HermesReference(timeout=None) as ref:
        report["hermes_version"] = ref.info.get("hermes_version")
        for name in options.files:
            sessions = load(options.datasets / name)
            report["files"][name] = {
                "sessions": len(sessions),
                "hermes": hermes_side(ref, sessions, options.window),
                "hermeslab_seed": hermeslab_side(sessions, options.window, "seed"),
                "hermeslab_hermes_0_19": hermeslab_side(sessions, options.window, "hermes-0.19"),
            }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
