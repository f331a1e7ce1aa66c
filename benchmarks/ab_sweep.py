"""A window sweep through the A/B runner beside the same sweep through Hermes 0.19.0's own compressor.

Every session of the shared recording files is replayed at each window
(16K, 32K and 64K by default) under the ``hermes-0.19`` preset with the
zero-latency stub summariser: on hermeslab's side through ``run_ab`` (the
agent loop, the metrics, local worker processes); on Hermes's side through
``HermesReference.replay_many`` (its trigger and ``ContextCompressor``, one
process). Both sides run in this one invocation, so the ratio compares like
with like on whatever else the machine is doing.

Wall seconds count the sweep only: recordings are loaded beforehand, and
each side's start (importing hermeslab's agent stack; starting the Hermes
worker) is timed apart as ``start_seconds``. ``speedup`` is Hermes's sweep
wall time over ours. CPU seconds are reported beside them (ours: this
process and its workers; Hermes's: its worker and this process during the
sweep) because on a shared machine wall time also measures the neighbours.

Peak memory of our side is sampled over this process and its worker
processes: ``peak_rss_mb`` sums their resident sets every 0.2 s (pages
shared after fork are counted once per process, so it overstates),
``peak_pss_mb`` sums their proportional sets (shared pages split between the
sharers: the memory actually in use) every 5 s, since reading them is costly.

Both sides run ``--repeat`` times, alternating (ours, Hermes's, ours, ...),
each repetition from a fresh start (new worker pool, new Hermes worker); the
figures reported are each side's fastest repetition, as ``timeit`` reports
the best of its repeats: on a shared machine the slower runs measure the
neighbours. Every repetition's wall time is listed too.

Usage: python benchmarks/ab_sweep.py [--windows 16000,32000,64000] [--workers N] [--repeat N] [--datasets DIR] [FILE ...]
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import threading
import time
from pathlib import Path

import psutil

from hermeslab.eval.ab import ReplayCell, run_ab
from hermeslab.eval.executors import ProcessExecutor
from hermeslab.eval.recording import read_recordings
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.recordings import Recording
from hermeslab.reference.client import HermesReference

DEFAULT_FILES = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl", "tau_bench_airline_gpt4o.jsonl")
DEFAULT_WINDOWS = (16_000, 32_000, 64_000)
SPEEDUP_TARGET = 5.0
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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def _sample_until_stopped(self) -> None:
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
    cell = ReplayCell(FixedSummariser())  # loads the agent stack, as starting the Hermes worker loads Hermes
    start_seconds = time.perf_counter() - started
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    with MemorySampler() as memory:
        frame = run_ab(recordings, configs, executor=ProcessExecutor(workers), cell=cell, progress=False)
    seconds = time.perf_counter() - started
    ok = frame[frame["status"] == "ok"]
    replays = len(recordings) * len(windows)
    by_window = {name: {metric: int(ok.loc[ok["config"] == name, metric].sum())
                        for metric in ("api_calls", "compressions") if metric in ok.columns} for name in configs}
    return {"start_seconds": round(start_seconds, 2), "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu_seconds() - cpu_before, 2),
            "replays_per_second": round(replays / seconds, 1), "failed_cells": int(len(frame) - len(ok)),
            "first_error": None if ok.shape[0] == len(frame) else frame.loc[frame["status"] != "ok", "error"].iloc[0],
            "peak_rss_mb": round(memory.peak_rss / 2**20), "peak_pss_mb": round(memory.peak_pss / 2**20),
            "by_window": by_window}


def children_cpu_seconds() -> float:
    """CPU time of the running children of this process (here: the Hermes worker alone)."""
    return sum(t.user + t.system for t in (c.cpu_times() for c in psutil.Process().children(recursive=True)))


def hermes_side(recordings: list[Recording], windows: list[int]) -> dict:
    sessions = [{"id": r.id, "messages": r.messages, "tools": r.tools} for r in recordings]
    started = time.perf_counter()
    with HermesReference(timeout=None) as ref:
        start_seconds = time.perf_counter() - started
        own_before, worker_before = cpu_seconds(), children_cpu_seconds()
        started = time.perf_counter()
        by_window = {}
        for window in windows:
            results = ref.replay_many(sessions, context_length=window)
            by_window[f"{window // 1000}k"] = {
                "api_calls": sum(r["totals"]["calls"] for r in results),
                "compressions": sum(r["totals"]["compress_calls"] for r in results)}
        seconds = time.perf_counter() - started
        cpu = cpu_seconds() - own_before + children_cpu_seconds() - worker_before
        version = ref.info.get("hermes_version")
    return {"hermes_version": version, "start_seconds": round(start_seconds, 2), "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "replays_per_second": round(len(sessions) * len(windows) / seconds, 1), "by_window": by_window}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--windows", default=",".join(str(w) for w in DEFAULT_WINDOWS),
                        help="comma-separated windows in tokens")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="repetitions of both sides (the fastest counts)")
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    options = parser.parse_args()
    try:
        windows = [int(w) for w in options.windows.split(",")]
    except ValueError:
        parser.error(f"--windows must be comma-separated integers, got {options.windows!r}")
    if not windows or min(windows) <= 0:
        parser.error("--windows must be positive numbers of tokens")

    started = time.perf_counter()
    recordings = load([options.datasets / name for name in options.files])
    load_seconds = time.perf_counter() - started
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    our_runs, hermes_runs = [], []
    for _ in range(options.repeat):
        our_runs.append(our_side(recordings, windows, options.workers))
        hermes_runs.append(hermes_side(recordings, windows))
    ours = {**min(our_runs, key=lambda run: run["seconds"]),
            "start_seconds": our_runs[0]["start_seconds"],  # later repetitions find the stack imported
            "peak_rss_mb": max(run["peak_rss_mb"] for run in our_runs),
            "peak_pss_mb": max(run["peak_pss_mb"] for run in our_runs),
            "seconds_each": [run["seconds"] for run in our_runs]}
    hermes = {**min(hermes_runs, key=lambda run: run["seconds"]), "seconds_each": [run["seconds"] for run in hermes_runs]}
    speedup = hermes["seconds"] / ours["seconds"]
    print(json.dumps({
        "benchmark": "ab_sweep", "files": options.files, "sessions": len(recordings), "windows": windows,
        "session_replays": len(recordings) * len(windows), "workers": options.workers, "repeat": options.repeat,
        "load_seconds": round(load_seconds, 2), "hermeslab": ours, "hermes": hermes,
        "speedup": round(speedup, 2), "cpu_ratio": round(hermes["cpu_seconds"] / ours["cpu_seconds"], 2),
        "speedup_target": SPEEDUP_TARGET, "memory_target_mb": MEMORY_TARGET_MB,
        "all_cells_ok": all(run["failed_cells"] == 0 for run in our_runs), "meets_speedup": speedup >= SPEEDUP_TARGET,
        "meets_memory": ours["peak_rss_mb"] <= MEMORY_TARGET_MB,
    }))


if __name__ == "__main__":
    main()
