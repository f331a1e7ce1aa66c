"""OpenAI chat JSONL: fine-tuning and chat-log lines, one conversation a line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.core.messages import text_of
from hermeslab.recordings import Recording, json_kind

from ..recording import RecordingsFile
from .base import ImportOptions, Sample, Skip, SourceFormat

#: Keys the OpenAI SDK writes as null or empty on every message; they carry nothing.
_EMPTY_SDK_KEYS = ("refusal", "audio", "function_call", "annotations", "tool_calls")


def import_openai_jsonl(path: str | Path) -> RecordingsFile:
    """Recordings from OpenAI chat JSONL: ``{"messages": [...], "tools"?: [...]}`` lines or bare message lists.

    Iterate the result; lines that cannot be imported are in its ``problems``.
    A line's ``id`` is its own ``id`` when it has one, else ``<file stem>/<line>``.
    Fine-tuning ``weight`` keys and the SDK's empty fields are dropped, a missing
    assistant content becomes ``""`` and text-only content parts are joined.
    """
    source = Path(path).expanduser()
    stem = source.stem

    def parse(data: Any, line: int) -> dict[str, Any]:
        if isinstance(data, list):
            data = {"messages": data}
        if not isinstance(data, dict):
            raise ValueError(f"expected an object with 'messages' or a list of messages, got {json_kind(data)}")
        if "messages" not in data:
            raise ValueError(f"no 'messages' in this line (keys: {', '.join(sorted(data)) or 'none'})")
        messages = data["messages"]
        line_id = data.get("id")
        return {
            "id": line_id if isinstance(line_id, str) and line_id else f"{stem}/{line}",
            "source": str(source),
            "license": None,
            "model": data.get("model") if isinstance(data.get("model"), str) else None,
            "messages": [_openai_message(m) for m in messages] if isinstance(messages, list) else messages,
            "tools": data.get("tools"),
            "meta": {"importer": "openai", "line": line},
        }

    return RecordingsFile(source, parse)


def _openai_message(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    clean = {key: value for key, value in message.items()
             if key != "weight" and not (key in _EMPTY_SDK_KEYS and value in (None, []))}
    content = clean.get("content")
    if content is None and clean.get("role") == "assistant":
        clean["content"] = ""
    elif isinstance(content, list) and content and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content):
        clean["content"] = text_of(clean)
    calls = clean.get("tool_calls")
    if isinstance(calls, list):
        clean["tool_calls"] = [{"type": "function", **call} if isinstance(call, dict) and "type" not in call else call
                               for call in calls]
    return clean


def _recognises(sample: Sample) -> bool:
    first = sample.lines[0] if sample.lines else None
    if isinstance(first, dict):
        return isinstance(first.get("messages"), list)
    return isinstance(first, list) and bool(first) and all(isinstance(m, dict) and "role" in m for m in first)


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    recordings = import_openai_jsonl(path)
    yield from recordings
    for problem in recordings.problems:
        at = f"message {problem.message_index}: " if problem.message_index is not None else ""
        yield Skip(f"{problem.path}:{problem.line}", at + problem.reason)


FORMAT = SourceFormat("openai", "OpenAI chat JSONL ({\"messages\": [...]} or a list of messages a line)",
                      _recognises, _read)
