"""Codex CLI's compaction: the instructions, the user's own messages up to a budget, then the summary.

Everything the agent said and every tool call and result leave the context.
What stays verbatim is the user's messages (earlier summaries excluded),
newest first until 20,000 tokens are taken, the oldest one that does not fit
cut in the middle to what is left, then restored to their original order;
after them comes one user message holding a fixed opening line and the
summary. Codex counts these tokens as UTF-8 bytes divided by four, rounded up.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.turns import is_real_user_message
from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.messages import text_of

from .base import IN_PLACE_NO_BREAKER, Policy, Preset, share_of_window

#: Tokens of the user's own messages kept after a compaction.
USER_MESSAGE_BUDGET = 20_000
BYTES_PER_TOKEN = 4
OPENING = ("Another model worked on this conversation before you and left the summary below. "
           "The messages above it are the user's own, kept as they were; build on the summary and "
           "avoid redoing what it records as done.")
NO_SUMMARY = "(no summary could be produced)"


def approx_tokens(text: str) -> int:
    """Codex's estimate: UTF-8 bytes over four, rounded up."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def cut_middle(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens (4 bytes each), keeping its beginning and end around a marker."""
    data = text.encode("utf-8")
    allowance = tokens * BYTES_PER_TOKEN
    if len(data) <= allowance:
        return text
    head = data[:allowance // 2].decode("utf-8", errors="ignore")
    tail = data[len(data) - (allowance - allowance // 2):].decode("utf-8", errors="ignore") if allowance else ""
    dropped = approx_tokens(text) - approx_tokens(head) - approx_tokens(tail)
    return f"{head}…[about {max(dropped, 0):,} tokens cut]…{tail}"


def select_user_messages(texts: list[str], budget: int = USER_MESSAGE_BUDGET) -> list[str]:
    """The newest texts that fit ``budget`` tokens, the oldest of them cut to what was left, oldest first."""
    chosen: list[str] = []
    remaining = budget
    for text in reversed(texts):
        if remaining <= 0:
            break
        cost = approx_tokens(text)
        if cost <= remaining:
            chosen.append(text)
            remaining -= cost
        else:
            chosen.append(cut_middle(text, remaining))
            break
    chosen.reverse()
    return chosen


def codex_user_messages(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Codex CLI compaction of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": "codex_user_messages"}
    if not history:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    summary = summarise(history, zoo)
    texts = [text_of(m) for m in history if is_real_user_message(m) and not is_summary_message(m)]
    kept = select_user_messages(texts)
    body = summary.body or NO_SUMMARY
    out = system + [{"role": "user", "content": text} for text in kept]
    out.append(summary_message("user", f"{OPENING}\n{body}"))
    record.update(outcome="compressed", user_messages=len(texts), user_messages_kept=len(kept),
                  summary_missing=not summary.body)
    return result(messages, out, condensed=len(history), zoo=zoo, record=record, summary=body,
                  fallback=summary.fallback_used, error=summary.error)


NAME = "codex-cli-0100b10"
STRATEGY = "codex_user_messages"
SOURCE = "openai/codex @ 0100b103 (compact.rs), 8db07003 (openai_models.rs)"


def codex_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Codex compacts once ``tokens >= window * 9 / 10`` (integer arithmetic, the whole window)."""
    return max(1, share_of_window(window, cfg.threshold, round_up=False))


POLICY = Policy(
    agent="Codex CLI",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY, "compression.threshold": 0.9},
                    "at 90% of the window: keep the user's own messages up to 20,000 tokens, then the summary; "
                    "drop everything else."),),
    strategies={STRATEGY: codex_user_messages},
    triggers={STRATEGY: codex_trigger},
)
