"""Decision parity of the zoo policies with their agents' own code on recorded sessions.

Usage: python benchmarks/zoo_parity.py [--datasets DIR] [--limit N] [--only PRESET ...] [--out FILE]

Every policy with a parity check is run over every recording twice: through
the agent's own code in its virtualenv, and through hermeslab's strategy and
trigger with the same token counts. A policy plugs its check in with a module
``hermeslab/reference/<name>_parity.py`` (or ``hermeslab/reference/zoo/...``)
exporting ``CHECK``, a ``hermeslab.reference.zoo.checks.ParityCheck``; that
module's docstring says what the two stepping functions return. Before
every recorded assistant reply both sides record whether they compacted and
which messages they would send; ``identical_decisions_share`` is the share of
those steps on which the two records are equal, per policy and overall. A
policy whose environment is not installed is reported as not run, with the
command that installs it, and counts in no share.

Prints one JSON line and writes it to benchmarks/results/zoo_parity.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _record import Record, add_out_option, children_cpu_seconds
from _recordings import OWN, SHARED, recordings_by_file

from hermeslab.reference.venv import ReferenceNotInstalledError
from hermeslab.reference.zoo.checks import ParityCheck, Tally, discover



def run_check(check: ParityCheck, data: dict[str, list[dict]], seconds: dict[str, float]) -> dict:
    """One policy's variants over every recording: per variant and file, and the policy's total."""
    names = [name for name, sessions in data.items() for _ in sessions]
    sessions = [session for group in data.values() for session in group]
    recordings = [session["messages"] for session in sessions]
    started = time.process_time()
    theirs = check.reference(recordings, [variant.params for variant in check.variants])
    seconds["reference_parent"] += time.process_time() - started
    total, variants = Tally(), {}
    for variant, reference_steps in zip(check.variants, theirs):
        per_file: dict[str, Tally] = {name: Tally() for name in data}
        for number, (name, session, steps) in enumerate(zip(names, sessions, reference_steps)):
            started = time.process_time()
            ours = check.ours(session["messages"], variant.params)
            seconds["hermeslab"] += time.process_time() - started
            per_file[name].add_session(str(session.get("id", number)), steps, ours)
        for tally in per_file.values():
            total.merge(tally)
        variants[variant.name] = {"params": variant.params,
                                  "files": {name: {**tally.as_record(), "differing_examples": tally.examples}
                                            for name, tally in per_file.items()}}
    return {"package": check.requirement, "variants": variants, **total.as_record()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=SHARED, help="folder of recorded-session .jsonl files")
    parser.add_argument("--limit", type=int, default=None, help="sessions per file (default: all)")
    parser.add_argument("--only", nargs="*", default=None, help="presets to run (default: every checked policy)")
    add_out_option(parser, "zoo_parity")
    args = parser.parse_args()
    record = Record("zoo_parity")
    data = recordings_by_file(args.datasets, args.limit)
    if not data:
        parser.error(f"no recordings (*.jsonl) in {args.datasets} and no {OWN.name}")
    checks, broken = discover()
    unknown = sorted(set(args.only or ()) - set(checks))
    if unknown:
        parser.error(f"no parity check for {', '.join(unknown)}; checked presets: {', '.join(sorted(checks))}")
    seconds = {"hermeslab": 0.0, "reference": 0.0, "reference_parent": 0.0}
    policies, not_run, overall = {}, {}, Tally()
    for preset, check in sorted(checks.items()):
        if args.only is not None and preset not in args.only:
            continue
        before = children_cpu_seconds()  # a worker's CPU is counted once it exits, when its check ends
        try:
            policies[preset] = run_check(check, data, seconds)
        except ReferenceNotInstalledError as exc:
            not_run[preset] = {"package": check.package.requirement, "install": exc.command}
            continue
        seconds["reference"] += children_cpu_seconds() - before
        overall.steps += policies[preset]["steps"]
        overall.identical += policies[preset]["identical_steps"]
    shares = {name: result["identical_decisions_share"] for name, result in policies.items()}
    report = {"shares": shares, "not_run": not_run, "checks_not_importable": broken, "policies": policies, "limit_per_file": args.limit,
              "files": {name: len(sessions) for name, sessions in data.items()},
              "cpu_seconds": {side: round(value, 2) for side, value in seconds.items()},
              "steps": overall.steps, "identical_steps": overall.identical,
              "identical_decisions_share": None if overall.share is None else round(overall.share, 6),
              "min_share": min((s for s in shares.values() if s is not None), default=None)}
    record.finish(report, args.out)


if __name__ == "__main__":
    main()
