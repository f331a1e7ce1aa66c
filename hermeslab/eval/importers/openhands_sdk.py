"""OpenHands 1.x conversations (the software-agent SDK): a conversation's ``events/`` folder.

The SDK's ``EventLog`` writes each event as ``events/event-<index>-<id>.json``
holding the event's JSON with a ``kind`` (openhands/sdk/conversation/
event_store.py and persistence_const.py of openhands-sdk 1.58.2). The turns
are rebuilt as the SDK puts them to the model: ``SystemPromptEvent`` is the
system prompt (and its ``tools`` the recording's tools), ``MessageEvent`` a
user or assistant message (its ``extended_content`` included, as the SDK
appends it), the ``ActionEvent`` s of one ``llm_response_id`` one assistant
message whose text is the first action's ``thought``, and an
``ObservationEvent``, ``AgentErrorEvent`` or ``UserRejectObservation`` the
result of its call. A call nothing answers loses its call, as in the SDK's
view. ``Condensation`` events and their ``CondensationSummaryEvent`` are the
SDK's compaction artefacts: left out, their places kept in ``meta``; other
kinds (state updates, pauses, token streams) never reach the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, json_kind

from .base import ImportOptions, Sample, Skip, SourceFormat, json_document
from .transcript import Transcript, content_text, finished

EVENT_FILE = re.compile(r"event-(\d+)-.+\.json")
#: Event kinds that answer a tool call, and the field holding what they said.
RESULTS = {"ObservationEvent": "observation", "AgentErrorEvent": "error", "UserRejectObservation": "rejection_reason"}


def _recognises(sample: Sample) -> bool:
    document = sample.document
    return (isinstance(document, list) and bool(document) and isinstance(document[0], dict)
            and isinstance(document[0].get("kind"), str) and document[0]["kind"].endswith("Event"))


def _recognises_folder(folder: Path) -> bool:
    files = [child for child in folder.iterdir() if not child.name.startswith(".")]
    return folder.name == "events" and bool(files) and all(EVENT_FILE.fullmatch(child.name) for child in files)


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    if not path.is_dir():
        events = json_document(path)
        yield events if isinstance(events, Skip) else events_recording(events, f"openhands/{path.stem}", str(path))
        return
    events = []
    files = [child for child in path.iterdir() if EVENT_FILE.fullmatch(child.name)]
    for child in sorted(files, key=lambda p: int(EVENT_FILE.fullmatch(p.name).group(1))):
        try:
            events.append(json.loads(child.read_bytes()))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            yield Skip(str(child), f"not a JSON event ({exc}); the conversation is read without it")
    yield events_recording(events, f"openhands/{path.parent.name}", str(path))


def _text(value: Any) -> str:
    """Text of a content list, one text content, or an observation holding ``content``."""
    if isinstance(value, dict) and "content" in value:
        value = value["content"]
    if isinstance(value, dict):
        value = [value]
    return content_text(value)


def events_recording(events: Any, name: str, where: str) -> Recording | Skip:
    """The conversation of a list of SDK events, or why it cannot be one."""
    if not isinstance(events, list):
        return Skip(where, f"OpenHands SDK events are a list, got {json_kind(events)}")
    for index, event in enumerate(events):
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            return Skip(where, f"event {index} has no 'kind'")
    answered = {event.get("tool_call_id") for event in events if event["kind"] in RESULTS}
    transcript = Transcript()
    tools: list[Any] | None = None
    replies: dict[Any, int] = {}
    points: list[dict[str, Any]] = []
    left_out = {"unanswered_calls": 0, "condensation_summaries": 0}
    for index, event in enumerate(events):
        kind = event["kind"]
        if kind == "SystemPromptEvent":
            transcript.say("system", _text(event.get("system_prompt")))
            given = event.get("tools")
            tools = given if isinstance(given, list) and given else tools
        elif kind == "MessageEvent":
            message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
            role = message.get("role") if message.get("role") in ("user", "assistant", "system") else (
                "user" if event.get("source") == "user" else "assistant")
            extra = _text(event.get("extended_content"))
            transcript.say(role, "\n".join(part for part in (_text(message.get("content")), extra) if part))
        elif kind == "ActionEvent":
            call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else None
            if call is None:
                return Skip(where, f"event {index}: an ActionEvent without a 'tool_call' object")
            reply = event.get("llm_response_id") or event.get("id")
            if not isinstance(reply, str) or reply not in replies:
                transcript.say("assistant", _text(event.get("thought")))
                replies[reply if isinstance(reply, str) else str(index)] = len(transcript.messages) - 1
            if call.get("id") in answered and isinstance(call.get("id"), str):
                transcript.call(call["id"], str(call.get("name") or event.get("tool_name") or ""),
                                call.get("arguments"))
            else:
                left_out["unanswered_calls"] += 1
        elif kind in RESULTS:
            call_id = event.get("tool_call_id")
            if not isinstance(call_id, str):
                return Skip(where, f"event {index}: a {kind} without a tool_call_id")
            said = event.get(RESULTS[kind])
            transcript.answer(call_id, _text(said) if not isinstance(said, str) else said)
        elif kind == "Condensation":
            points.append({"at_message": len(transcript.messages), "event": event.get("id")})
        elif kind == "CondensationSummaryEvent":
            left_out["condensation_summaries"] += 1
    return finished(Recording(
        id=name, messages=transcript.messages, tools=tools, source=f"OpenHands SDK {where}",
        meta={"importer": "openhands-sdk", "events": len(events), "compressions": len(points),
              "compression_points": points, "left_out": left_out}), where)


FORMAT = SourceFormat("openhands-sdk", "an OpenHands 1.x conversation: its events/ folder (event-*.json)",
                      _recognises, _read, _recognises_folder)
