"""How long the ``hermeslab`` command takes to answer: --help, sessions with no lab, and chat's first prompt.

Each command runs as a fresh process of the installed console script, once
untimed (so the disk is warm) and then ``--repeat`` times, the commands taking
turns so a change in machine load touches them alike. ``sessions`` runs in an
empty temporary folder (no lab database); ``chat`` runs in another one and is
timed until its ``you>`` prompt appears on the pipe, then told ``/quit``.
A target is met when the median is under it. CPU seconds are those of the
child processes (user + system), summed over the timed runs.

Usage: python benchmarks/startup.py [--repeat N] [--out FILE]
Prints one JSON object as its last line and writes the same line to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
TARGETS_S = {"help": 1.0, "sessions": 1.0, "chat": 2.0}
#: What cmd_chat passes to input() once the agent is ready.
CHAT_PROMPT = b"you> "
TIMEOUT_S = 60.0


def command() -> list[str]:
    """The console script beside this interpreter, as a user runs it; ``-m hermeslab.cli`` if it is missing."""
    script = Path(sys.executable).with_name("hermeslab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hermeslab.cli"]


def run_help(exe: list[str], folder: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run([*exe, "--help"], cwd=folder, capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - started
    if result.returncode != 0 or "sessions" not in result.stdout:
        raise RuntimeError(f"hermeslab --help failed ({result.returncode}): {result.stderr[-2000:]}")
    return seconds


def run_sessions(exe: list[str], folder: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run([*exe, "sessions"], cwd=folder, capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - started
    if "no lab database" not in result.stdout:
        raise RuntimeError(f"hermeslab sessions did not report the missing lab: {result.stdout}{result.stderr[-2000:]}")
    return seconds


def run_chat(exe: list[str], folder: Path) -> float:
    """Seconds until the prompt is on standard output; then the chat is ended and waited for (untimed)."""
    started = time.perf_counter()
    process = subprocess.Popen([*exe, "chat"], cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    seen = b""
    try:
        while CHAT_PROMPT not in seen:
            left = started + TIMEOUT_S - time.perf_counter()
            ready, _, _ = select.select([process.stdout], [], [], max(left, 0.0))
            chunk = os.read(process.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                process.kill()
                raise RuntimeError(f"hermeslab chat showed no prompt: {seen.decode(errors='replace')}"
                                   f"{process.stderr.read().decode(errors='replace')[-2000:]}")
            seen += chunk
        seconds = time.perf_counter() - started
        process.communicate(b"/quit\n", timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"hermeslab chat exited with {process.returncode}")
    return seconds


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def git_commit() -> dict[str, object]:
    """The commit measured, and whether the work tree differed from it (read-only git calls)."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    return {"commit": head.stdout.strip() if head.returncode == 0 else None,
            "uncommitted_changes": git("diff-index", "--quiet", "HEAD", "--", ".", ":!benchmarks/results").returncode == 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of each command (default 7)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json",
                        help="file the JSON line is written to")
    options = parser.parse_args()
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")

    exe = command()
    runs: dict[str, Callable[[list[str], Path], float]] = {"help": run_help, "sessions": run_sessions,
                                                           "chat": run_chat}
    load_before = os.getloadavg()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, float] = dict.fromkeys(runs, 0.0)
    base = Path(tempfile.mkdtemp(prefix="hermeslab_startup_"))
    try:
        for run in runs.values():  # warm-up: the disk cache, not the numbers
            run(exe, Path(tempfile.mkdtemp(dir=base)))
        for _ in range(options.repeat):
            for name, run in runs.items():
                folder = Path(tempfile.mkdtemp(dir=base))  # chat leaves a lab behind: each run starts empty
                before = children_cpu_s()
                seconds[name].append(run(exe, folder))
                cpu[name] += children_cpu_s() - before
    finally:
        shutil.rmtree(base, ignore_errors=True)

    commands = {name: {"median_s": round(statistics.median(values), 3), "max_s": round(max(values), 3),
                       "cpu_s_total": round(cpu[name], 3), "target_s": TARGETS_S[name],
                       "met": statistics.median(values) < TARGETS_S[name]}
                for name, values in seconds.items()}
    report = {
        "benchmark": "startup",
        "command": " ".join(Path(part).name if "/" in part else part for part in exe),  # no machine paths
        "repeat": options.repeat,
        "loadavg_before": [round(v, 2) for v in load_before],
        "loadavg_after": [round(v, 2) for v in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        **git_commit(),
        "commands": commands,
        "all_targets_met": all(entry["met"] for entry in commands.values()),
    }
    line = json.dumps(report)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(line + "\n", encoding="utf-8")
    print(line)


if __name__ == "__main__":
    main()
