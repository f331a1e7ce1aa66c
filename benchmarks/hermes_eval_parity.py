"""Decision parity of the hermes-eval-jev presets with the jev arm of Hermes's own compaction eval, on recordings.

Usage: python benchmarks/hermes_eval_parity.py [--reference-src PATH] [--datasets DIR] [--limit N] [--out FILE]

``--reference-src`` is a folder holding ``evals/compaction/jev_arm.py`` as read
from NousResearch/hermes-agent at the commit the presets were read at, with a
``SOURCE.json`` naming it (default ``~/.cache/hermeslab/hermes-agent-2416cfce-src``);
nothing here fetches it, so CI cannot run this benchmark. Every recording is
stepped twice, through that file's ``JevCompactor`` (its offline asker
standing in for the decision model) and through hermeslab's preset, with the
same token counts and trigger (``hermeslab.reference.hermes_eval_arms``).
Before every recorded assistant reply both sides record whether they
compacted and which messages they then hold; ``identical_decisions_share`` is
the share of those steps on which the records are equal, per variant and
overall, and ``reference_fallbacks`` counts the steps where the arm could not
fit the history into its request (hermeslab does not model that).

Prints one JSON line and writes it to benchmarks/results/hermes_eval_parity.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _record import Record, add_out_option, children_cpu_seconds
from _recordings import OWN, SHARED, recordings_by_file

from hermeslab.reference.hermes_eval_arms import default_source, ours, read_source, reference, variants
from hermeslab.reference.zoo.checks import Tally



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-src", type=Path, default=default_source(),
                        help="folder with evals/compaction/jev_arm.py and SOURCE.json (default: %(default)s)")
    parser.add_argument("--datasets", type=Path, default=SHARED, help="folder of recorded-session .jsonl files")
    parser.add_argument("--limit", type=int, default=None, help="sessions per file (default: all)")
    add_out_option(parser, "hermes_eval_parity")
    args = parser.parse_args()
    try:
        source = read_source(args.reference_src)
    except ValueError as exc:
        parser.error(str(exc))
    record = Record("hermes_eval_parity")
    data = recordings_by_file(args.datasets, args.limit)
    if not data:
        parser.error(f"no recordings (*.jsonl) in {args.datasets} and no {OWN.name}")
    names = [name for name, sessions in data.items() for _ in sessions]
    sessions = [session for group in data.values() for session in group]
    runs = variants()
    seconds = {"hermeslab": 0.0, "reference_parent": 0.0}
    children_before = children_cpu_seconds()
    started = time.process_time()
    theirs = reference([session["messages"] for session in sessions], runs, args.reference_src)
    seconds["reference_parent"] = time.process_time() - started
    seconds["reference"] = children_cpu_seconds() - children_before
    total, results, fallbacks = Tally(), {}, 0
    for params, reference_steps in zip(runs, theirs):
        per_file = {name: Tally() for name in data}
        for number, (name, session, steps) in enumerate(zip(names, sessions, reference_steps)):
            fallbacks += sum(1 for step in steps if "fallback" in step)
            started = time.process_time()
            mine = ours(session["messages"], params)
            seconds["hermeslab"] += time.process_time() - started
            per_file[name].add_session(str(session.get("id", number)), steps, mine)
        for tally in per_file.values():
            total.merge(tally)
        key = f"{params['preset']}@{params['window']}"
        results[key] = {"params": params, "files": {name: {**tally.as_record(), "differing_examples": tally.examples}
                                                    for name, tally in per_file.items()}}
    report = {"reference_source": source, "variants": results, "reference_fallbacks": fallbacks,
              "limit_per_file": args.limit, "files": {name: len(group) for name, group in data.items()},
              "cpu_seconds": {side: round(value, 2) for side, value in seconds.items()}, **total.as_record()}
    record.finish(report, args.out)


if __name__ == "__main__":
    main()
