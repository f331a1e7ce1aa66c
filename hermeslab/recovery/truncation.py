"""Replies cut by the output limit (``finish_reason == "length"``).

Text is continued: the parts so far go back as assistant messages, each
followed by a notice, and the model picks up where it stopped; the parts are
joined into one answer. A cut tool call cannot be continued (its arguments
are unusable), so the same request is sent again. Each extra request raises
the output cap. A reply that spent the whole budget thinking has nothing to
continue and ends the turn.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..core.messages import tool_calls_of
from ..core.provider import ChatResponse
from .chain import RecoveryFailed
from .empty import has_inline_thinking, is_empty, visible_text
from .log import RecoveryLog

#: Sends the request again with these messages after it and this output cap; returns the (repaired) reply,
#: or None when the request was abandoned (the history was compressed meanwhile, so the turn asks afresh).
Ask = Callable[[list[dict[str, Any]], int], "ChatResponse | None"]

CONTINUE_NOTICE = ("[Your reply was cut off by the output limit. Continue exactly where it stopped, "
                   "without repeating what you already wrote.]")
#: Output cap assumed when none is configured, and the ceiling continuations may raise it to.
DEFAULT_OUTPUT_CAP = 4_096
MAX_OUTPUT_CAP = 32_768


def is_truncated(response: ChatResponse) -> bool:
    return response.finish_reason == "length"


def thinking_exhausted(response: ChatResponse) -> bool:
    """Cut while still thinking: reasoning but no text and no tool call."""
    message = response.message
    return (is_truncated(response) and not tool_calls_of(message) and not visible_text(message)
            and (bool(response.reasoning) or has_inline_thinking(message)))


def continuation_messages(parts: list[str]) -> list[dict[str, Any]]:
    """The parts so far, each followed by the notice: sent after the history, never kept in it."""
    out: list[dict[str, Any]] = []
    for part in parts:
        out += [{"role": "assistant", "content": part}, {"role": "user", "content": CONTINUE_NOTICE}]
    return out


def raised_output_cap(configured: int | None, extra_request: int) -> int:
    """The cap for extra request ``n`` (from 1): doubled each time, never below the configured one."""
    if extra_request < 1:
        raise ValueError(f"extra requests count from 1, got {extra_request}")
    base = configured or DEFAULT_OUTPUT_CAP
    return min(base * 2 ** extra_request, max(MAX_OUTPUT_CAP, base))



def _interrupted(response: ChatResponse) -> bool:
    return bool(response.message.get("_interrupted"))


def complete_truncated(response: ChatResponse, ask: Ask, log: RecoveryLog, *, limit: int,
                       cap: int | None) -> tuple[ChatResponse | None, bool]:
    """The reply made whole: continued text, a re-requested tool call; True when it is still cut off.

    None for the reply when ``ask`` abandoned a request: the cut reply answered
    a history that no longer exists.

    Raises RecoveryFailed when the model only thought, or when its tool call
    stays cut after ``limit`` more requests (a half tool call must never run).
    """
    if thinking_exhausted(response):
        log.record("truncated", "give_up", 1, "the output limit was spent thinking")
        raise RecoveryFailed("truncated", "the model spent its whole output budget thinking and wrote no answer; "
                             "raise model.max_tokens")
    if tool_calls_of(response.message):
        for n in range(1, limit + 1):
            log.open("truncated_tool_call", "retry", n)
            response = ask([], raised_output_cap(cap, n))
            if response is None or not is_truncated(response) or _interrupted(response):
                return response, False
            log.settle("failed: truncated_tool_call")
        raise RecoveryFailed("truncated_tool_call", f"the model's tool call was cut off by the output limit "
                             f"{limit + 1} times; raise model.max_tokens")
    if not visible_text(response.message):
        return response, False
    parts = [response.message.get("content") or ""]
    for n in range(1, limit + 1):
        log.open("truncated", "continue", n)
        more = ask(continuation_messages(parts), raised_output_cap(cap, n))
        if more is None:
            return None, False
        if is_empty(more) and not _interrupted(more):
            log.settle("failed: empty")
            continue
        parts.append(more.message.get("content") or "")
        response = dataclasses.replace(more, message={**more.message, "content": "".join(parts)})
        if not is_truncated(more) or _interrupted(more):
            return response, False
        log.settle("still truncated")
    log.record("truncated", "give_up", limit, "kept the text written so far")
    return dataclasses.replace(response, message={**response.message, "content": "".join(parts)}), True
