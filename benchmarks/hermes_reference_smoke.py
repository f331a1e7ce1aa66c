"""Measure the Hermes reference harness: install, bridge overhead, compress() speed, replay totals.

It installs the Hermes reference environment when it is absent (as ``hermeslab
reference install hermes`` does), since its install time is one of the figures.

Usage: python benchmarks/hermes_reference_smoke.py [--datasets DIR] [--timed FILE] [--replayed FILE ...]
       [--skip-replay] [--out FILE]

Prints one JSON line and writes it to benchmarks/results/hermes_reference_smoke.json.
Times and CPU seconds of compress() and of the replays are measured inside the
worker (``time.perf_counter`` and ``time.process_time`` around Hermes's own
work); ``round_trip_seconds`` adds sending the recordings and reading the
answers. ``cpu_seconds.hermes_worker`` is all the worker's CPU time from its
first request to its last. The replay totals at a 16K window are the numbers
to compare with the figures measured independently for Hermes 0.19.0 (mini-swe-agent: 648
compress() calls, 87 still over the window, 62 outputs with two summaries,
62 missing the latest user message, 143 summarising only the previous summary).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

from _record import Record, add_out_option

from hermeslab.reference.client import HermesReference
from hermeslab.reference.venv import install_hermes_venv, read_marker

MINI_SWE = "mini_swe_agent_gemini3pro_swebv.jsonl"
TAU2 = "tau2_bench_gpt41.jsonl"


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def summed_totals(results: list[dict]) -> dict:
    totals: dict[str, int] = {}
    for result in results:
        for key, value in result["totals"].items():
            totals[key] = totals.get(key, 0) + value
    return totals


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def bridge_overhead(ref: HermesReference, session: dict, pings: int) -> dict:
    """Empty round trips, and a real compress() round trip minus the time spent inside Hermes."""
    empty = [ref.ping() for _ in range(pings)]
    gaps = []
    for _ in range(10):
        started = time.perf_counter()
        result = ref.compress(session["messages"], context_length=16_000)
        gaps.append((time.perf_counter() - started) * 1000.0 - result["elapsed_ms"])
    size = len(json.dumps(session["messages"]))
    return {
        "empty_round_trip_ms_median": round(statistics.median(empty), 3),
        "compress_round_trip_overhead_ms_median": round(statistics.median(gaps), 2),
        "payload_chars": size,
    }


def compress_speed(ref: HermesReference, sessions: list[dict], context_length: int, repeats: int) -> list[dict]:
    rows = []
    for session in sessions:
        timed = ref.time_compress_cpu(session["messages"], context_length=context_length, repeats=repeats)
        timings = timed["ms"]
        rows.append({
            "id": session["id"],
            "messages": len(session["messages"]),
            "context_length": context_length,
            "median_ms": round(statistics.median(timings), 2),
            "min_ms": round(min(timings), 2),
            "p90_ms": round(percentile(timings, 0.9), 2),
            "median_cpu_ms": round(statistics.median(timed["cpu_ms"]), 2),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets",
                        help="folder of the recordings (default: ../shared/datasets beside the clone)")
    parser.add_argument("--timed", default=MINI_SWE, help=f"file whose longest sessions are timed (default {MINI_SWE})")
    parser.add_argument("--replayed", nargs="+", default=[MINI_SWE, TAU2], metavar="FILE",
                        help=f"files replayed whole (default {MINI_SWE} {TAU2})")
    parser.add_argument("--context-length", type=int, default=16_000, help="window of the replays (default 16000)")
    parser.add_argument("--longest", type=int, default=5, help="how many of the longest sessions to time")
    parser.add_argument("--repeats", type=int, default=20, help="timed compress() calls per session and window")
    parser.add_argument("--skip-replay", action="store_true", help="time compress() only")
    add_out_option(parser, "hermes_reference_smoke")
    options = parser.parse_args()

    record = Record("hermes_reference_smoke")
    report: dict = {}
    started = time.perf_counter()
    # The install is part of what this measures, so it runs the announced install step itself (a no-op when done).
    say = functools.partial(print, file=sys.stderr)
    say("installing the Hermes reference environment if absent (as `hermeslab reference install hermes` does)")
    venv_path = install_hermes_venv(echo=say)
    report["venv"] = {"path": str(venv_path).replace(str(Path.home()), "~", 1), "ensure_seconds": round(time.perf_counter() - started, 2),
                      "install_seconds_recorded": (read_marker(venv_path) or {}).get("install_seconds")}

    timed_sessions = load(options.datasets / options.timed)
    longest = sorted(timed_sessions, key=lambda s: len(s["messages"]), reverse=True)[: options.longest]
    with HermesReference(venv_path, timeout=None) as ref:
        worker_cpu_before = ref.worker_cpu_seconds()
        report["worker"] = ref.info
        report["bridge"] = bridge_overhead(ref, longest[0], pings=500)
        report["compress_speed"] = [
            *compress_speed(ref, longest, 16_000, options.repeats),
            *compress_speed(ref, longest, 128_000, options.repeats),
        ]
        if not options.skip_replay:
            replays = {}
            for name in options.replayed:
                sessions = load(options.datasets / name)
                began = time.perf_counter()
                timed = ref.replay_many_timed(sessions, context_length=options.context_length)
                results = timed["results"]
                replays[name] = {
                    "sessions": len(results),
                    "seconds": round(timed["seconds"], 2),
                    "cpu_seconds": round(timed["cpu_seconds"], 2),
                    "round_trip_seconds": round(time.perf_counter() - began, 2),
                    **summed_totals(results),
                }
            report["replay"] = {"context_length": options.context_length, **replays}
        report["cpu_seconds"] = {"hermes_worker": round(ref.worker_cpu_seconds() - worker_cpu_before, 2),
                                 "note": "the Hermes worker only; this process's share is process_cpu_seconds"}
    record.finish(report, options.out)


if __name__ == "__main__":
    main()
