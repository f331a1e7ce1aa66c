"""Kimi CLI's ``SimpleCompaction``: everything but the newest two user or assistant messages becomes one summary.

Kimi CLI checks before every step whether the context has reached 85% of the
window or leaves less than 50,000 tokens free, whichever comes first. Its
compaction walks back to the second-newest message a user or the assistant
wrote; from there on everything stays (tool results of the kept assistant
message included), and everything before is replaced by one user message that
opens with a fixed line and holds the summary. The system prompt is written
anew in front. With fewer than two such messages, or nothing before them,
there is nothing to compact. A failed summary call fails Kimi's step; here the
conversation is handed back unchanged and the compaction counts as aborted.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.errors import ConfigError

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

STRATEGY = "kimi_cli_simple_compaction"
PRESET = "kimi-cli-1.52.0"
SOURCE = "kimi-cli 1.52.0 (PyPI), kimi_cli/"
#: Share of the window at which Kimi CLI compacts (``compaction_trigger_ratio``).
TRIGGER_RATIO = 0.85
#: Tokens Kimi CLI keeps free (``reserved_context_size``): it compacts once fewer remain.
RESERVED_CONTEXT_SIZE = 50_000
#: User or assistant messages kept after a compaction (``max_preserved_messages``).
PRESERVED_MESSAGES = 2
#: The range Kimi CLI accepts for its trigger ratio.
RATIO_RANGE = (0.5, 0.99)
#: Roles whose messages count towards the preserved number.
COUNTED_ROLES = ("user", "assistant")
OPENING = "[Earlier context was compacted; what the compaction kept of it follows.]"


def reserved_context(max_tokens: int | None) -> int:
    """The room Kimi CLI keeps free: its own setting, whatever the model's output cap."""
    return RESERVED_CONTEXT_SIZE


def kimi_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``tokens >= window * ratio`` or ``tokens + reserved >= window``, whichever is reached first."""
    by_ratio = share_of_window(window, cfg.threshold, round_up=True)
    by_room = window - reserved_context(max_tokens)
    return max(1, min(by_ratio, by_room))


def preserved_start(history: list[Message], keep: int) -> int | None:
    """Where the kept part begins: the ``keep``-th user or assistant message from the end (None: too few)."""
    if keep <= 0:
        return None
    seen = 0
    for index in range(len(history) - 1, -1, -1):
        if history[index].get("role") in COUNTED_ROLES:
            seen += 1
            if seen == keep:
                return index
    return None


def kimi_simple_compaction(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Kimi CLI compaction with ``max_preserved_messages = compression.protect_last_n``."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    start = preserved_start(history, zoo.cfg.protect_last_n)
    if not start:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    span, kept = history[:start], history[start:]
    summary = summarise(span, zoo, kept=kept)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True,
                         error=summary.error or "empty summary")
    out = system + [summary_message("user", f"{OPENING}\n{summary.body}")] + kept
    return result(messages, out, condensed=len(span), zoo=zoo,
                  record={**record, "outcome": "compressed", "summarised": len(span), "kept": len(kept)},
                  summary=summary.body, fallback=summary.fallback_used)


def validate(cfg: CompressionConfig) -> None:
    """Kimi CLI accepts a trigger ratio from 0.5 to 0.99 and keeps a whole number of messages."""
    low, high = RATIO_RANGE
    if not low <= cfg.threshold <= high:
        raise ConfigError(f"compression.threshold: {STRATEGY} takes Kimi CLI's compaction_trigger_ratio, "
                          f"from {low} to {high}; got {cfg.threshold!r}")
    if isinstance(cfg.protect_last_n, bool) or cfg.protect_last_n < 0:
        raise ConfigError(f"compression.protect_last_n: {STRATEGY} keeps that many user or assistant messages "
                          f"and needs a whole number, got {cfg.protect_last_n!r}")


_OVERRIDES: dict[str, Any] = {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                               "compression.threshold": TRIGGER_RATIO, "compression.protect_last_n": PRESERVED_MESSAGES}

POLICY = Policy(
    agent="Kimi CLI",
    source=SOURCE,
    presets=(Preset(PRESET, _OVERRIDES,
                    "at 85% of the window or with under 50,000 tokens left: keep the newest 2 user or assistant "
                    "messages (and the tool results after them), summarise everything before as one user message."),),
    fidelity="parity",
    strategies={STRATEGY: kimi_simple_compaction},
    triggers={STRATEGY: kimi_trigger},
    output_reserves={STRATEGY: reserved_context},
    citations=(
        Citation("Compacts when tokens >= window * ratio or tokens + reserved >= window", "kimi_trigger",
                 "soul/compaction.py 60-76; checked before every step, soul/kimisoul.py 1016-1032"),
        Citation("reserved_context_size = 50,000 (at least 1,000)", "RESERVED_CONTEXT_SIZE", "config.py 88-91"),
        Citation("compaction_trigger_ratio = 0.85, from 0.5 to 0.99", "TRIGGER_RATIO, RATIO_RANGE",
                 "config.py 92-95"),
        Citation("SimpleCompaction keeps 2 messages by default and is the compaction used", "PRESERVED_MESSAGES",
                 "soul/compaction.py 110-112; soul/kimisoul.py 250"),
        Citation("Walk back counting user and assistant messages; kept from the 2nd; fewer: nothing to do",
                 "preserved_start", "soul/compaction.py 157-171"),
        Citation("Nothing before the kept part: nothing to compact", "kimi_simple_compaction",
                 "soul/compaction.py 173-178"),
        Citation("The summary is one user message opening with a fixed line, then the kept messages",
                 "OPENING, kimi_simple_compaction", "soul/compaction.py 18, 139-148"),
        Citation("The history is cleared and the system prompt written anew before the result",
                 "system messages kept in front", "soul/kimisoul.py 1575-1578"),
        Citation("A failed compaction raises and fails the step", "outcome summary_failed (aborted)",
                 "soul/kimisoul.py 1022-1032, 1543-1572"),
    ),
    validate=validate,
)
