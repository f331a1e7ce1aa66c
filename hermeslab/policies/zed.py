"""Zed's agent auto-compaction: the user's recent requests verbatim, then one summary of everything before.

Zed compacts when the last request's tokens reach a threshold set as a share
of the model's window (90% by default), as a count of tokens used, or as a
count of tokens left; windows under 80,000 tokens are never compacted
automatically. The summary covers every message before a trailing request
not yet answered. The next request carries the user's own messages from
before that point, newest first up to 80,000 bytes (the one that does not fit
cut to what is left, its start kept), back in conversation order, then the
summary as a user message, then what follows. Assistant turns, tool calls
and their results leave the context.

The three forms of threshold are three strategies here, all compacting
alike: ``zed_compact`` reads ``compression.threshold`` as the share;
``zed_compact_tokens_used`` and ``zed_compact_tokens_remaining`` read
``compression.min_threshold_tokens`` as the count.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.turns import is_real_user_message
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.config import CompressionConfig
from hermeslab.core.errors import ConfigError

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

SOURCE = "zed-industries/zed @ 00b6ce1c6992ec3c5df1b15ee144e4607c7af470"
PERCENTAGE = "zed_compact"
TOKENS_USED = "zed_compact_tokens_used"
TOKENS_REMAINING = "zed_compact_tokens_remaining"
NAME = "zed-00b6ce1"

#: The default threshold: 90% of the window.
DEFAULT_PERCENTAGE = 0.9
#: Windows smaller than this are never compacted automatically.
MIN_COMPACTION_CONTEXT_WINDOW = 80_000
#: UTF-8 bytes of the user's own messages kept verbatim after a compaction.
RETAINED_USER_BYTES = 80_000

OPENING = "Earlier turns of this conversation were compacted; this summary stands in for them:\n\n"


# ---------------------------------------------------------------- when it fires


def _never(window: int) -> int:
    """A threshold no prompt reaches: Zed leaves windows under 80,000 tokens to the user."""
    return window + 1


def percentage_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``tokens >= ceil(window × share)`` (the whole window; the output cap plays no part)."""
    if window < MIN_COMPACTION_CONTEXT_WINDOW:
        return _never(window)
    return max(1, share_of_window(window, cfg.threshold, round_up=True))


def tokens_used_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``tokens >= count``."""
    if window < MIN_COMPACTION_CONTEXT_WINDOW:
        return _never(window)
    return cfg.min_threshold_tokens


def tokens_remaining_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``tokens >= window − count + 1``: fewer than ``count`` tokens left (1 when the count covers the window)."""
    if window < MIN_COMPACTION_CONTEXT_WINDOW:
        return _never(window)
    return max(window - cfg.min_threshold_tokens, 0) + 1


def validate(cfg: CompressionConfig) -> None:
    """A token count of 0 is no threshold to Zed; the share is checked by the schema."""
    if cfg.strategy in (TOKENS_USED, TOKENS_REMAINING) and cfg.min_threshold_tokens < 1:
        raise ConfigError(f"compression.min_threshold_tokens: {cfg.strategy} needs a token count of at least 1 "
                          f"(Zed refuses a threshold of 0), got {cfg.min_threshold_tokens}")


# ---------------------------------------------------------------- what stays


def _cut_to_bytes(text: str, budget: int) -> str:
    """The longest start of ``text`` within ``budget`` UTF-8 bytes, never splitting a character."""
    return text.encode("utf-8")[:budget].decode("utf-8", errors="ignore")


def _cut_message(message: Message, budget: int) -> Message | None:
    """``message`` with its parts kept in order up to ``budget`` bytes, the first text that does not fit cut."""
    content = message.get("content")
    parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    kept: list[dict] = []
    remaining = budget
    for part in parts:
        if part.get("type") != "text":
            size = len(str(part).encode("utf-8"))
            if size > remaining:
                break
            remaining -= size
            kept.append(part)
            continue
        text = part.get("text", "")
        size = len(text.encode("utf-8"))
        cut = text if size <= remaining else _cut_to_bytes(text, remaining)
        if cut:
            kept.append({**part, "text": cut})
        remaining -= len(cut.encode("utf-8"))
        if size > len(cut.encode("utf-8")):
            break
    if not kept:
        return None
    if isinstance(content, list):
        return {"role": "user", "content": kept}
    return {"role": "user", "content": kept[0]["text"]}


def _size(message: Message) -> int:
    content = message.get("content")
    if isinstance(content, list):
        return sum(len((p.get("text", "") if p.get("type") == "text" else str(p)).encode("utf-8")) for p in content)
    return len((content or "").encode("utf-8"))


def retained_user_messages(history: list[Message], budget: int = RETAINED_USER_BYTES) -> list[Message]:
    """The user's own messages, newest first while they fit ``budget`` bytes, the next one cut; oldest first."""
    kept: list[Message] = []
    remaining = budget
    for message in reversed(history):
        if not is_real_user_message(message):
            continue
        size = _size(message)
        if size <= remaining:
            kept.append({"role": "user", "content": message.get("content")})
            remaining -= size
            continue
        if remaining > 0:
            cut = _cut_message(message, remaining)
            if cut is not None:
                kept.append(cut)
        break
    kept.reverse()
    return kept


def zed_compact(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Zed auto-compaction of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": zoo.cfg.strategy}
    request = history[-1:] if history and is_real_user_message(history[-1]) else []
    span = history[:len(history) - len(request)]
    if not span:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    summary = summarise(span, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True,
                         error=summary.error or "empty summary")
    retained = retained_user_messages(span)
    out = system + retained + [summary_message("user", OPENING + summary.body)] + request
    return result(messages, out, condensed=len(span), zoo=zoo,
                  record={**record, "outcome": "compressed", "user_messages_kept": len(retained)},
                  summary=summary.body, fallback=summary.fallback_used)


# ---------------------------------------------------------------- the policy

_THREAD = "crates/agent/src/thread.rs"
_SETTINGS = "crates/agent_settings/src/agent_settings.rs"

POLICY = Policy(
    agent="Zed agent",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": PERCENTAGE,
                           "compression.threshold": DEFAULT_PERCENTAGE},
                    "at 90% of the window (windows of 80K or more): the user's own messages up to 80,000 bytes, "
                    "then one summary of everything else."),),
    fidelity="reading",
    strategies={PERCENTAGE: zed_compact, TOKENS_USED: zed_compact, TOKENS_REMAINING: zed_compact},
    triggers={PERCENTAGE: percentage_trigger, TOKENS_USED: tokens_used_trigger,
              TOKENS_REMAINING: tokens_remaining_trigger},
    validate=validate,
    citations=(
        Citation("threshold as a share, tokens used or tokens remaining", "three strategies",
                 f"{_SETTINGS} 143-151"),
        Citation("default 90% of the window", "DEFAULT_PERCENTAGE", f"{_SETTINGS} 156"),
        Citation("\"N%\" in (0, 100]; a positive integer is tokens used, a negative one tokens left; 0 refused",
                 "schema, validate", f"{_SETTINGS} 175-201"),
        Citation("share: ceil(window x share); used: the count; remaining: window - count + 1", "the triggers",
                 f"{_THREAD} auto_compact_threshold_token_count"),
        Citation("compacts when the last request's input, cache and output tokens reach it", "hermeslab's count",
                 f"{_THREAD} compaction_message_target_ix, total_input_tokens"),
        Citation("windows under 80,000 tokens are never compacted automatically", "MIN_COMPACTION_CONTEXT_WINDOW",
                 f"{_THREAD} 75; compaction_message_target_ix"),
        Citation("a trailing request not yet answered stays after the summary", "request",
                 f"{_THREAD} compaction_message_target_ix (insertion_ix)"),
        Citation("the summary covers every message before that point", "summarise(span)",
                 f"{_THREAD} build_compaction_request"),
        Citation("the user's own messages before it, newest first up to 80,000 bytes, the next cut; oldest first",
                 "retained_user_messages", f"{_THREAD} 78; retained_user_request_messages_before, "
                                           f"truncate_user_message_to_byte_budget, take_text_within_byte_budget"),
        Citation("then the summary as a user message, then what follows", "OPENING",
                 f"{_THREAD} extend_request_history_until, CompactionInfo::to_request"),
    ),
)
