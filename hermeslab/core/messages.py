"""OpenAI chat-format messages: validation, inspection and repair.

Messages stay plain dicts so they travel unchanged to the `openai` SDK, into
DuckDB and into recorded-session files. Keys starting with ``_`` are
process-local annotations and are stripped before a request is sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

Message = dict[str, Any]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_CONTENT_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


class MessageValidationError(ValueError):
    """A message list that does not follow the chat format; names where and why."""

    def __init__(self, index: int, reason: str):
        self.index = index
        self.reason = reason
        super().__init__(f"message {index}: {reason}")


# ---------------------------------------------------------------- inspection


def text_of(message: Message) -> str:
    """The visible text of a message, joining the text parts of multimodal content."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)


def tool_calls_of(message: Message) -> list[dict[str, Any]]:
    """The assistant's tool calls, or an empty list."""
    if message.get("role") != "assistant":
        return []
    return list(message.get("tool_calls") or [])


def tool_call_ids(message: Message) -> list[str]:
    return [call.get("id", "") for call in tool_calls_of(message)]


def has_images(message: Message) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "image_url" for part in content
    )


def wire_message(message: Message) -> Message:
    """A copy without process-local ``_`` keys: what is actually sent to a provider."""
    return {key: value for key, value in message.items() if not key.startswith("_")}


def wire_messages(messages: Iterable[Message]) -> list[Message]:
    return [wire_message(m) for m in messages]


# ---------------------------------------------------------------- validation


def validate_message(message: Any, index: int = 0) -> None:
    """Raise MessageValidationError if one message is malformed."""
    if not isinstance(message, dict):
        raise MessageValidationError(index, f"expected an object, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise MessageValidationError(index, f"unknown role {role!r}")
    content = message.get("content")
    if type(content) is not str and content is not None:  # the common case, a string, decided by one check
        if not isinstance(content, (str, list)):
            raise MessageValidationError(
                index, f"content must be a string or a list of parts, got {type(content).__name__}")
        if isinstance(content, list):
            _validate_parts(content, index)
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise MessageValidationError(index, "tool message without tool_call_id")
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            raise MessageValidationError(index, f"{role} message carries tool_calls")
        if not isinstance(calls, list):
            raise MessageValidationError(index, "tool_calls must be a list")
        for call_index, call in enumerate(calls):
            _validate_call(call, call_index, index)
    if content is None and role in ("system", "developer", "user"):
        raise MessageValidationError(index, f"{role} message without content")


def _validate_parts(content: list, index: int) -> None:
    for part_index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in _CONTENT_PART_TYPES:
            raise MessageValidationError(index, f"content part {part_index} has an unknown type")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise MessageValidationError(index, f"content part {part_index} has no text")


def _validate_call(call: Any, call_index: int, index: int) -> None:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not call.get("id") or not isinstance(function, dict):
        raise MessageValidationError(index, f"tool call {call_index} needs an id and a function")
    if not isinstance(function.get("name"), str) or not function["name"]:
        raise MessageValidationError(index, f"tool call {call_index} has no function name")
    if not isinstance(function.get("arguments", ""), str):
        raise MessageValidationError(index, f"tool call {call_index} arguments must be a JSON string")


def validate_messages(messages: Any, *, check_pairs: bool = True) -> None:
    """Validate a whole conversation.

    With ``check_pairs`` every tool result must answer a call issued earlier and not
    answered yet; calls left unanswered at the end are allowed (a turn in flight).
    """
    if not isinstance(messages, list):
        raise MessageValidationError(-1, f"expected a list of messages, got {type(messages).__name__}")
    open_calls: set[str] = set()
    seen_calls: set[str] = set()
    for index, message in enumerate(messages):
        validate_message(message, index)
        if not check_pairs:
            continue
        role = message["role"]
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                call_id = call.get("id", "")
                if call_id in seen_calls:
                    raise MessageValidationError(index, f"tool call id {call_id!r} is used twice")
                seen_calls.add(call_id)
                open_calls.add(call_id)
        elif role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in open_calls:
                raise MessageValidationError(index, f"tool result {call_id!r} answers no open tool call")
            open_calls.discard(call_id)


# ---------------------------------------------------------------- repair


@dataclass
class RepairReport:
    """What a repair changed, so callers can log it instead of hiding it."""

    removed_orphan_results: list[int] = field(default_factory=list)
    stubbed_missing_results: list[str] = field(default_factory=list)
    fixed_surrogates: list[int] = field(default_factory=list)
    fixed_arguments: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.removed_orphan_results or self.stubbed_missing_results or self.fixed_surrogates or self.fixed_arguments
        )


def strip_surrogates(text: str) -> str:
    """Replace lone UTF-16 surrogates (which no JSON encoder will send) with U+FFFD; a text without any is
    returned as it is."""
    return _LONE_SURROGATE.sub("\ufffd", text) if has_surrogates(text) else text


def has_surrogates(text: str) -> bool:
    """Whether a text holds a lone UTF-16 surrogate: exactly the texts UTF-8 cannot encode, which the
    encoder finds several times faster than a pattern search."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_tool_arguments(arguments: str | None) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; raise ValueError with a readable reason."""
    if arguments is None or arguments.strip() == "":
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def repair_tool_arguments(arguments: str | None) -> str:
    """Return arguments that parse as a JSON object; unparseable text is wrapped, not lost."""
    try:
        parse_tool_arguments(arguments)
        return arguments if arguments and arguments.strip() else "{}"
    except ValueError:
        return json.dumps({"_unparsed_arguments": arguments or ""}, ensure_ascii=False)


MISSING_RESULT_TEXT = "[no result recorded for this tool call]"


def repair_messages(messages: list[Message], *, missing_result_text: str = MISSING_RESULT_TEXT) -> tuple[list[Message], RepairReport]:
    """Make a conversation sendable: pair every call with one result, fix encodings.

    Orphan tool results are dropped, calls that never got a result receive a stub
    result right after their group, lone surrogates become U+FFFD and
    non-JSON tool arguments are wrapped. Returns new message dicts; the input is
    not modified.
    """
    report = RepairReport()
    out: list[Message] = []
    open_calls: dict[str, None] = {}

    def close_open_calls() -> None:
        for call_id in list(open_calls):
            out.append({"role": "tool", "tool_call_id": call_id, "content": missing_result_text})
            report.stubbed_missing_results.append(call_id)
        open_calls.clear()

    for index, original in enumerate(messages):
        message = dict(original)
        role = message.get("role")
        if role != "tool" and open_calls:
            close_open_calls()
        if isinstance(message.get("content"), str) and has_surrogates(message["content"]):
            message["content"] = strip_surrogates(message["content"])
            report.fixed_surrogates.append(index)
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                report.removed_orphan_results.append(index)
                continue
            del open_calls[message["tool_call_id"]]
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                call = dict(call)
                function = dict(call.get("function") or {})
                fixed = repair_tool_arguments(function.get("arguments"))
                if fixed != function.get("arguments"):
                    report.fixed_arguments.append(call.get("id", ""))
                    function["arguments"] = fixed
                call["function"] = function
                calls.append(call)
                open_calls[call.get("id", "")] = None
            message["tool_calls"] = calls
        out.append(message)
    close_open_calls()
    return out, report


def open_tool_calls(messages: Sequence[Message]) -> tuple[int, list[str]] | None:
    """The latest assistant message's index and the ids of its calls no result answers yet, or None.

    Only results after that message count: an id reused from an earlier turn
    does not hide an open call. A user message after it means nothing is open.
    """
    answered: set[Any] = set()
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        role = message.get("role")
        if role == "tool":
            answered.add(message.get("tool_call_id"))
        elif role == "assistant":
            return index, [call["id"] for call in tool_calls_of(message) if call.get("id") not in answered]
        elif role == "user":
            return None
    return None
