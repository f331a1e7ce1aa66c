"""What the search index stores: one document per message, one record per session.

A message is searched by everything a person might remember about it: its
text, the names and arguments of the tools it called, and for a tool result
the tool's name and its output. ``message_text`` flattens those into the one
string that is both indexed and shown in snippets, so a snippet always shows
the words that matched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class MessageDoc:
    message_id: str
    session_id: str
    seq: int | None
    role: str | None
    #: Unix seconds.
    created_at: float | None
    text: str

    def __post_init__(self) -> None:
        for name in ("message_id", "session_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"MessageDoc.{name} must be a non-empty string, got {value!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"MessageDoc.text must be a string, got {type(self.text).__name__}")


@dataclass(frozen=True)
class SessionInfo:
    id: str
    parent_id: str | None = None
    title: str | None = None
    #: Unix seconds.
    started_at: float | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"SessionInfo.id must be a non-empty string, got {self.id!r}")


def message_text(role: str | None, content: Any, tool_calls: Any = None, tool_name: str | None = None) -> str:
    """The searchable text of a message: content, then one ``name(arguments)`` line per tool call.

    A tool result starts with ``[tool name]``. Content stored as a JSON list of
    parts contributes the text of its parts.
    """
    lines = []
    if role == "tool" and tool_name:
        lines.append(f"[{tool_name}]")
    text = _content_text(content)
    if text:
        lines.append(text)
    for call in _calls(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            lines.append(f"{function.get('name') or ''}({_arguments(function.get('arguments'))})")
    return "\n".join(lines)


def doc_from_row(row: Mapping[str, Any]) -> MessageDoc:
    """A document from a row of the lab's ``messages`` table (or the writer's row for it)."""
    return MessageDoc(
        message_id=str(row["id"]),
        session_id=str(row["session_id"]),
        seq=_opt_int(row.get("seq")),
        role=_opt_str(row.get("role")),
        created_at=unix_seconds(row.get("created_at")),
        text=message_text(_opt_str(row.get("role")), row.get("content"), row.get("tool_calls"),
                          _opt_str(row.get("tool_name"))),
    )


def session_from_row(row: Mapping[str, Any]) -> SessionInfo:
    """A session record from a row of the lab's ``sessions`` table (or the writer's row for it)."""
    return SessionInfo(id=str(row["id"]), parent_id=_opt_str(row.get("parent_session_id")),
                       title=_opt_str(row.get("title")), started_at=unix_seconds(row.get("started_at")),
                       source=_opt_str(row.get("source")))


def unix_seconds(value: Any) -> float | None:
    """A lab timestamp (naive UTC datetime) or Unix seconds as Unix seconds; None when missing."""
    if value is None or _is_missing(value):
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    if hasattr(value, "to_pydatetime"):
        return unix_seconds(value.to_pydatetime())
    return float(value)


def _content_text(content: Any) -> str:
    if content is None or _is_missing(content):
        return ""
    if isinstance(content, str) and content.startswith("[") and content.endswith("]"):
        try:
            parsed = json.loads(content)
        except json.JSONDecodeError:
            return content
        if isinstance(parsed, list) and all(isinstance(part, dict) for part in parsed):
            return _content_text(parsed)
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("text"))
    return str(content)


def _calls(tool_calls: Any) -> Iterable[Any]:
    if tool_calls is None or _is_missing(tool_calls):
        return []
    if isinstance(tool_calls, str):
        try:
            tool_calls = json.loads(tool_calls)
        except json.JSONDecodeError:
            return []
    return tool_calls if isinstance(tool_calls, list) else []


def _arguments(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _is_missing(value: Any) -> bool:
    """pandas hands NULLs over as NaN or NaT."""
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return False


def _opt_str(value: Any) -> str | None:
    return None if value is None or _is_missing(value) else str(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None or _is_missing(value) else int(value)
