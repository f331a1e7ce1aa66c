"""Reading the conversation: the pending request, trailing tool results, and the next reply."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Sequence

from ...core.messages import (
    text_of,
    tool_calls_of,
    wire_messages,
)
from .answers import answer_from_results
from .intents import parse_intents
from .offered import Draft, OfferedTools, plan_tool_calls
from .replies import (
    NO_REQUEST_TEXT,
    RECHECK_ASK,
    TEXT_ANSWERS,
    UNRECOGNISED_TEXT,
    capabilities_text,
    identity_text,
)
from .review import is_review_request, review_reply
from .summaries import fill_summary_template

Message = dict[str, Any]

def compose_reply(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None) -> Draft:
    """Decide the next assistant message from the conversation and the offered tools."""
    offered = OfferedTools(tools)
    trailing = trailing_tool_results(messages)
    if trailing is not None:
        results, calls = trailing
        return Draft(text=answer_from_results(results, calls))
    request = pending_request(messages)
    if request is None:
        return Draft(text=NO_REQUEST_TEXT + "\n\n" + capabilities_text(offered))
    summary = fill_summary_template(request)
    if summary is not None:
        return Draft(text=summary)
    if RECHECK_ASK.search(request):
        earlier = previous_answer(messages)
        if earlier is not None:
            return Draft(text=earlier)
    if is_review_request(request):
        return review_reply(request, messages, offered, conversation_digest(messages))
    intents = parse_intents(request)
    if intents:
        return plan_tool_calls(intents, offered, conversation_digest(messages))
    for recognise in TEXT_ANSWERS:
        answer = recognise(request, offered)
        if answer is not None:
            return Draft(text=answer)
    return Draft(text=UNRECOGNISED_TEXT + "\n\n" + identity_text(offered))


def trailing_tool_results(messages: Sequence[Message]) -> tuple[list[Message], dict[str, dict]] | None:
    """The tool results that end the conversation, with the calls they answer (by id)."""
    start = len(messages)
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    if start == len(messages):
        return None
    calls = {call.get("id"): call for call in tool_calls_of(messages[start - 1])} if start > 0 else {}
    return list(messages[start:]), calls


#: In-process flags that mark a user-role message as written by the runtime, not the user.
_SYNTHETIC_FLAGS = (
    "_todo_snapshot_synthetic",
    "_empty_recovery_synthetic",
    "_verification_stop_synthetic",
    "_pre_verify_synthetic",
    "_compressed_summary",
)
_SUMMARY_OPENING = re.compile(r"^\s*\[[^\]\n]*SUMMARY[^\]\n]*\]")


def is_real_user_message(message: Message) -> bool:
    """A user message the user wrote: has text, carries no synthetic flag, is not a handoff summary."""
    if message.get("role") != "user" or any(message.get(flag) for flag in _SYNTHETIC_FLAGS):
        return False
    text = text_of(message)
    return bool(text.strip()) and not _SUMMARY_OPENING.match(text)


def pending_request(messages: Sequence[Message]) -> str | None:
    """The latest real user message not yet followed by an assistant reply."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return None
        if is_real_user_message(message):
            return text_of(message)
    return None


def previous_answer(messages: Sequence[Message]) -> str | None:
    """The latest assistant text: asked to check its answer, a rule-based model can only stand by it."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and text_of(message).strip():
            return text_of(message)
    return None


def conversation_digest(messages: Sequence[Message]) -> str:
    text = json.dumps(wire_messages(messages), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
