"""Roo Code's context management: condense everything into one summary, or hide the older half.

Condensing summarises every message since the last summary (that summary
included) and leaves the summary alone as the conversation: a fresh start in
which the summary is a user message. Roo refuses when there is nothing new to
condense (at most one message since the last summary, or the summary and one
more). When condensing fails and the prompt is past the room the window
leaves (90% of it minus the output reserve), the sliding window hides the
older half of the messages after the first one (up to an assistant message)
and notes how many after the first message.

Roo's messages carry tool results inside user messages; here a run of tool
messages is that one user message and every other message counts once, so
hiding an even count after the first keeps each call beside its results.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from hermeslab.context.assemble import sanitize_tool_pairs
from hermeslab.context.baselines import BaselineResult
from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.compression_config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

#: Output reserve Roo Code assumes when the model has no output cap of its own.
DEFAULT_RESERVE = 8_192
#: Share of the window Roo Code keeps free beyond the output reserve.
ROO_BUFFER = Fraction(1, 10)
#: Share of the messages after the first that the sliding window hides.
TRUNCATE_FRACTION = 0.5
HEADER = "Summary of the conversation so far"


def since_last_summary(history: list[Message]) -> list[Message]:
    """The messages from the newest summary on (it included), or all of them."""
    for index in range(len(history) - 1, -1, -1):
        if is_summary_message(history[index]):
            return history[index:]
    return history


def condense_refusal(history: list[Message]) -> str | None:
    """Why Roo would not condense ``history``, or None."""
    span = since_last_summary(history)
    if len(span) <= 1:
        return "not enough messages" if len(history) <= 1 else "condensed recently"
    if any(is_summary_message(m) for m in span) and len(span) <= 2:
        return "condensed recently"
    return None


def roo_messages(history: list[Message]) -> list[list[int]]:
    """Indices of ``history`` grouped as Roo's messages: a run of tool results is one, anything else is one."""
    groups: list[list[int]] = []
    for index, message in enumerate(history):
        if message.get("role") == "tool" and groups and history[groups[-1][0]].get("role") == "tool":
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def hide_older_half(history: list[Message], fraction: float = TRUNCATE_FRACTION) -> tuple[list[Message], int]:
    """Roo's sliding window over ``history``: (the result, how many of Roo's messages it hid).

    Roo hides half of the messages after the first, rounded down to an even
    count: in its strictly alternating history, the largest count after which
    an assistant message comes. Here two user messages may follow each other
    (input queued during a turn, a summary before the next request), so the
    count is that: the largest up to half after which an assistant message
    comes (Roo's own on an alternating history). Roo's marker is a user message
    right behind the first one, which Anthropic's API joins into that turn;
    here it is joined to the first message's text the same way, so the result
    never holds two user messages in a row that the input did not.
    """
    units = roo_messages(history)
    remove = math.floor((len(units) - 1) * fraction)
    while remove > 0 and history[units[remove + 1][0]].get("role") != "assistant":
        remove -= 1
    if remove <= 0:
        return list(history), 0
    hidden = {i for unit in units[1:remove + 1] for i in unit}
    note = f"[{remove} earlier messages hidden to fit the context window]"
    first = history[0]
    if first.get("role") == "user":
        kept = [_joined(first, note)]
    else:
        kept = [first, {"role": "user", "content": note, "_synthetic": True}]
    kept += [m for i, m in enumerate(history) if i > 0 and i not in hidden]
    out, _ = sanitize_tool_pairs(kept, missing="drop")
    return out, remove


def _joined(message: Message, note: str) -> Message:
    """A copy of a user message with ``note`` after its own content, as the API joins two user turns."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": note}]}
    return {**message, "content": f"{content}\n\n{note}" if content else note}


def over_room(prompt_tokens: int, window: int, max_tokens: int | None) -> bool:
    """``prompt > window * 0.9 - reserve``: the condition for Roo's sliding-window fallback."""
    return prompt_tokens > window * (1 - ROO_BUFFER) - roo_reserve(max_tokens)


def roo_condense(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Roo Code context-management pass over ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": "roo_condense"}
    refusal = condense_refusal(history)
    error = None
    if refusal is None:
        span = since_last_summary(history)
        summary = summarise(span, zoo)
        if summary.body:
            out = system + [summary_message("user", f"## {HEADER}\n{summary.body}")]
            return result(messages, out, condensed=len(history), zoo=zoo,
                          record={**record, "outcome": "compressed", "summarised": len(span)},
                          summary=summary.body, fallback=summary.fallback_used)
        error = summary.error or "empty summary"
    record["condense_error"] = refusal or error
    prompt = sum(zoo.estimate(m) for m in messages)
    if over_room(prompt, zoo.budgets.context_length, zoo.max_tokens):
        kept, hidden = hide_older_half(history)
        if hidden:
            return result(messages, system + kept, condensed=len(history) - len(kept) + 1, zoo=zoo,
                          record={**record, "outcome": "truncated", "hidden": hidden})
    outcome = "nothing_to_summarise" if refusal else "condense_failed"
    return unchanged(messages, zoo, {**record, "outcome": outcome}, aborted=refusal is None, error=error)


NAME = "roo-code-3.52.1"
STRATEGY = "roo_condense"
SOURCE = "RooCodeInc/Roo-Code @ cb836567"


def roo_reserve(max_tokens: int | None) -> int:
    """The output reserve Roo Code keeps: the model's cap, else its default."""
    return max_tokens if max_tokens else DEFAULT_RESERVE


def roo_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Roo Code condenses once ``100 * tokens / window >= percent`` or ``tokens > window * 0.9 - reserve``."""
    by_percent = share_of_window(window, cfg.threshold, round_up=True)
    by_room = math.floor(window * (1 - ROO_BUFFER) - roo_reserve(max_tokens)) + 1
    return max(1, min(by_percent, by_room))


POLICY = Policy(
    agent="Roo Code",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY, "compression.threshold": 1.0},
                    "at 100% of the window or past 90% less the output reserve: replace everything with one "
                    "summary; if that fails, hide the older half of the messages."),),
    strategies={STRATEGY: roo_condense},
    triggers={STRATEGY: roo_trigger},
    output_reserves={STRATEGY: roo_reserve},
    citations=(
        Citation("Automatic condensing is on by default, at 100% of the window", "compression.threshold: 1.0",
                 "src/core/task/Task.ts 3998-3999"),
        Citation("Output reserve: the model's max tokens, else 8,192", "DEFAULT_RESERVE, roo_reserve",
                 "src/core/context-management/index.ts 270; packages/types/src/providers/anthropic.ts 204"),
        Citation("A buffer of 10% of the window", "ROO_BUFFER", "src/core/context-management/index.ts 26, 284"),
        Citation("Condenses when 100 x tokens / window >= percent or tokens > window x 0.9 - reserve",
                 "roo_trigger, over_room", "src/core/context-management/index.ts 280-284, 306-308"),
        Citation("The percent is accepted between 5 and 100", "compression.threshold in (0, 1]",
                 "src/core/condense/index.ts 111-112"),
        Citation("Condensing summarises every message from the last summary on, that summary included",
                 "since_last_summary", "src/core/condense/index.ts 278-279, 519-528"),
        Citation("Refused with at most one such message, or a summary and one more", "condense_refusal",
                 "src/core/condense/index.ts 281-295"),
        Citation("The summary is a user message after every earlier message, which the model no longer sees",
                 "[summary (user)]", "src/core/condense/index.ts 458-487, 546-553"),
        Citation("Condensing failed or not tried and tokens over the room: the sliding window", "roo_condense fallback",
                 "src/core/context-management/index.ts 323-335"),
        Citation("Sliding window: keep the first message, hide floor((n - 1) x 0.5) rounded down to even",
                 "hide_older_half, TRUNCATE_FRACTION", "src/core/context-management/index.ts 81-96, 335"),
        Citation("A user-role marker naming the count goes right before the first kept message",
                 "the note joined to the first message", "src/core/context-management/index.ts 106-128"),
    ),
)
