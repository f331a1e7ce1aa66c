"""Hermes's answer to a failed summary: abort or fall back by the failure's kind, and cool down on a ladder.

Lean-era Hermes keeps the transcript unchanged when the summary call fails for
a reason waiting or a canned summary cannot fix (credentials or quota, the
network, an overloaded provider, an empty answer), and when a summary call
stalls for the first time; a stall that follows a stall gets the deterministic
fallback summary, so a route that keeps stalling degrades once instead of
stalling every turn. Any other failure gets the fallback summary at once.
Each compaction that ends without a summary cools automatic compaction down
for the next rung of a ladder (60, 300, then 900 seconds), and a compaction
that goes through starts the ladder again.

hermeslab's summariser names each failed call's category
(``summary.classify_failure``); they map onto Hermes's kinds as listed below.
"""

from __future__ import annotations

from typing import Sequence

#: Seconds of cooldown after the 1st, 2nd, and 3rd and later consecutive compactions without a summary.
COOLDOWN_LADDER = (60.0, 300.0, 900.0)
#: Failures after which the transcript is kept as it was (Hermes's terminal summary failures).
TERMINAL = frozenset({"auth", "quota", "network", "overloaded", "empty_response"})
#: Failures Hermes counts as a stall (timeouts, 408/429/502/504).
STALL = frozenset({"timeout", "rate_limit", "server_error"})

ABORT = "abort"
FALLBACK = "fallback"


def rung(streak: int, ladder: Sequence[float] = COOLDOWN_LADDER) -> float:
    """The cooldown after the ``streak``-th consecutive compaction without a summary (1 = the first)."""
    if streak < 1 or not ladder:
        raise ValueError(f"streak must be at least 1 and the ladder non-empty, got {streak!r}, {tuple(ladder)!r}")
    return float(ladder[min(streak, len(ladder)) - 1])


def failure_kind(categories: Sequence[str]) -> str:
    """``terminal``, ``stall`` or ``other``: the kind of the last failed call (the main model's, tried last)."""
    if not categories:
        return "other"
    last = categories[-1]
    if last in TERMINAL:
        return "terminal"
    return "stall" if last in STALL else "other"


def decide(kind: str, stalls_before: int) -> str:
    """``abort`` (keep the transcript) or ``fallback`` (commit the deterministic summary) for a failed summary."""
    if kind == "terminal":
        return ABORT
    if kind == "stall":
        return FALLBACK if stalls_before >= 1 else ABORT
    return FALLBACK
