"""Recovery matrix: every fault kind at 5%, 20% and 50% of the calls, over the scripted sessions.

The offline model is served behind the fault-injecting endpoint and reached
through the real ``openai`` client. For each (kind, rate) the same sessions
run against a fault-free baseline of the same process: the share of turns
completed, the share with the baseline's answer, and the extra API calls,
latency (simulated: backoff pauses plus client timeouts) and tokens.

The kinds include the output-cap refusals of four providers (cured by one
retry with a lower ``max_tokens``) and transport failures reported by their
words alone (no status, no typed error, as custom providers and gateways send
them). The matrix runs with the primary provider alone; the three faults no
retry can cure (401, 403 billing, 404) run a second time with a healthy
fallback provider configured.

Prints a table, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from hermeslab.eval.fault_matrix import RATES, SESSIONS, Cell, run_matrix
from hermeslab.providers.faults import FAULT_KINDS

PERMANENT = ("auth", "billing", "model_not_found")


def table(cells: list[Cell]) -> str:
    lines = [f"{'fault':<22} {'rate':>5} {'fb':>3} {'faults':>6} {'done':>5} {'right':>5} {'calls':>6} "
             f"{'ratio':>6} {'latency':>8} {'tokens':>7}"]
    for c in cells:
        lines.append(f"{c.kind:<22} {c.rate:>5.2f} {'yes' if c.fallback else 'no':>3} {c.faults:>6} "
                     f"{c.completed:>5.2f} {c.correct:>5.2f} {c.extra_calls:>+6d} {c.calls_ratio:>6.2f} "
                     f"{c.extra_latency_s:>+8.1f} {c.extra_tokens:>+7d}")
    return "\n".join(lines)


def summary(cells: list[Cell], rate: float) -> dict[str, Any]:
    """The worst shares, the mean call ratio and the kinds that lost a turn, over the recoverable kinds at one
    rate (primary only)."""
    chosen = [c for c in cells if c.kind not in PERMANENT and c.rate == rate and not c.fallback]
    return {"min_completed": round(min(c.completed for c in chosen), 3),
            "min_correct": round(min(c.correct for c in chosen), 3),
            "mean_calls_ratio": round(sum(c.calls_ratio for c in chosen) / len(chosen), 3),
            "incomplete": sorted(c.kind for c in chosen if c.completed < 1.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=list(FAULT_KINDS), help="fault kinds (default: all)")
    parser.add_argument("--rates", nargs="*", type=float, default=list(RATES))
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        baseline, cells = run_matrix(args.kinds, args.rates, workspace=workspace)
        permanent = [kind for kind in args.kinds if kind in PERMANENT]
        if permanent:
            cells += run_matrix(permanent, args.rates, workspace=workspace, fallback=True)[1]
    print(table(cells))
    result = {
        "benchmark": "recovery_matrix",
        "sessions": len(SESSIONS),
        "turns": len(baseline.turns),
        "baseline": {"api_calls": baseline.attempts, "tokens": baseline.tokens},
        "recoverable": {f"{rate:.2f}": summary(cells, rate) for rate in args.rates
                        if any(c.kind not in PERMANENT for c in cells)},
        "cells": [cell.as_dict() for cell in cells],
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
