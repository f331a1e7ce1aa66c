"""``%hermes export``: the conversation as Markdown for people or JSONL for replays.

Both are read back from the lab, so a notebook chat exports exactly as
``hermeslab export`` does: the recorded-session format of the shared datasets,
holding the whole conversation across compressions (see
`hermeslab.recordings.lab.import_lab`), with the tool schemas the chat offers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.messages import text_of, tool_calls_of
from ..recordings import Recording, recording_line
from ..recordings.lab import import_lab

if TYPE_CHECKING:
    from ..runtime import Runtime

FORMATS = ("md", "jsonl")


def session_record(runtime: Runtime) -> dict[str, Any]:
    """One recorded-session line for the runtime's current conversation, read from its lab."""
    if runtime.writer is None:
        raise ValueError("export reads the conversation from the lab, and this chat runs with store.enabled = false")
    runtime.writer.flush()
    agent = runtime.agent
    return import_lab(runtime.lab_path, agent.session.id, tools=agent.tools.schemas() or None).to_dict()


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


def export_target(path: str | Path, fmt: str) -> Path:
    """The file ``path`` names, refused when it is a folder or its folder is missing (a typo must not make folders)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValueError(f"{target} is a directory; give a file path such as {target / ('chat.' + fmt)}")
    if not target.parent.is_dir():
        raise ValueError(f"no folder {target.parent} to write {target.name} in; create it first or give another path")
    return target


def write_export(record: dict[str, Any], fmt: str, path: str | Path) -> Path:
    """Write ``record`` to ``path`` as ``md`` or as a one-line ``jsonl`` file (replacing what was there)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}")
    target = export_target(path, fmt)
    text = markdown_transcript(record) if fmt == "md" else recording_line(Recording.from_dict(record)) + "\n"
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
