"""Replies cut by the output limit.

A reply is cut when it says so (``finish_reason == "length"``), and also
when a tool call's arguments do not parse and the reply used up the output
cap: some servers report such a reply as ``tool_calls`` whatever stopped it,
and broken arguments at the very end of the budget were cut, not malformed.

Text is continued: the parts so far go back as assistant messages, each
followed by a notice, and the model picks up where it stopped; the parts are
joined into one answer, with the space the cut took when the pieces meet
between words. A continuation cut off again that only repeats what was written
already (a model that rarely stops, going round) ends the continuing. Each continuation asks for the configured cap again
(the answer grows by that much per request, so the cap itself need not grow).
A cut tool call cannot be continued (its arguments are unusable), so the same
request is sent again with twice the cap. A reply that spent the whole budget
thinking has nothing to continue and ends the turn. When the window has no
room left for another continuation (the provider refuses it as too large),
the text written so far is the answer: compressing the history to make room
would drop the question the parts answer, and the turn would start over.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Any, Callable

from ..core.messages import parse_tool_arguments, tool_calls_of
from ..core.provider import ChatResponse
from ..core.tokens import count_text
from .chain import RecoveryFailed
from .empty import has_inline_thinking, is_empty, visible_text
from .log import RecoveryLog

#: Sends the request again with these messages after it and this output cap; returns the (repaired) reply,
#: or None when the request was abandoned (the history was compressed meanwhile, so the turn asks afresh).
#: A continuation the provider refuses as too large raises ``NoRoomToContinue``.
Ask = Callable[[list[dict[str, Any]], int], "ChatResponse | None"]


class NoRoomToContinue(Exception):
    """A continuation of a cut reply was refused as too large for the window."""

CONTINUE_NOTICE = ("[Your reply was cut off by the output limit. Continue exactly where it stopped, "
                   "without repeating what you already wrote.]")
#: Output cap for continuations and repeats when none is configured.
DEFAULT_OUTPUT_CAP = 4_096
#: The ceiling a repeated request's raised cap stays under (unless the configured cap is higher already).
MAX_OUTPUT_CAP = 32_768
#: Share of the cap a reply must have used, by our own count of its tokens, to count as cut at the limit
#: (a provider's tokenizer and ours differ); a reported count must reach the cap itself.
ESTIMATED_SHARE = 0.8


def is_truncated(response: ChatResponse, cap: int | None = None) -> bool:
    """Cut by the output limit: said so, or (with the request's ``cap`` known) a tool call cut at it."""
    return response.finish_reason == "length" or (cap is not None and tool_call_cut_at_cap(response, cap))


def tool_call_cut_at_cap(response: ChatResponse, cap: int) -> bool:
    """Tool-call arguments that do not parse, in a reply that spent its output cap."""
    calls = tool_calls_of(response.message)
    if not calls or not any(_unparsable((call.get("function") or {}).get("arguments")) for call in calls):
        return False
    if response.usage is not None and response.usage.completion_tokens:
        return response.usage.completion_tokens >= cap
    spent = count_text(response.message.get("content") or "") + sum(
        count_text((call.get("function") or {}).get("name") or "")
        + count_text((call.get("function") or {}).get("arguments") or "") for call in calls)
    return spent >= ESTIMATED_SHARE * cap


def _unparsable(arguments: str | None) -> bool:
    try:
        parse_tool_arguments(arguments)
    except ValueError:
        return True
    return False


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


#: The last character of a piece after which a word-initial continuation starts a new word.
_WORD_ENDS = frozenset(".,;:!?)]}")
#: Characters a continuation opens with that never take a space before them.
_CLOSERS = frozenset(".,;:!?)]}%’”")
#: Below this code point scripts separate words with spaces (Latin, Greek, Cyrillic, ...); Thai does not.
_SPACED_BELOW, _THAI = 0x2E80, range(0x0E00, 0x0E80)


def join_continuation(written: str, more: str) -> str:
    """``written`` and the continuation ``more`` as one text, with a space where the cut fell between words.

    A cut can fall inside a word ("contin" + "uation": joined as is) or between
    two (a space the model never wrote again: "doesn't" + "The" wants one).
    Pieces that meet at whitespace, at a closing mark, or in a script written
    without spaces are joined as they are; a capital after a letter, or a
    letter or digit after a sentence mark, starts a new word.
    """
    if not written or not more or written[-1].isspace() or more[0].isspace() or more[0] in _CLOSERS:
        return written + more
    last, first = written[-1], more[0]
    if not (_spaced(last) and _spaced(first)) or not first.isalnum():
        return written + more
    in_number = last in ".,:" and first.isdigit() and written[-2:-1].isdigit()  # 3.14, 1,000, 12:30
    new_word = (last in _WORD_ENDS and not in_number) or (last.isalpha() and first.isupper() and not last.isupper())
    return f"{written} {more}" if new_word else written + more


def _spaced(char: str) -> bool:
    code = ord(char)
    return code < _SPACED_BELOW and code not in _THAI and unicodedata.category(char)[0] != "C"


def continuation_cap(configured: int | None) -> int:
    """The cap of each continuation: the configured one, or the default when none is."""
    return configured or DEFAULT_OUTPUT_CAP


def raised_output_cap(configured: int | None) -> int:
    """The cap of a repeated request for a cut tool call: twice the configured one, within the ceiling."""
    base = continuation_cap(configured)
    return min(2 * base, max(MAX_OUTPUT_CAP, base))



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
        raised = raised_output_cap(cap)
        for n in range(1, limit + 1):
            log.open("truncated_tool_call", "retry", n)
            response = ask([], raised)
            if response is None or not is_truncated(response, raised) or _interrupted(response):
                return response, False
            log.settle("failed: truncated_tool_call")
        raise RecoveryFailed("truncated_tool_call", f"the model's tool call was cut off by the output limit "
                             f"{limit + 1} times; raise model.max_tokens")
    if not visible_text(response.message):
        return response, False
    parts = [response.message.get("content") or ""]
    text = parts[0]
    for n in range(1, limit + 1):
        log.open("truncated", "continue", n)
        try:
            more = ask(continuation_messages(parts), continuation_cap(cap))
        except NoRoomToContinue:
            log.settle("failed: context_overflow")
            log.record("truncated", "give_up", n, "no room in the window to continue; kept the text written so far")
            return dataclasses.replace(response, message={**response.message, "content": text}), True
        if more is None:
            return None, False
        if is_empty(more) and not _interrupted(more):
            log.settle("failed: empty")
            continue
        piece = more.message.get("content") or ""
        if is_truncated(more) and piece.strip() and piece.strip() in text and not _interrupted(more):
            log.settle("failed: repeated")
            log.record("truncated", "give_up", n, "the continuation repeated what was written; kept the text so far")
            return dataclasses.replace(response, message={**response.message, "content": text}), True
        parts.append(piece)
        text = join_continuation(text, piece)
        response = dataclasses.replace(more, message={**more.message, "content": text})
        if not is_truncated(more) or _interrupted(more):
            return response, False
        log.settle("still truncated")
    log.record("truncated", "give_up", limit, "kept the text written so far")
    return dataclasses.replace(response, message={**response.message, "content": text}), True
