"""Run a benchmark that does not store its own result, and store its JSON line with the run-wide fields.

For benchmarks that end with one JSON line but do not record the commit, the
machine load or CPU time themselves (``recordings_replay.py``,
``recovery_matrix.py``): the benchmark runs as a child process with this
interpreter, its output passes through, and its last line gets the fields of
``_record.Record`` (commit, dirty, load before and after, and in
``children_cpu_seconds`` the CPU seconds of the benchmark and every process
it waited for: all sides together, since the benchmark does not split them)
and is written to ``benchmarks/results/<benchmark>.json``.

Usage: python benchmarks/store_result.py [--out FILE] benchmarks/recovery_matrix.py [ARGS ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _record import RESULTS, Record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="default benchmarks/results/<benchmark>.json; '-' writes none")
    parser.add_argument("script", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()

    record = Record(options.script.stem)
    process = subprocess.Popen([sys.executable, str(options.script), *options.args], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    last = ""
    for line in process.stdout:
        if line.strip():
            if last:
                print(last, end="", flush=True)
            last = line
    if process.wait() != 0:
        raise SystemExit(f"{options.script} exited with {process.returncode}")
    try:
        report = json.loads(last)
    except ValueError:
        raise SystemExit(f"{options.script} did not end with a JSON line: {last[:200]!r}") from None
    record.name = str(report.get("benchmark") or options.script.stem)
    report["command"] = " ".join([Path(options.script).as_posix(), *options.args])
    report["cpu_note"] = "children_cpu_seconds: the benchmark process and its children, all sides together"
    record.finish(report, options.out if options.out is not None else str(RESULTS / f"{record.name}.json"))


if __name__ == "__main__":
    main()
