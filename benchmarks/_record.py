"""What every benchmark's JSON line carries besides its figures, and where the line is stored.

A benchmark makes a ``Record`` before it measures anything and calls
``Record.finish(report)`` at the end; the report then gets the commit measured
(``git rev-parse HEAD``; ``dirty`` when ``git status --porcelain`` lists
anything outside ``benchmarks/results/``, where runs store their lines), the
load average before and after the run, the machine's core count and this
process's CPU seconds (``time.process_time``) and its waited-for
children's (``RUSAGE_CHILDREN``) over the whole run, and is printed as the last
line of output and written to ``benchmarks/results/<benchmark>.json`` (or to
``--out``; ``--out -`` writes no file, for trial runs). Per-side CPU seconds
of the timed regions are each benchmark's own fields.

Only read-only git commands are run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def git_state() -> dict[str, object]:
    """The commit measured and whether the work tree differed from it."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)

    head, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--", ".", ":!benchmarks/results")
    return {"commit": head.stdout.strip() if head.returncode == 0 else None,
            "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def loadavg() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def children_cpu_seconds() -> float:
    """User + system seconds of every child process this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def add_out_option(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("--out", default=str(RESULTS / f"{name}.json"),
                        help=f"file the JSON line is written to (default benchmarks/results/{name}.json; "
                             "'-' writes none)")


class Record:
    """Run-wide fields of one benchmark run: start it before measuring, ``finish`` it with the report."""

    def __init__(self, name: str):
        self.name = name
        self.git = git_state()
        self.load_before = loadavg()
        self.started = time.perf_counter()
        self.cpu_before = time.process_time()
        self.children_before = children_cpu_seconds()

    def finish(self, report: dict, out: str | None) -> dict:
        """Add the run-wide fields, print the line and store it; returns the full report."""
        full = {
            "benchmark": self.name,
            **self.git,
            "load_before": self.load_before,
            "load_after": loadavg(),
            "cpu_count": os.cpu_count(),
            "wall_seconds": round(time.perf_counter() - self.started, 1),
            "process_cpu_seconds": round(time.process_time() - self.cpu_before, 2),
            "children_cpu_seconds": round(children_cpu_seconds() - self.children_before, 2),
            **{key: value for key, value in report.items() if key != "benchmark"},
        }
        line = json.dumps(full)
        if out and out != "-":
            path = Path(out)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(line + "\n", encoding="utf-8")
        print(line, flush=True)
        return full
