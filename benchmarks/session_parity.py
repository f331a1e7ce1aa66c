"""Whole-session parity of the hermes-0.19 preset with Hermes 0.19.0 driving its own triggers.

For every shared recording and window, the session is replayed twice with the
same stand-in summary text:

* through hermeslab: ``replay(..., fast=True)`` under
  ``load_config("hermes-0.19,model.context_length=W")``;
* through the real Hermes 0.19.0 in its own virtualenv: the reference worker's
  agent replay (its preflight, pressure, per-turn and overflow checks and its
  ``compress_context`` wrapper), prompts billed with the same exact count.

A session-window is identical when the sequence of (call index, trigger,
output message count) of its compressions is, and content-identical when, in
addition, every compression's output is the same message for message (roles,
contents, tool calls with their ids and arguments, tool-call ids) and every
call is billed the same prompt. Prompt-token totals are the billed counts both
sides see. The recordings are the files given, else every ``*.jsonl`` of the
shared datasets folder beside the checkout (``../shared/datasets``). The last
line is one JSON object with ``identical_session_windows``,
``content_identical_session_windows``, ``session_windows``,
``max_token_total_diff_pct`` and ``hermes_texts`` (whose wording hermeslab
wrote: Hermes's own, read from the installed hermes-agent, or hermeslab's);
``--sample N`` takes the first N sessions of each file (a quick look),
``--mismatches`` how many first differences of each kind to show.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import Record, add_out_option  # noqa: E402

from hermeslab.context.hermes_texts import texts_in_use  # noqa: E402
from hermeslab.policies.loading import load_config  # noqa: E402
from hermeslab.eval.session_parity import compare, hermeslab_session, planned_session, session_encoding  # noqa: E402
from hermeslab.recordings import Recording  # noqa: E402
from hermeslab.reference.client import HermesReference  # noqa: E402

#: The shared recordings: ``../shared/datasets`` beside the checkout.
DATASETS = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets"
WINDOWS = (16_000, 32_000, 64_000)
#: Sessions per worker request (one JSON line each way).
BATCH = 25


def load(path: Path, sample: int | None) -> list[Recording]:
    with path.open(encoding="utf-8") as handle:
        recordings = [Recording.from_dict(json.loads(line)) for line in handle if line.strip()]
    return recordings[:sample] if sample else recordings


def hermes_runs(worker: HermesReference, recordings: list[Recording], window: int) -> list[dict]:
    """The worker's runs, batched by encoding (each recording billed in its model's encoding)."""
    runs: dict[str, dict] = {}
    by_encoding: dict[str, list[Recording]] = {}
    for recording in recordings:
        by_encoding.setdefault(session_encoding(recording), []).append(recording)
    for encoding, group in by_encoding.items():
        for start in range(0, len(group), BATCH):
            batch = group[start:start + BATCH]
            planned = [planned_session(recording) for recording in batch]
            for run in worker.agent_replay_many(planned, context_length=window, encoding=encoding):
                runs[run["id"]] = run
    return [runs[recording.id] for recording in recordings]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=sorted(DATASETS.glob("*.jsonl")),
                        help="recording files (JSONL); default: every *.jsonl in ../shared/datasets")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--mismatches", type=int, default=5)
    add_out_option(parser, "session_parity")
    options = parser.parse_args()
    record = Record("session_parity")
    windows = [int(w) for w in options.windows.split(",")]
    missing = [str(path) for path in options.files if not path.is_file()]
    if missing or not options.files:
        parser.error(f"no recordings at {', '.join(missing) or DATASETS}: give JSONL recording files")
    cells, examples, content_examples = [], [], []
    identical = content_identical = total = 0
    max_diff = 0.0
    wording = None
    with HermesReference() as worker:
        for path in options.files:
            recordings = load(path, options.sample)
            for window in windows:
                config = load_config(f"hermes-0.19,model.context_length={window}")
                wording = texts_in_use(config.compression)
                theirs = hermes_runs(worker, recordings, window)
                same = same_content = compressing = same_compressing = 0
                cell_max = 0.0
                for recording, hermes in zip(recordings, theirs):
                    ours = hermeslab_session(recording, config)
                    verdict = compare(ours, hermes)
                    same += verdict["identical"]
                    same_content += verdict["content_identical"]
                    if hermes["compressions"] or ours["compressions"]:
                        compressing += 1
                        same_compressing += verdict["identical"]
                    cell_max = max(cell_max, abs(verdict["total_diff_pct"]))
                    where = {"file": path.name, "window": window, "id": recording.id}
                    if not verdict["identical"] and len(examples) < options.mismatches:
                        examples.append({**where, **verdict})
                    elif (verdict["identical"] and not verdict["content_identical"]
                          and len(content_examples) < options.mismatches):
                        content_examples.append({**where, "first_content_difference":
                                                 verdict["first_content_difference"],
                                                 "total_diff_pct": round(verdict["total_diff_pct"], 4)})
                cell = {"file": path.name, "window": window, "sessions": len(recordings), "identical": same,
                        "content_identical": same_content, "compressing": compressing,
                        "identical_compressing": same_compressing, "max_token_total_diff_pct": round(cell_max, 4)}
                print(json.dumps(cell), file=sys.stderr, flush=True)
                cells.append(cell)
                identical += same
                content_identical += same_content
                total += len(recordings)
                max_diff = max(max_diff, cell_max)
        hermes_version = worker.info.get("hermes_version")
    record.finish({"hermes_version": hermes_version, "hermes_texts": wording, "windows": windows,
                   "sample": options.sample, "files": [path.name for path in options.files], "cells": cells,
                   "examples": examples, "content_examples": content_examples,
                   "identical_session_windows": identical, "content_identical_session_windows": content_identical,
                   "session_windows": total, "identical_share": round(identical / total, 4) if total else None,
                   "content_identical_share": round(content_identical / total, 4) if total else None,
                   "max_token_total_diff_pct": round(max_diff, 4)}, options.out)


if __name__ == "__main__":
    main()
