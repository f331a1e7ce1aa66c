"""Decision parity of the openhands-* presets with OpenHands' own condensers on recorded sessions.

Usage: python benchmarks/openhands_parity.py [--datasets DIR] [--limit N] [--only NAME ...] [--out FILE]

Every recording is stepped twice: through OpenHands' condenser in its own
virtualenv (openhands-sdk 1.58.2 for the LLM summarizing condenser, openhands-ai
0.62.0 for observation masking and amortized forgetting; the summary model is a
stub), and through hermeslab's preset with the same sizes. Before every recorded
assistant reply both sides record what they condensed and which events they
would send; ``identical_decisions_share`` is the share of those steps on which
the two records are equal. Each condenser runs at OpenHands' default sizes and
at smaller ones, so that the shorter recordings condense too.

Prints one JSON line and writes it to benchmarks/results/openhands_parity.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _record import Record, add_out_option
from _recordings import SHARED, recordings_by_file

from hermeslab.policies.openhands import AMORTIZED, MASKING, SUMMARIZING
from hermeslab.reference.openhands.client import OpenHandsReference
from hermeslab.reference.openhands.compare import Tally
from hermeslab.reference.openhands.steps import preset_config, replay
from hermeslab.reference.openhands.venv import LEGACY, SDK

BATCH = 25

#: (name, release, OpenHands condenser, its parameters, preset, hermeslab overrides).
VARIANTS = [
    ("llm_summarizing_default", SDK, "llm_summarizing", {"max_size": 80, "keep_first": 4}, SUMMARIZING, {}),
    ("llm_summarizing_small", SDK, "llm_summarizing", {"max_size": 20, "keep_first": 2}, SUMMARIZING,
     {"compression.trigger_events": 20, "compression.keep_first_events": 2}),
    ("observation_masking_default", LEGACY, "observation_masking", {"attention_window": 100}, MASKING, {}),
    ("observation_masking_small", LEGACY, "observation_masking", {"attention_window": 10}, MASKING,
     {"compression.trigger_events": 10}),
    ("amortized_forgetting_default", LEGACY, "amortized_forgetting", {"max_size": 100, "keep_first": 1},
     AMORTIZED, {}),
    ("amortized_forgetting_small", LEGACY, "amortized_forgetting", {"max_size": 20, "keep_first": 1}, AMORTIZED,
     {"compression.trigger_events": 20}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=SHARED, help="folder of recorded-session .jsonl files")
    parser.add_argument("--limit", type=int, default=None, help="sessions per file (default: all)")
    parser.add_argument("--only", nargs="*", default=None, help="variant names to run (default: all)")
    add_out_option(parser, "openhands_parity")
    args = parser.parse_args()
    record = Record("openhands_parity")
    data = recordings_by_file(args.datasets, args.limit)
    variants = [v for v in VARIANTS if args.only is None or v[0] in args.only]
    overall, per_variant, seconds = Tally(), {}, {"openhands": 0.0, "hermeslab": 0.0}
    per_condenser: dict[str, Tally] = {}
    versions = {}
    for release in {v[1] for v in variants}:
        with OpenHandsReference(release) as reference:
            versions[release.distribution] = reference.info.get("version")
            for name, _, condenser, params, preset, overrides in (v for v in variants if v[1] == release):
                config = preset_config(preset, overrides)
                per_file = {}
                for file_name, sessions in data.items():
                    tally = Tally()
                    for start in range(0, len(sessions), BATCH):
                        batch = sessions[start:start + BATCH]
                        started = time.perf_counter()
                        theirs = reference.replay(batch, condenser, params)
                        seconds["openhands"] += time.perf_counter() - started
                        started = time.perf_counter()
                        ours = [replay(session["messages"], config) for session in batch]
                        seconds["hermeslab"] += time.perf_counter() - started
                        for offset, (session, a, b) in enumerate(zip(batch, theirs, ours)):
                            session_id = str(session.get("id", start + offset))
                            tally.add_session(session_id, a, b)
                            overall.add_session(session_id, a, b, keep_examples=0)
                            per_condenser.setdefault(condenser, Tally()).add_session(session_id, a, b, keep_examples=0)
                    per_file[file_name] = {**tally.as_record(), "differing_examples": tally.examples[:1]}
                per_variant[name] = {"condenser": condenser, "release": release.requirement, "params": params,
                                     "preset": preset, "overrides": overrides, "files": per_file}
    report = {"releases": versions, "variants": per_variant, "limit_per_file": args.limit,
              "per_condenser": {name: tally.as_record() for name, tally in sorted(per_condenser.items())},
              "seconds": {key: round(value, 1) for key, value in seconds.items()},
              **overall.as_record()}
    record.finish(report, args.out)


if __name__ == "__main__":
    main()
