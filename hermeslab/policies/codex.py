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

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

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
    citations=(
        Citation("Auto-compact limit defaults to context_window * 9 / 10 (integer arithmetic, the whole window)",
                 "codex_trigger, compression.threshold: 0.9",
                 "codex-rs/protocol/src/openai_models.rs @ 8db07003, 269-272 (field), 284-289 "
                 "(ModelInfo::auto_compact_token_limit)"),
        Citation("Compacts once the session's total usage reaches the limit, after a sampling request",
                 "codex_trigger (tokens >= limit)",
                 "codex-rs/core/src/codex.rs, run_turn (total_usage_tokens >= auto_compact_limit)"),
        Citation("The compaction request carries the whole history", "summarise(history)",
                 "codex-rs/core/src/compact.rs 71-75, 97-103"),
        Citation("Summary text is a fixed prefix line, a newline, then the model's last message",
                 "OPENING + summary", "codex-rs/core/src/compact.rs 32, 158-161"),
        Citation("The new history starts from the rebuilt initial context", "system messages kept in front",
                 "codex-rs/core/src/compact.rs 164-165"),
        Citation("Kept: every user message except earlier summaries", "is_real_user_message, not is_summary_message",
                 "codex-rs/core/src/compact.rs 209-227"),
        Citation("Budget for the kept user messages: 20,000 tokens", "USER_MESSAGE_BUDGET",
                 "codex-rs/core/src/compact.rs 33"),
        Citation("Newest first; whole while they fit, the first that does not is cut to what is left and the walk "
                 "stops; then back to conversation order", "select_user_messages",
                 "codex-rs/core/src/compact.rs 249-265"),
        Citation("Tokens are approximated from bytes, four to a token, rounded up", "approx_tokens, BYTES_PER_TOKEN",
                 "codex-rs/core/src/compact.rs 19, 255; codex-rs/core/src/truncate.rs @ 02080945, "
                 "approx_token_count"),
        Citation("The message that does not fit is cut in the middle, head and tail kept around a marker",
                 "cut_middle", "codex-rs/core/src/compact.rs 260 (truncate_text, TruncationPolicy::Tokens)"),
        Citation("Kept user messages come first, the summary last, each as a user message",
                 "codex_user_messages output order", "codex-rs/core/src/compact.rs 268-288"),
        Citation("An empty summary becomes a fixed placeholder and the compaction still applies", "NO_SUMMARY",
                 "codex-rs/core/src/compact.rs 278-282"),
        Citation("Everything else (assistant turns, tool calls and results) leaves the history",
                 "codex_user_messages", "codex-rs/core/src/compact.rs 165, 172 (replace_history)"),
    ),
)
