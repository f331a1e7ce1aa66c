"""A window sweep through the A/B runner beside the same sweep through Hermes 0.19.0's own compressor.

Every session of the shared recording files is replayed at each window
(16K, 32K and 64K by default) under the ``hermes-0.19`` preset with the
zero-latency stub summariser: on hermeslab's side through ``run_ab`` (the
agent loop in its fast replay: recorded tool results appended without the
tool executor and no events, the same decisions as the full one; the metrics;
``--workers`` local worker processes, default 1); on
Hermes's side through its trigger and ``ContextCompressor`` in one worker
process (``HermesReference.replay_many_timed``). Both sides count prompts in
chars/4 (Hermes's replay measures nothing else; ours bills in that unit here
rather than tokenising every message exactly). Both sides run in this one
invocation, so the ratios compare like with like on whatever else the machine
is doing.

The headline is ``cpu_ratio``: Hermes's CPU seconds over ours for the same
replays. The two sides need not make the same model calls (where the loop
ends a turn early, ours makes fewer), so ``cpu_ratio_per_call`` divides each
side's CPU seconds by its own calls first; the target is met when both reach
it. Nor need they make the same compressions, the costliest step of a replay:
``compressions`` gives each side's count (and ``compressions_ratio``,
hermeslab's over Hermes's), and ``cpu_ratio_per_compression`` divides each
side's CPU seconds by its own compressions, shown beside the other two (a side
that compresses less does less work; this ratio says how much of the lead that
is). Ours: this process and its worker processes during ``run_ab`` (the memory
sampler's own thread is left out and reported apart). Hermes's: its
worker's ``time.process_time`` around the replays alone, measured inside the
worker, so sending the recordings, decoding them and encoding the answers are
not charged to Hermes. Wall time (``speedup``) is reported too, but it is a
fair comparison only with ``--workers 1``: more workers than Hermes's one are
worth up to the core count by themselves.

Both sides replay the same sessions; per window the benchmark counts the
sessions where both make the same number of model calls and the same number of
compressions (``agreement``). hermeslab's ``hermes-0.19`` preset follows
Hermes's decisions, but its replay runs the agent loop (overflow recovery, its
own prompt count), so the compression counts need not agree everywhere.

Peak memory of our side is sampled over this process and its worker
processes: ``peak_rss_mb`` sums their resident sets every 0.2 s (pages
shared after fork are counted once per process, so it overstates),
``peak_pss_mb`` sums their proportional sets (shared pages split between the
sharers: the memory actually in use) every 5 s, since reading them is costly.

Both sides run ``--repeat`` times, alternating (ours, Hermes's, ours, ...),
each repetition from a fresh start (new worker pool, new Hermes worker); each
side's figures are its repetition with the least CPU time (wall: the fastest),
as ``timeit`` reports the best of its repeats. Every repetition is listed.

Usage: python benchmarks/ab_sweep.py [--windows 16000,32000,64000] [--workers N] [--repeat N] [--datasets DIR]
       [--out FILE] [FILE ...]
Prints one JSON object as its last line and writes it to benchmarks/results/ab_sweep.json.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import threading
import time
from pathlib import Path

import psutil
from _record import Record, add_out_option

from hermeslab.context.hermes_texts import texts_in_use
from hermeslab.policies.loading import load_config
from hermeslab.eval.ab import ReplayCell, run_ab
from hermeslab.eval.executors import ProcessExecutor
from hermeslab.eval.recording import read_recordings
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.recordings import Recording
from hermeslab.reference.client import HermesReference

DEFAULT_FILES = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl", "tau_bench_airline_gpt4o.jsonl")
DEFAULT_WINDOWS = (16_000, 32_000, 64_000)
CPU_RATIO_TARGET = 5.0
MEMORY_TARGET_MB = 2_048


class MemorySampler:
    """Peak summed RSS and PSS of this process and all its descendants, sampled on a thread.

    RSS is cheap to read and sampled every ``interval`` seconds; PSS means
    walking every mapping (tens of milliseconds per process, stolen from the
    workers), so it is read every ``pss_every``-th sample only.
    """

    def __init__(self, interval: float = 0.2, pss_every: int = 25):
        self.interval = interval
        self.pss_every = pss_every
        self.peak_rss = 0
        self.peak_pss = 0
        self.cpu_seconds = 0.0  # the sampling thread's own CPU time, not charged to the sweep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def _sample_until_stopped(self) -> None:
        try:
            self._sample()
        finally:
            self.cpu_seconds = time.thread_time()

    def _sample(self) -> None:
        me = psutil.Process()
        for count in itertools.count():
            with_pss = count % self.pss_every == 0
            rss = pss = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    info = process.memory_full_info() if with_pss else process.memory_info()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                rss += info.rss
                pss += getattr(info, "pss", info.rss) if with_pss else 0
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load(paths: list[Path]) -> list[Recording]:
    recordings = []
    for path in paths:
        found = read_recordings(path)
        recordings.extend(found)
        if found.problems:
            raise SystemExit(f"{path}: {len(found.problems)} bad line(s), first: {found.problems[0]}")
    return recordings


def our_side(recordings: list[Recording], windows: list[int], workers: int) -> dict:
    configs = {f"{w // 1000}k": f"hermes-0.19,model.context_length={w}" for w in windows}
    started = time.perf_counter()
    # Billed in chars/4, the unit Hermes's replay measures in, so both sides do the same counting work (the
    # default, exact counts in the model's encoding, tokenises every message once more than Hermes does).
    # Creating the cell loads the agent stack, as starting the Hermes worker loads Hermes.
    cell = ReplayCell(FixedSummariser(), counter="rough")
    start_seconds = time.perf_counter() - started
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    with MemorySampler() as memory:
        frame = run_ab(recordings, configs, executor=ProcessExecutor(workers), cell=cell, progress=False)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before - memory.cpu_seconds
    ok = frame[frame["status"] == "ok"]
    replays = len(recordings) * len(windows)
    by_window = {name: {metric: int(ok.loc[ok["config"] == name, metric].sum())
                        for metric in ("api_calls", "compressions") if metric in ok.columns} for name in configs}
    per_session = {name: {row.session_id: (int(row.api_calls), int(row.compressions))
                          for row in ok[ok["config"] == name].itertuples()} for name in configs}
    return {"start_seconds": round(start_seconds, 2), "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
            "sampler_cpu_seconds": round(memory.cpu_seconds, 2),
            "replays_per_second": round(replays / seconds, 1), "failed_cells": int(len(frame) - len(ok)),
            "first_error": None if ok.shape[0] == len(frame) else frame.loc[frame["status"] != "ok", "error"].iloc[0],
            "peak_rss_mb": round(memory.peak_rss / 2**20), "peak_pss_mb": round(memory.peak_pss / 2**20),
            "by_window": by_window, "per_session": per_session}


def hermes_side(recordings: list[Recording], windows: list[int]) -> dict:
    sessions = [{"id": r.id, "messages": r.messages, "tools": r.tools} for r in recordings]
    started = time.perf_counter()
    with HermesReference(timeout=None) as ref:
        start_seconds = time.perf_counter() - started
        seconds = cpu = 0.0
        started = time.perf_counter()
        by_window, per_session = {}, {}
        for window in windows:
            timed = ref.replay_many_timed(sessions, context_length=window)
            seconds += timed["seconds"]
            cpu += timed["cpu_seconds"]
            results, name = timed["results"], f"{window // 1000}k"
            by_window[name] = {"api_calls": sum(r["totals"]["calls"] for r in results),
                               "compressions": sum(r["totals"]["compress_calls"] for r in results)}
            per_session[name] = {r["id"]: (r["totals"]["calls"], r["totals"]["compress_calls"]) for r in results}
        round_trip = time.perf_counter() - started
        version = ref.info.get("hermes_version")
    return {"hermes_version": version, "start_seconds": round(start_seconds, 2), "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2), "round_trip_seconds": round(round_trip, 2),
            "replays_per_second": round(len(sessions) * len(windows) / seconds, 1), "by_window": by_window,
            "per_session": per_session}


def agreement(ours: dict, theirs: dict) -> dict:
    """Per window: sessions both sides replayed, and how many agree on model calls and on compressions."""
    counts = {}
    for name, mine in ours.items():
        other = theirs.get(name, {})
        shared = [sid for sid in mine if sid in other]
        counts[name] = {"sessions": len(shared),
                        "same_api_calls": sum(mine[sid][0] == other[sid][0] for sid in shared),
                        "same_compressions": sum(mine[sid][1] == other[sid][1] for sid in shared)}
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--windows", default=",".join(str(w) for w in DEFAULT_WINDOWS),
                        help="comma-separated windows in tokens")
    parser.add_argument("--workers", type=int, default=1,
                        help="hermeslab's worker processes (default 1, as Hermes's one; wall time is then comparable)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of both sides (the best counts)")
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    add_out_option(parser, "ab_sweep")
    options = parser.parse_args()
    try:
        windows = [int(w) for w in options.windows.split(",")]
    except ValueError:
        parser.error(f"--windows must be comma-separated integers, got {options.windows!r}")
    if not windows or min(windows) <= 0:
        parser.error("--windows must be positive numbers of tokens")
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")

    record = Record("ab_sweep")
    started = time.perf_counter()
    recordings = load([options.datasets / name for name in options.files])
    load_seconds = time.perf_counter() - started
    our_runs, hermes_runs = [], []
    for _ in range(options.repeat):
        our_runs.append(our_side(recordings, windows, options.workers))
        hermes_runs.append(hermes_side(recordings, windows))
    agreed = agreement(our_runs[0]["per_session"], hermes_runs[0]["per_session"])
    for run in (*our_runs, *hermes_runs):
        del run["per_session"]
    ours = {**min(our_runs, key=lambda run: run["cpu_seconds"]),
            "seconds": min(run["seconds"] for run in our_runs),
            "start_seconds": our_runs[0]["start_seconds"],  # later repetitions find the stack imported
            "peak_rss_mb": max(run["peak_rss_mb"] for run in our_runs),
            "peak_pss_mb": max(run["peak_pss_mb"] for run in our_runs),
            "seconds_each": [run["seconds"] for run in our_runs],
            "cpu_seconds_each": [run["cpu_seconds"] for run in our_runs]}
    ours["replays_per_second"] = round(len(recordings) * len(windows) / ours["seconds"], 1)
    hermes = {**min(hermes_runs, key=lambda run: run["cpu_seconds"]),
              "seconds": min(run["seconds"] for run in hermes_runs),
              "seconds_each": [run["seconds"] for run in hermes_runs],
              "cpu_seconds_each": [run["cpu_seconds"] for run in hermes_runs]}
    hermes["replays_per_second"] = round(len(recordings) * len(windows) / hermes["seconds"], 1)
    cpu_ratio = hermes["cpu_seconds"] / ours["cpu_seconds"]
    # The sides need not make the same calls (a turn the loop ends early makes fewer): per model call too.
    calls = {side: sum(window["api_calls"] for window in run["by_window"].values()) for side, run in
             (("hermes", hermes), ("hermeslab", ours))}
    cpu_ratio_per_call = (hermes["cpu_seconds"] / calls["hermes"]) / (ours["cpu_seconds"] / calls["hermeslab"])
    # Nor the same compressions, each far costlier than a call: per compression as well.
    compressions = {side: sum(window["compressions"] for window in run["by_window"].values()) for side, run in
                    (("hermes", hermes), ("hermeslab", ours))}
    cpu_ratio_per_compression = ((hermes["cpu_seconds"] / compressions["hermes"])
                                 / (ours["cpu_seconds"] / compressions["hermeslab"])
                                 if compressions["hermes"] and compressions["hermeslab"] else None)
    speedup = hermes["seconds"] / ours["seconds"]
    all_ok = all(run["failed_cells"] == 0 for run in our_runs)
    record.finish({
        "files": options.files, "sessions": len(recordings), "windows": windows,
        "session_replays": len(recordings) * len(windows), "workers": options.workers, "hermes_workers": 1,
        "repeat": options.repeat, "load_seconds": round(load_seconds, 2),
        "cpu_ratio": round(cpu_ratio, 2),
        "cpu_ratio_inputs": {"hermes_cpu_seconds": hermes["cpu_seconds"], "hermeslab_cpu_seconds": ours["cpu_seconds"]},
        "cpu_ratio_per_call": round(cpu_ratio_per_call, 2),
        "cpu_ratio_per_call_inputs": {"hermes_api_calls": calls["hermes"], "hermeslab_api_calls": calls["hermeslab"]},
        "compressions": compressions,
        "compressions_ratio": round(compressions["hermeslab"] / compressions["hermes"], 3)
        if compressions["hermes"] else None,
        "cpu_ratio_per_compression": None if cpu_ratio_per_compression is None else round(cpu_ratio_per_compression, 2),
        "hermes_texts": texts_in_use(load_config("hermes-0.19").compression),
        "speedup": round(speedup, 2),
        "speedup_inputs": {"hermes_seconds": hermes["seconds"], "hermeslab_seconds": ours["seconds"]},
        "speedup_comparable": options.workers == 1,
        "hermeslab": ours, "hermes": hermes, "agreement": agreed,
        "cpu_ratio_target": CPU_RATIO_TARGET, "memory_target_mb": MEMORY_TARGET_MB,
        "all_cells_ok": all_ok, "meets_cpu_ratio": min(cpu_ratio, cpu_ratio_per_call) >= CPU_RATIO_TARGET and all_ok,
        "meets_memory": ours["peak_rss_mb"] <= MEMORY_TARGET_MB,
    }, options.out)


if __name__ == "__main__":
    main()
