"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): one conversation a file.

Since Codex 0.4x every line is ``{"timestamp", "type", "payload"}``:
``session_meta`` first, then ``response_item`` payloads (OpenAI Responses API
items: the messages, calls and outputs the model was sent), ``turn_context``
(the model of each turn), ``event_msg`` (what the interface showed) and
``compacted`` (a compaction's summary and the history it replaced). Earlier
rollouts hold a ``{"id", "timestamp", "instructions"}`` line and then bare
items between ``{"record_type": "state"}`` lines. Both are read.

The session's base instructions open the recording as its system prompt;
the response items are the conversation, developer messages becoming system
turns. A user's prompt is recorded twice (an item and a ``user_message``
event); some rollouts keep only the event, so an event whose text no item
carried is added as the user turn. ``compacted`` lines and remote
``compaction`` items are Codex's own artefacts: left out, their places kept in
``meta``. Shapes checked against real rollouts of Codex 0.125 and 0.128
(codemie-ai/codemie-code src/agents/plugins/codex/__tests__/fixtures, commit
8e8d4ce5).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, json_kind

from .base import ImportOptions, Sample, Skip, SourceFormat, json_object_lines
from .transcript import Transcript, content_text, finished

LINE_TYPES = ("session_meta", "response_item", "turn_context", "event_msg", "compacted")
#: Keys of the first line of a rollout written before lines had a type and payload.
OLD_HEADER = {"id", "timestamp", "instructions"}


def _recognises(sample: Sample) -> bool:
    first = sample.lines[0] if sample.lines else None
    if not isinstance(first, dict):
        return False
    return ((first.get("type") in LINE_TYPES and isinstance(first.get("payload"), dict))
            or (OLD_HEADER <= set(first) and "messages" not in first))


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    lines, skipped = json_object_lines(path, "rollout", "; the rollout is read without it")
    yield from skipped
    yield rollout_recording(lines, path)


def rollout_recording(lines: list[dict[str, Any]], path: Path) -> Recording | Skip:
    """The conversation of one rollout's parsed lines, or why it cannot be one."""
    transcript = Transcript()
    meta: dict[str, Any] = {}
    model: str | None = None
    points: list[dict[str, Any]] = []
    unmatched_items: list[str] = []
    unmatched_events: list[str] = []
    left_out = {"reasoning": 0, "hosted_tool_calls": 0, "compactions": 0}
    for number, line in enumerate(lines, start=1):
        kind, payload = line.get("type"), line.get("payload")
        if kind is None and "record_type" in line:
            continue
        if kind is None and OLD_HEADER <= set(line) and number == 1:
            meta = line
            continue
        if kind not in LINE_TYPES:  # an older rollout's bare item
            kind, payload = "response_item", line
        if not isinstance(payload, dict):
            return Skip(str(path), f"line {number}: a {kind} line needs an object payload, got {json_kind(payload)}")
        if kind == "session_meta":
            meta = payload
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif kind == "compacted" or (kind == "response_item" and payload.get("type") in ("compaction",
                                                                                         "compaction_summary")):
            points.append({"at_message": len(transcript.messages)})
            left_out["compactions"] += 1
        elif kind == "event_msg" and payload.get("type") == "user_message":
            text = content_text(payload.get("message"))
            if text in unmatched_items:
                unmatched_items.remove(text)
            else:
                transcript.say("user", text)
                unmatched_events.append(text)
        elif kind == "response_item":
            item_type = payload.get("type")
            if item_type == "message" and payload.get("role") == "user":
                text = content_text(payload.get("content"))
                if text in unmatched_events:
                    unmatched_events.remove(text)
                    continue
                unmatched_items.append(text)
            if item_type == "reasoning":
                left_out["reasoning"] += 1
            elif item_type == "web_search_call":
                left_out["hosted_tool_calls"] += 1
            if not transcript.response_item(payload):
                return Skip(str(path), f"line {number}: unknown response item type {item_type!r}")
    session = meta.get("id") if isinstance(meta.get("id"), str) and meta.get("id") else path.stem
    instructions = meta.get("base_instructions", meta.get("instructions"))
    if isinstance(instructions, dict):
        instructions = instructions.get("text")
    system = [{"role": "system", "content": instructions}] if isinstance(instructions, str) and instructions else []
    points = [{"at_message": point["at_message"] + len(system)} for point in points]
    return finished(Recording(
        id=f"codex/{session}", messages=system + transcript.messages, model=model, source=f"Codex {path}",
        meta={"importer": "codex", "session_id": session, "cli_version": meta.get("cli_version"),
              "originator": meta.get("originator"), "compressions": len(points), "compression_points": points,
              "left_out": left_out}), str(path))


FORMAT = SourceFormat("codex", "a Codex CLI rollout (~/.codex/sessions/**/rollout-*.jsonl)", _recognises, _read)
