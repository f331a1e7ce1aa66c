"""Crush's automatic summary: when 20,000 tokens (or a fifth of a smaller window) remain, one summary replaces all.

After each model step Crush checks what the window has left: once no more
than 20,000 tokens remain (windows over 200,000) or no more than a fifth of
the window (smaller ones), it summarises every message since the last summary
and from then on sends the summary, as a user message, and what follows it.
If the step was still calling tools, Crush queues a new request naming the
user's request the interrupted turn was working on.

hermeslab compacts before a model call, so a trailing user message is the
request Crush would send after its summary (not summarised); trailing tool
results mean the turn was interrupted. Crush sends the summary and that next
user message as two user turns (which Anthropic's API joins), and so does
this policy.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.turns import is_real_user_message
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.config import CompressionConfig
from hermeslab.core.messages import text_of

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

SOURCE = "charmbracelet/crush @ 70d321626ca20ad8fcfb99e61bbe377a6b91748c (v0.90.0)"
STRATEGY = "crush_summary"
NAME = "crush-0.90.0"

#: Windows larger than this keep a fixed number of tokens free…
LARGE_WINDOW = 200_000
#: …this many.
LARGE_WINDOW_BUFFER = 20_000
#: Smaller windows summarise once this share of the window is used (a fifth left).
SMALL_WINDOW_USED = 0.8

INTERRUPTED = "The earlier turn stopped because the conversation grew too long; the request it was working on: `{}`"


def crush_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``window − tokens <= buffer``: 20,000 past 200,000 tokens, else the unused share truncated to whole tokens."""
    if window > LARGE_WINDOW:
        buffer = LARGE_WINDOW_BUFFER
    else:
        buffer = window - share_of_window(window, cfg.threshold, round_up=True)
    return max(1, window - buffer)


def crush_summary(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Crush summary of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    request = history[-1:] if history and history[-1].get("role") == "user" else []
    span = history[:len(history) - len(request)]
    if not span:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    summary = summarise(span, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True,
                         error=summary.error or "empty summary")
    interrupted = not request and span[-1].get("role") == "tool"
    follow = request
    if interrupted:
        asked = next((m for m in reversed(span) if is_real_user_message(m)), None)
        follow = [{"role": "user", "content": INTERRUPTED.format(text_of(asked) if asked else ""), "_synthetic": True}]
    out = system + [summary_message("user", summary.body)] + follow
    return result(messages, out, condensed=len(span), zoo=zoo,
                  record={**record, "outcome": "compressed", "interrupted": interrupted},
                  summary=summary.body, fallback=summary.fallback_used)


_AGENT = "internal/agent/agent.go"

POLICY = Policy(
    agent="Crush",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                           "compression.threshold": SMALL_WINDOW_USED},
                    "with 20K tokens left (a fifth of windows up to 200K): one summary as a user message replaces "
                    "everything; an interrupted turn's request is asked again."),),
    fidelity="reading",
    strategies={STRATEGY: crush_summary},
    triggers={STRATEGY: crush_trigger},
    citations=(
        Citation("windows over 200,000 keep 20,000 tokens", "LARGE_WINDOW, LARGE_WINDOW_BUFFER", f"{_AGENT} 57-58"),
        Citation("smaller windows keep a fifth (truncated to whole tokens)", "SMALL_WINDOW_USED",
                 f"{_AGENT} 59, 1050-1052"),
        Citation("summarises when window - (prompt + completion tokens) <= that buffer", "crush_trigger",
                 f"{_AGENT} 1039-1056"),
        Citation("an unknown window (0) never summarises automatically", "hermeslab always knows the window",
                 f"{_AGENT} 1040-1044"),
        Citation("auto-summarise can be switched off, and is on by default", "—",
                 f"{_AGENT} 1053; internal/config/config.go 321"),
        Citation("every message since the last summary is summarised; none: nothing to do", "summarise(span)",
                 f"{_AGENT} 1342-1349, 1689-1709"),
        Citation("afterwards the conversation starts at the summary, sent as a user message", "summary_message",
                 f"{_AGENT} 1455-1457, 1695-1706"),
        Citation("a failed summary leaves the conversation as it was", "aborted", f"{_AGENT} 1416-1430"),
        Citation("a turn stopped mid tool calls queues a request naming the user's request", "INTERRUPTED",
                 f"{_AGENT} 1192-1206"),
    ),
)
