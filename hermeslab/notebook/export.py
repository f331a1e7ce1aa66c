"""``%hermes export``: the conversation as Markdown for people or JSONL for replays.

The JSONL line has the recorded-session format of the shared datasets
(``id``, ``source``, ``model``, ``messages``, ``tools``, ``meta``), so a chat
from a notebook can be replayed and compared like any recorded session. The
messages are the history the model sees now (after any compression).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..core.messages import text_of, tool_calls_of, wire_message

FORMATS = ("md", "jsonl")


def session_record(agent: Agent, *, lineage: list[str] | None = None) -> dict[str, Any]:
    """One recorded-session line for the agent's current session."""
    session = agent.session
    messages = []
    for message in agent.messages:
        clean = wire_message(message)
        if clean.get("role") == "assistant" and clean.get("content") is None:
            clean["content"] = ""
        messages.append(clean)
    compactor = agent.compactor
    return {
        "id": session.id,
        "source": f"hermeslab notebook session {session.id}",
        "model": agent.config.model.name,
        "messages": messages,
        "tools": agent.tools.schemas() or None,
        "meta": {
            "title": session.title,
            "parent_session_id": session.parent_session_id,
            "lineage": lineage or [session.id],
            "turns": session.turns,
            "compressions": compactor.state.compression_count if compactor else 0,
            "context_length": agent.config.model.context_length,
            "config_hash": agent.config.digest(),
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    }


def markdown_transcript(record: dict[str, Any]) -> str:
    """The session as readable Markdown: one section per message, tool calls as fenced JSON."""
    title = record["meta"].get("title") or record["id"]
    lines = [f"# {title}", "", f"Session `{record['id']}` · model `{record['model']}`", ""]
    for message in record["messages"]:
        role = message.get("role", "?")
        heading = f"## {role}"
        if role == "tool":
            heading += f" · `{message.get('tool_call_id', '')}`"
        lines += [heading, ""]
        text = text_of(message)
        if role in ("tool", "system"):
            lines += [_fence(text), ""]
        elif text:
            lines += [text, ""]
        for call in tool_calls_of(message):
            function = call.get("function") or {}
            lines += [f"Tool call `{function.get('name', '')}` (`{call.get('id', '')}`):", "",
                      _fence(function.get("arguments", ""), "json"), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_export(record: dict[str, Any], fmt: str, path: str | Path) -> Path:
    """Write ``record`` to ``path`` as ``md`` or as a one-line ``jsonl`` file (replacing what was there)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}")
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValueError(f"{target} is a directory; give a file path such as {target / ('chat.' + fmt)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    text = markdown_transcript(record) if fmt == "md" else json.dumps(record, ensure_ascii=False) + "\n"
    target.write_text(text, encoding="utf-8")
    return target


def _fence(text: str, language: str = "") -> str:
    """A code fence longer than any backtick run inside ``text``."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    marker = "`" * max(3, longest + 1)
    return f"{marker}{language}\n{text}\n{marker}"
