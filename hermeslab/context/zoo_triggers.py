"""Where each compaction-zoo strategy fires: the trigger rule of the agent it reproduces.

Hermes-style presets fire at a fraction of the window minus the output cap,
raised to a floor. The agents of the zoo each have their own rule, and the
rule travels with the strategy, so ``compression.strategy`` alone picks both
what happens and when. ``compression.threshold`` stays the fraction a rule
uses, so a sweep over it still means what it says.

Every rule answers the smallest prompt size, in tokens, at which the agent
compacts; the policy compares ``tokens >= threshold_tokens``. Fractions are
taken exactly (``Fraction`` of the decimal), so 0.9 of 8,000 is 7,200, not
7,199 from a float that lands a hair under. Where a rule leaves nothing to
compare against (reserves larger than the window), the answer is 1: that agent
would compact before every request, and so does the replay.

Sources (numbers and lines) are listed in ``docs/presets.md``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

from hermeslab.core.config import CompressionConfig

#: Output reserve Roo Code assumes when the model has no output cap of its own.
ROO_DEFAULT_RESERVE = 8_192
#: Share of the window Roo Code keeps free beyond the output reserve.
ROO_BUFFER = Fraction(1, 10)
#: Output cap opencode reserves when the model's own is larger or unknown.
OPENCODE_OUTPUT_MAX = 32_000

TriggerRule = Callable[[CompressionConfig, int, "int | None"], int]


def roo_reserve(max_tokens: int | None) -> int:
    """The output reserve Roo Code keeps: the model's cap, else its default."""
    return max_tokens if max_tokens else ROO_DEFAULT_RESERVE


def opencode_reserve(max_tokens: int | None) -> int:
    """The output reserve opencode keeps: the model's cap up to 32,000, else 32,000."""
    return min(max_tokens, OPENCODE_OUTPUT_MAX) if max_tokens else OPENCODE_OUTPUT_MAX


def _fraction(value: float) -> Fraction:
    return Fraction(str(value))


def _codex(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Codex: ``tokens >= window * 9 / 10`` in integer arithmetic, on the whole window."""
    return max(1, math.floor(window * _fraction(cfg.threshold)))


def _gemini(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Gemini CLI: compresses unless ``tokens < fraction * window`` (the model's whole limit)."""
    return max(1, math.ceil(window * _fraction(cfg.threshold)))


def _roo(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Roo Code: ``100 * tokens / window >= percent`` or ``tokens > window * 0.9 - reserve``."""
    reserve = roo_reserve(max_tokens)
    by_percent = math.ceil(window * _fraction(cfg.threshold))
    allowed = window * (1 - ROO_BUFFER) - reserve
    by_room = math.floor(allowed) + 1
    return max(1, min(by_percent, by_room))


def _opencode(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """opencode: ``tokens >= window - min(output cap, 32,000)`` (no separate input limit known)."""
    reserve = opencode_reserve(max_tokens)
    usable = math.floor(window * _fraction(cfg.threshold)) - reserve
    return max(1, usable)


def _claude_code(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Claude Code: compacts when the conversation reaches the auto-compact window, by default the whole window."""
    return max(1, math.ceil(window * _fraction(cfg.threshold)))


def _clear_tool_uses(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Anthropic's tool-result clearing: once the prompt exceeds ``min_threshold_tokens`` (its ``trigger``)."""
    return cfg.min_threshold_tokens + 1


TRIGGER_RULES: dict[str, TriggerRule] = {
    "codex_user_messages": _codex,
    "gemini_state_snapshot": _gemini,
    "roo_condense": _roo,
    "opencode_prune_summary": _opencode,
    "claude_code_summary": _claude_code,
    "anthropic_clear_tool_uses": _clear_tool_uses,
}


#: Strategies whose trigger keeps room for the reply, and the reserve each keeps for a given output cap.
OUTPUT_RESERVES: dict[str, Callable[["int | None"], int]] = {
    "roo_condense": roo_reserve,
    "opencode_prune_summary": opencode_reserve,
}


def zoo_threshold_tokens(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int | None:
    """The trigger of ``cfg.strategy`` when it is a zoo strategy, else None (the Hermes-style rule applies)."""
    rule = TRIGGER_RULES.get(cfg.strategy)
    return None if rule is None else rule(cfg, window, max_tokens)
