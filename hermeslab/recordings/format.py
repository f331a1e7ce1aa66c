"""Recorded sessions: the format of one JSONL line of the shared datasets, checked and written.

``{"id", "source", "license", "model", "messages", "tools", "meta"}`` — OpenAI
chat messages, the tool schemas that were offered, and free-form details of
where the session came from. Replays, metrics, importers and the notebook's
export all speak this type.

The format is stricter than what a provider accepts, because a replay needs
every turn to be unambiguous: roles are ``system``, ``user``, ``assistant`` and
``tool``; ``content`` is always a string; tool-call ids are unique in a session;
every call is answered exactly once by a later ``tool`` message; arguments are a
string holding a JSON object. `validate_recording` names each violation with
the index of the message it is in; `recorded_text` and `recorded_call` bring a
stored message's content and calls into that shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hermeslab.core.messages import text_of

RECORDING_FIELDS = ("id", "source", "license", "model", "messages", "tools", "meta")
ROLES = ("system", "user", "assistant", "tool")
#: Keys a message may carry besides ``role`` and ``content``, and the roles that may carry them.
_MESSAGE_KEYS = {"tool_calls": ("assistant",), "tool_call_id": ("tool",), "name": ROLES}


@dataclass
class Recording:
    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    source: str = ""
    model: str | None = None
    license: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Recording:
        """The recording a parsed JSONL line describes (shape checks live in the validator)."""
        return cls(id=str(data["id"]), messages=list(data["messages"]), tools=data.get("tools"),
                   source=data.get("source") or "", model=data.get("model"), license=data.get("license"),
                   meta=dict(data.get("meta") or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "license": self.license, "model": self.model,
                "messages": self.messages, "tools": self.tools, "meta": self.meta}


@dataclass(frozen=True)
class RecordingProblem:
    """Why one recording (or one line of a file) cannot be used, and exactly where."""

    reason: str
    path: str | None = None
    #: 1-based line of the file.
    line: int | None = None
    #: 0-based index into ``messages`` when the problem is inside one message.
    message_index: int | None = None
    recording_id: str | None = None

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path if self.line is None else f"{self.path}:{self.line}")
        elif self.recording_id is not None:
            where.append(f"recording {self.recording_id!r}")
        if self.message_index is not None:
            where.append(f"message {self.message_index}")
        return ": ".join(where + [self.reason])


class RecordingError(ValueError):
    """Recordings that cannot be loaded or written; ``problems`` says which and why."""

    def __init__(self, problems: list[RecordingProblem]):
        self.problems = problems
        shown = "\n".join(f"  {p}" for p in problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        super().__init__(f"{len(problems)} problem(s) in recordings:\n{shown}{more}")


# ---------------------------------------------------------------- validation


def validate_recording(data: Any) -> list[RecordingProblem]:
    """Every way ``data`` (a parsed JSONL line) breaks the recorded-session format; empty when it is good."""
    if not isinstance(data, dict):
        return [RecordingProblem(f"a recording must be a JSON object, got {json_kind(data)}")]
    rid = data.get("id") if isinstance(data.get("id"), str) else None
    problems = [RecordingProblem(reason, recording_id=rid) for reason in _field_problems(data)]
    messages = data.get("messages")
    if isinstance(messages, list):
        problems += [RecordingProblem(reason, message_index=index, recording_id=rid)
                     for index, reason in _message_problems(messages)]
    return problems


def _field_problems(data: dict[str, Any]) -> Iterator[str]:
    for key in data:
        if key not in RECORDING_FIELDS:
            yield f"unknown field {key!r} (fields are: {', '.join(RECORDING_FIELDS)})"
    if "id" not in data:
        yield "missing field 'id'"
    elif not isinstance(data["id"], str) or not data["id"]:
        yield f"field 'id' must be a non-empty string, got {json_kind(data['id'])}"
    if "messages" not in data:
        yield "missing field 'messages'"
    elif not isinstance(data["messages"], list):
        yield f"field 'messages' must be a list, got {json_kind(data['messages'])}"
    elif not data["messages"]:
        yield "field 'messages' is empty"
    for key in ("source", "license", "model"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            yield f"field {key!r} must be a string or null, got {json_kind(value)}"
    if data.get("meta") is not None and not isinstance(data["meta"], dict):
        yield f"field 'meta' must be an object, got {json_kind(data['meta'])}"
    yield from _tools_problems(data.get("tools"))


def _tools_problems(tools: Any) -> Iterator[str]:
    if tools is None:
        return
    if not isinstance(tools, list):
        yield f"field 'tools' must be a list of tool schemas or null, got {json_kind(tools)}"
        return
    names: set[str] = set()
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            yield f"tools[{index}] must be {{\"type\": \"function\", \"function\": {{...}}}}"
        elif not isinstance(function.get("name"), str) or not function["name"]:
            yield f"tools[{index}] has no function name"
        elif function["name"] in names:
            yield f"tools[{index}] repeats the tool name {function['name']!r}"
        else:
            names.add(function["name"])


def _message_problems(messages: list[Any]) -> Iterator[tuple[int, str]]:
    """(index, reason) for each violation, including tool calls that pair up wrongly."""
    issued: dict[str, int] = {}  # call id -> index of the assistant message that issued it
    answered: dict[str, int] = {}  # call id -> index of its tool result
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            yield index, f"a message must be a JSON object, got {json_kind(message)}"
            continue
        role = message.get("role")
        if role not in ROLES:
            yield index, f"unknown role {role!r} (roles are: {', '.join(ROLES)})"
            continue
        for key in message:
            if key not in ("role", "content") and role not in _MESSAGE_KEYS.get(key, ()):
                yield index, f"unexpected key {key!r} in a {role} message"
        if "content" not in message:
            yield index, "missing 'content' (use \"\" for an assistant turn that only calls tools)"
        elif not isinstance(message["content"], str):
            yield index, f"content must be a string, got {json_kind(message['content'])}"
        if "name" in message and not isinstance(message["name"], str):
            yield index, f"name must be a string, got {json_kind(message['name'])}"
        if role == "assistant" and "tool_calls" in message:
            yield from ((index, reason) for reason in _call_problems(message["tool_calls"], index, issued))
        if role == "tool":
            yield from ((index, reason) for reason in _result_problems(message, index, issued, answered))
    for call_id, index in issued.items():
        if call_id not in answered:
            yield index, f"tool call {call_id!r} is never answered by a tool message"


def _call_problems(calls: Any, index: int, issued: dict[str, int]) -> Iterator[str]:
    if not isinstance(calls, list):
        yield f"tool_calls must be a list, got {json_kind(calls)}"
        return
    if not calls:
        yield "tool_calls is empty (leave the key out when there are no calls)"
    for number, call in enumerate(calls):
        if not isinstance(call, dict):
            yield f"tool call {number} must be an object, got {json_kind(call)}"
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            yield f"tool call {number} needs a non-empty string id"
        elif call_id in issued:
            yield f"tool call id {call_id!r} was already used by message {issued[call_id]}"
        else:
            issued[call_id] = index
        if call.get("type") != "function":
            yield f"tool call {number} must have type 'function', got {call.get('type')!r}"
        function = call.get("function")
        if not isinstance(function, dict):
            yield f"tool call {number} needs a 'function' object"
            continue
        if not isinstance(function.get("name"), str) or not function["name"]:
            yield f"tool call {number} has no function name"
        reason = _arguments_problem(function.get("arguments"))
        if reason:
            yield f"tool call {number} {reason}"


def _arguments_problem(arguments: Any) -> str | None:
    if not isinstance(arguments, str):
        return f"arguments must be a JSON string, got {json_kind(arguments)}"
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return f"arguments must encode a JSON object, got {json_kind(value)}"
    return None


def _result_problems(message: dict[str, Any], index: int, issued: dict[str, int],
                     answered: dict[str, int]) -> Iterator[str]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        yield "tool message needs a non-empty string tool_call_id"
    elif call_id in answered:
        yield f"tool result {call_id!r} answers a call already answered by message {answered[call_id]}"
    elif call_id not in issued:
        yield f"tool result {call_id!r} answers no earlier tool call"
    else:
        answered[call_id] = index


def json_kind(value: Any) -> str:
    """A JSON name for the type of ``value``, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


# ---------------------------------------------------------------- one line


def recording_line(recording: Recording) -> str:
    """One JSONL line (without the newline), or a RecordingError if the recording breaks the format."""
    data = recording.to_dict()
    problems = validate_recording(data)
    if problems:
        raise RecordingError(problems)
    return json.dumps(data, ensure_ascii=False)


# ---------------------------------------------------------------- stored messages into the format


def recorded_text(content: Any) -> str:
    """Content as the recorded-session format wants it: a string (text parts joined, null as "")."""
    if content is None:
        return ""
    if isinstance(content, str):
        if content.startswith("[") and content.endswith("]"):
            try:
                parts = json.loads(content)
            except json.JSONDecodeError:
                return content
            if isinstance(parts, list) and parts and all(isinstance(p, dict) and "type" in p for p in parts):
                return text_of({"content": parts})
        return content
    if isinstance(content, list):
        return text_of({"content": content})
    return str(content)


def recorded_call(call: Any) -> dict[str, Any]:
    """A stored tool call in the plain OpenAI shape (arguments as a JSON string, extra keys dropped)."""
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call.get("id", ""), "type": "function",
            "function": {"name": function.get("name", ""), "arguments": arguments}}
