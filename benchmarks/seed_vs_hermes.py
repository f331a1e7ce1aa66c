"""``seed`` against ``hermes-0.19`` on the shared recordings, in one token unit, file by file and window by window.

Every session is replayed through the agent loop (the fast replay: same
decisions, no events) under both presets with the same summariser, the
default offline one (extractive), at 16K, 32K and 64K windows. Prompts are
billed exactly in each recording's model encoding for both presets, so the
prompt-token totals compare; each preset's own estimate of what it sent is
reported beside them in its own unit. Per cell: prompt tokens, calls over the
window (refused though the call could have been made to fit), double
summaries, lost tasks, summary-only compressions, failed turns, calls never
made, and retention of key facts (facts retained / facts at risk, pooled).

The goals for ``seed``, checked in every cell: no call over the window, no
double summary, no lost task, no summary-only compression, no failed turn,
retention at least 0.90, prompt tokens no more than ``hermes-0.19``'s.

The raw prompt-token totals are not the same work when one preset ends turns
early and so never makes some recorded calls. The cost goal is therefore
judged on the common calls: the recorded calls (session and position among
its recording's replies) that both presets served, with each side's prompt
tokens summed over exactly those. Each cell names that basis
(``prompt_tokens_basis``) and reports the raw totals and the per-served-call
means beside it.

Usage: python benchmarks/seed_vs_hermes.py [--windows 16000,32000,64000] [--datasets DIR] [--workers N] [FILE ...]
Prints one JSON line per file × window, then the whole report as the last line
(stored in benchmarks/results/seed_vs_hermes.json).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

from _record import Record, add_out_option

from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.policies.loading import load_config
from hermeslab.eval.metrics import measure
from hermeslab.eval.replay import replay
from hermeslab.eval.replay_compression import report_of
from hermeslab.recordings import Recording

DEFAULT_FILES = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl", "tau_bench_airline_gpt4o.jsonl")
PRESETS = ("seed", "hermes-0.19")
RETENTION_GOAL = 0.90
#: What ``prompt_tokens_at_most_hermes`` compares.
PROMPT_TOKENS_BASIS = "common_calls: recorded calls both presets served, matched by session and reply index"
#: The defect counts that must be 0 under seed.
ZERO_GOALS = ("over_window_calls", "two_summary_outputs", "original_task_lost", "summary_only_compressions",
              "failed_turns", "missed_calls")


@lru_cache(maxsize=4)
def load(path: str) -> tuple[Recording, ...]:
    with open(path, encoding="utf-8") as handle:
        return tuple(Recording.from_dict(json.loads(line)) for line in handle if line.strip())


def cell(task: tuple[str, int, str]) -> dict:
    """Both ways of counting one preset at one window over one file."""
    path, window, preset = task
    config = load_config(f"{preset},model.context_length={window}")
    totals: dict[str, float] = {}
    units: set[tuple[str, str]] = set()
    per_call: dict[tuple[int, int], int] = {}  # (session position in the file, reply index)
    started_cpu = time.process_time()
    for position, recording in enumerate(load(path)):
        run = replay(recording, config, summariser=ExtractiveSummariser(), fast=True)
        row = measure(run)
        report = report_of(run, recording.messages, recording.tools, config, recording.id).totals()
        units.add((row["token_unit"], row["decision_unit"]))
        for served in run.calls:
            key = (position, served.reply_index)
            per_call[key] = per_call.get(key, 0) + served.prompt_tokens  # a retried call bills again
        for key in ("prompt_tokens", "decision_prompt_tokens", "api_calls", "compressions", "facts_retained",
                    "facts_at_risk"):
            totals[key] = totals.get(key, 0) + row[key]
        for key in (*ZERO_GOALS, "fit_compressions", "messages_cut_to_fit", "unfittable_calls"):
            totals[key] = totals.get(key, 0) + report[key]
    token_unit = " | ".join(sorted({unit for unit, _ in units}))  # one name unless the file mixes models
    decision_unit = " | ".join(sorted({unit for _, unit in units}))
    totals["retention"] = round(totals["facts_retained"] / totals["facts_at_risk"], 4) if totals["facts_at_risk"] \
        else None
    totals["prompt_tokens_per_call"] = round(totals["prompt_tokens"] / totals["api_calls"], 1) \
        if totals["api_calls"] else None
    return {"file": Path(path).name, "window": window, "preset": preset, "token_unit": token_unit,
            "decision_unit": decision_unit, "cpu_seconds": round(time.process_time() - started_cpu, 2),
            **{key: int(value) if isinstance(value, float) and value.is_integer() else value
               for key, value in totals.items()},
            "per_call": per_call}


def common_calls(seed: dict, hermes: dict) -> dict[str, int | float | None]:
    """Prompt tokens of each preset over the recorded calls both served (the same work on both sides)."""
    shared = seed["per_call"].keys() & hermes["per_call"].keys()
    seed_tokens = sum(seed["per_call"][key] for key in shared)
    hermes_tokens = sum(hermes["per_call"][key] for key in shared)
    return {"calls": len(shared), "seed_prompt_tokens": seed_tokens, "hermes_prompt_tokens": hermes_tokens,
            "seed_per_call": round(seed_tokens / len(shared), 1) if shared else None,
            "hermes_per_call": round(hermes_tokens / len(shared), 1) if shared else None,
            "seed_only_calls": len(seed["per_call"].keys() - shared),
            "hermes_only_calls": len(hermes["per_call"].keys() - shared)}


def goals(seed: dict, hermes: dict, common: dict) -> dict[str, bool]:
    """Which seed goals hold in one cell; the cost goal is judged over the common calls."""
    met = {key: seed[key] == 0 for key in ZERO_GOALS}
    met["retention"] = seed["retention"] is None or seed["retention"] >= RETENTION_GOAL
    met["prompt_tokens_at_most_hermes"] = common["seed_prompt_tokens"] <= common["hermes_prompt_tokens"]
    met["one_unit"] = seed["token_unit"] == hermes["token_unit"]
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--windows", default="16000,32000,64000")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    add_out_option(parser, "seed_vs_hermes")
    options = parser.parse_args()
    record = Record("seed_vs_hermes")
    windows = [int(w) for w in options.windows.split(",")]
    tasks = [(str(options.datasets / name), window, preset)
             for name in options.files for window in windows for preset in PRESETS]
    with ProcessPoolExecutor(max_workers=options.workers) as pool:
        results = list(pool.map(cell, tasks))
    cells = []
    for name in options.files:
        for window in windows:
            pair = {r["preset"]: r for r in results if r["file"] == name and r["window"] == window}
            common = common_calls(pair["seed"], pair["hermes-0.19"])
            seed, hermes = ({k: v for k, v in pair[p].items() if k != "per_call"} for p in PRESETS)
            line = {"file": name, "window": window, "seed": seed, "hermes-0.19": hermes,
                    "common_calls": common, "prompt_tokens_basis": PROMPT_TOKENS_BASIS,
                    "seed_goals": goals(seed, hermes, common)}
            line["seed_goals_met"] = all(line["seed_goals"].values())
            print(json.dumps(line), flush=True)
            cells.append(line)
    record.finish({"summariser": "extractive", "workers": options.workers, "windows": windows,
                   "prompt_tokens_basis": PROMPT_TOKENS_BASIS,
                   "cells": cells, "seed_goals_met_everywhere": all(c["seed_goals_met"] for c in cells),
                   "goals_missed": sorted({f"{c['file']}@{c['window']}:{goal}" for c in cells
                                           for goal, met in c["seed_goals"].items() if not met})},
                  options.out)


if __name__ == "__main__":
    main()
