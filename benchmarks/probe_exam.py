"""The probe exam with the perfect reader over the shipped and shared recordings: the bank and the controls checked.

Every session is replayed under ``seed`` and ``hermes-0.19`` at 8K and 16K
windows; the probes of every effective compaction are asked in three arms
(compacted, ceiling, floor) of the perfect reader (``readers.PerfectReader``:
the gold when its context holds it, else ``unknown``) and judged by the
deterministic matcher. With that answerer the ceiling must score 1.0 and the
floor 0.0 on the fittable probes; anything else is a defect of the bank or
the matcher. The exam then runs a second time on the same lab, and every
answer must come from the lab's cache (``second_run_cache_hit_share``).

Reported: probes and sessions examined, the probe types seen, the ceiling
and floor means, the scorecard's overall rows per preset and window, the
paired difference ``seed`` − ``hermes-0.19`` per probe type and window with
its 95% session-bootstrap interval, the two runs' CPU seconds, and what the
figures are measured with (answerer, judge, controls, token unit). Every
recording is billed in one unit (exact cl100k_base counts), whatever model it
names, so retained tokens compare across files.

Usage: python benchmarks/probe_exam.py [--windows 8000,16000] [--datasets DIR] [--limit N] [FILE ...]
The shipped recordings (``datasets/hermeslab_offline_sessions.jsonl``) and
every ``*.jsonl`` of ``--datasets`` (default ``../shared/datasets`` beside the
checkout) are read, then any FILE given.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from _record import ROOT, Record, add_out_option

from hermeslab.eval.ab import gather_recordings
from hermeslab.eval.probes.paired import paired_scores
from hermeslab.eval.probes.readers import PerfectReader
from hermeslab.eval.probes.run import run_exam
from hermeslab.eval.probes.scorecard import CONTROLS, SCORE, overall_of, problem, scorecard

PRESETS = ("hermes-0.19", "seed")
SHIPPED = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"
#: One token unit for every recording, whatever model it names: exact cl100k_base counts.
COUNTER = "tiktoken"


def finite(value: float) -> float | None:
    """JSON has no NaN: an undefined figure is null."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 4)


def inputs(datasets: Path, files: list[str], limit: int | None) -> list:
    """The recordings of the shipped file, of every JSONL in ``datasets``, and of ``files`` (``limit`` per file)."""
    paths = [SHIPPED, *sorted(datasets.glob("*.jsonl")), *map(Path, files)]
    recordings = []
    for path in paths:
        found, problems = gather_recordings([path], limit=limit)
        for problem_line in problems:
            print(f"skipped {problem_line}", flush=True)
        recordings.extend(found)
    return recordings


def timed_exam(recordings: list, windows: list[int], lab: Path):
    started = time.process_time()
    frame = run_exam(recordings, list(PRESETS), windows=windows, answerer=PerfectReader(), lab=lab, progress=False,
                     counter=COUNTER)
    return frame, round(time.process_time() - started, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", metavar="FILE", help="more recordings (JSONL)")
    parser.add_argument("--datasets", default=str(ROOT.parent / "shared" / "datasets"),
                        help="folder whose *.jsonl recordings are examined (default ../shared/datasets)")
    parser.add_argument("--windows", default="8000,16000", help="context windows, tokens, comma-separated")
    parser.add_argument("--limit", type=int, help="only the first N sessions of each file")
    parser.add_argument("--resamples", type=int, default=2_000, help="bootstrap resamples per interval")
    add_out_option(parser, "probe_exam")
    args = parser.parse_args()
    record = Record("probe_exam")
    windows = [int(part) for part in args.windows.split(",") if part.strip()]
    recordings = inputs(Path(args.datasets), args.files, args.limit)
    with tempfile.TemporaryDirectory(prefix="probe-exam-") as folder:
        lab = Path(folder) / "lab.duckdb"
        first, first_cpu = timed_exam(recordings, windows, lab)
        second, second_cpu = timed_exam(recordings, windows, lab)
    asked = second.attrs["cache_hits"] + second.attrs["calls_made"]
    fittable = first[first["fittable"].eq(True) & first["score"].notna()]
    table = scorecard(first, "hermes-0.19", n_resamples=args.resamples)
    overall = overall_of(table)
    paired = paired_scores(first, "hermes-0.19", "seed", n_resamples=args.resamples)
    report = {
        "answerer": first.attrs["answerer"], "judge": first.attrs["judge"], "controls": CONTROLS, "score": SCORE,
        "token_unit": first.attrs["token_unit"], "bank_hash": first.attrs["bank_hash"], "windows": windows,
        "presets": list(PRESETS), "recordings": len(recordings), "sessions": first.attrs["sessions"],
        "probes": first.attrs["probes"], "questions": len(first),
        "probe_types": int(first["probe_type"].nunique()),
        "probes_by_type": {kind: int(n) for kind, n in
                           first[first["arm"] == "compacted"].groupby("probe_type").size().items()},
        "unfittable_ceilings": int((first["arm"].eq("ceiling") & ~first["fittable"].eq(True)).sum()),
        "ceiling": finite(fittable.loc[fittable["arm"] == "ceiling", "score"].mean()),
        "floor": finite(fittable.loc[fittable["arm"] == "floor", "score"].mean()),
        "overall": {f"{config}@{window}": {"raw": finite(row.raw), "normalised": finite(row.normalised),
                                           "retained_tokens": finite(row.retained_tokens), "probes": int(row.n_probes)}
                    for (window, config), row in overall.iterrows()},
        "paired_ci": {str(window): {kind: {"n_pairs": int(row.n_pairs), "n_sessions": int(row.n_sessions),
                                           "seed_minus_hermes": finite(row.mean_diff), "ci_low": finite(row.ci_low),
                                           "ci_high": finite(row.ci_high), "ci_method": row.ci_method}
                                    for (w, kind), row in paired.iterrows() if w == window}
                      for window in windows},
        "paired_ci_how": "seed - hermes-0.19 on the probes both presets asked (same recording, window, probe id), "
                         "95% percentile interval of a bootstrap resampling sessions",
        "first_run": {"calls_made": first.attrs["calls_made"], "cache_hits": first.attrs["cache_hits"],
                      "cpu_seconds": first_cpu},
        "second_run": {"calls_made": second.attrs["calls_made"], "cache_hits": second.attrs["cache_hits"],
                       "cpu_seconds": second_cpu},
        "second_run_cache_hit_share": finite(second.attrs["cache_hits"] / asked) if asked else None,
        "problem": problem(first),
    }
    record.finish(report, args.out)


if __name__ == "__main__":
    main()
