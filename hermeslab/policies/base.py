"""What a compaction policy brings: its presets, what it does at a compaction, when it fires, and its sources.

One module per agent exports one ``POLICY``; built-in modules and packages that
declare an entry point in the group ``hermeslab.policies`` are read alike, so a
third party's policy is listed, validated and run exactly as a built-in one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping

from hermeslab.context.rules import OutputReserve, Strategy, TriggerRule
from hermeslab.core.config import CompressionConfig

__all__ = ["Citation", "IN_PLACE_NO_BREAKER", "NEVER_SWITCH_OFF", "OutputReserve", "Policy", "Preset", "Strategy",
           "TriggerRule", "share_of_window"]

#: A breaker limit no conversation reaches: for agents that never switch compaction off after failures.
NEVER_SWITCH_OFF = 1_000_000_000

#: What another agent's preset sets besides its strategy: it has no token floor or small-window rule,
#: judges no saving, never switches compaction off nor cools down, and rebuilds its context in place.
IN_PLACE_NO_BREAKER: Mapping[str, Any] = {
    "compression.min_threshold_tokens": 0,
    "compression.small_window_limit": None,
    "compression.min_saving": 0.0,
    "compression.ineffective_limit": NEVER_SWITCH_OFF,
    "compression.abort_cooldown_seconds": 0.0,
    "compression.in_place": True,
}


def share_of_window(window: int, share: float, *, round_up: bool) -> int:
    """``share`` of ``window`` taken exactly (the decimal as written, so 0.9 of 8,000 is 7,200, never 7,199)."""
    exact = window * Fraction(str(share))
    return math.ceil(exact) if round_up else math.floor(exact)


@dataclass(frozen=True)
class Citation:
    """One number or rule and where it was read: ``where`` names file and line (or page), at ``Policy.source``."""

    rule: str
    hermeslab: str
    where: str


@dataclass(frozen=True)
class Preset:
    """A named configuration: dotted ``compression.*`` overrides laid over ``seed``'s full list."""

    name: str
    overrides: Mapping[str, Any]
    #: One line for ``hermeslab presets``: when it fires and what it keeps.
    summary: str


@dataclass(frozen=True)
class Policy:
    """Everything hermeslab knows of one agent's compaction, in one place."""

    #: The agent as its users name it, e.g. "Codex CLI".
    agent: str
    #: Repository (or document) and the commit, version or date read, e.g. "openai/codex @ 0100b103".
    source: str
    presets: tuple[Preset, ...]
    #: How parity was established: "parity" (decisions compared against the agent's own code) or "reading".
    fidelity: str = "reading"
    strategies: Mapping[str, Strategy] = field(default_factory=dict)
    triggers: Mapping[str, TriggerRule] = field(default_factory=dict)
    output_reserves: Mapping[str, OutputReserve] = field(default_factory=dict)
    citations: tuple[Citation, ...] = ()
    #: Raises ``ConfigError`` naming the first value this policy cannot use (None: nothing beyond the schema);
    #: called for configs whose ``compression.strategy`` is one of this policy's.
    validate: Callable[[CompressionConfig], None] | None = None
    #: Whether hermeslab re-injects its open todo items after this policy's compactions: hermeslab's own
    #: arms do; another agent's policy puts back nothing of hermeslab's.
    reinjects_todos: bool = False
