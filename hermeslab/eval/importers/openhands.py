"""OpenHands event logs: saved trajectories, a session's event-stream folder, and evaluation ``output.jsonl``.

OpenHands records a conversation as events (``id``, ``source``, and either
``action`` or ``observation``), kept three ways: a trajectory file (a JSON
list of events, as ``save_trajectory_path`` and tests/runtime/trajs write
them), a session's ``events/`` folder (one ``<n>.json`` per event), and the
evaluation harness's ``output.jsonl`` (one instance a line, its events under
``history``; older harnesses kept ``[action, observation]`` pairs).

The turns are rebuilt the way OpenHands puts them to the model: an action
that came from a function call carries the model's whole reply in
``tool_call_metadata.model_response``, so each reply becomes one assistant
message with its text and calls (replies with several calls appear once);
an observation with the same metadata is that call's result, its ``content``
as the tool said it. A call no observation answers (``finish``) keeps its
reply's text and loses the call, as OpenHands' own conversation memory leaves
unmatched calls out (``ConversationMemory._filter_unmatched_tool_calls``,
openhands/memory/conversation_memory.py line 751 at commit 156d0686). Condensation actions and their summaries are OpenHands'
compaction artefacts (actions ``condensation`` and ``condensation_request``,
observation ``condense``: openhands/core/schema) and are left out with their
places kept in ``meta``;
state changes, recalls and null events never reached the model. The system
message action's tools become the recording's ``tools``. Shapes checked
against OpenHands tests/runtime/trajs at commit 156d0686.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, json_kind

from .base import ImportOptions, Sample, Skip, SourceFormat, json_lines
from .transcript import Transcript, finished

#: Events that never reach the model.
SILENT = ("change_agent_state", "agent_state_changed", "null", "recall", "pause", "resume")
#: OpenHands' compaction artefacts: the action that condenses and the summary it leaves.
CONDENSATION = ("condensation", "condensation_request", "condense")
EVENT_FILE = re.compile(r"\d+\.json")


def _is_event(value: Any) -> bool:
    return (isinstance(value, dict) and "source" in value and "kind" not in value
            and ("action" in value or "observation" in value))


def _is_history(value: Any) -> bool:
    history = value.get("history") if isinstance(value, dict) else None
    return isinstance(history, list) and bool(history) and (
        _is_event(history[0]) or (isinstance(history[0], list) and any(_is_event(e) for e in history[0])))


def _recognises(sample: Sample) -> bool:
    document = sample.document
    if isinstance(document, list) and document and _is_event(document[0]):
        return True
    return any(_is_history(value) for value in (document, *sample.lines))


def _recognises_folder(folder: Path) -> bool:
    if folder.name != "events":
        return False
    files = [child for child in folder.iterdir() if not child.name.startswith(".")]
    return bool(files) and all(child.is_file() and EVENT_FILE.fullmatch(child.name) for child in files)


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    if path.is_dir():
        yield from _read_folder(path)
        return
    try:
        document = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError):
        yield from _read_lines(path)
        return
    if isinstance(document, dict) and "history" in document:
        yield _instance_recording(document, path, str(path))
    else:
        yield events_recording(document, f"openhands/{path.stem}", str(path))


def _read_lines(path: Path) -> Iterator[Recording | Skip]:
    for item in json_lines(path):
        yield item if isinstance(item, Skip) else _instance_recording(item[1], path, f"{path}:{item[0]}", item[0])


def _instance_recording(line: Any, path: Path, where: str, number: int | None = None) -> Recording | Skip:
    if not isinstance(line, dict) or not isinstance(line.get("history"), list):
        return Skip(where, f"an OpenHands evaluation line is an object with a 'history' list, got {json_kind(line)}")
    instance = line.get("instance_id")
    name = str(instance) if instance not in (None, "") else f"{path.stem}/{number or 1}"
    history = [event for entry in line["history"]
               for event in (entry if isinstance(entry, list) else [entry])]
    recording = events_recording(history, f"openhands/{name}", where)
    metadata = line.get("metadata") if isinstance(line.get("metadata"), dict) else {}
    config = metadata.get("llm_config") if isinstance(metadata.get("llm_config"), dict) else {}
    if isinstance(recording, Recording) and isinstance(config.get("model"), str):
        recording.model = config["model"]
    return recording


def _read_folder(folder: Path) -> Iterator[Recording | Skip]:
    events = []
    for child in sorted(folder.iterdir(), key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        if child.name.startswith("."):
            continue
        try:
            events.append(json.loads(child.read_bytes()))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            yield Skip(str(child), f"not a JSON event ({exc}); the stream is read without it")
    yield events_recording(events, f"openhands/{folder.parent.name}", str(folder))


def events_recording(events: Any, name: str, where: str) -> Recording | Skip:
    """The conversation of a list of OpenHands events, or why it cannot be one."""
    if not isinstance(events, list):
        return Skip(where, f"OpenHands events are a list, got {json_kind(events)}")
    for index, event in enumerate(events):
        if not isinstance(event, dict) or ("action" not in event and "observation" not in event):
            return Skip(where, f"event {index} is not an OpenHands action or observation")
    answered = {_call_id(event) for event in events if "observation" in event} - {None}
    transcript = Transcript()
    tools: list[Any] | None = None
    model: str | None = None
    replies: set[str] = set()
    results: set[str] = set()
    points: list[dict[str, Any]] = []
    left_out = {"unanswered_calls": 0, "condensation_summaries": 0}
    for index, event in enumerate(events):
        kind = event.get("action", event.get("observation"))
        if not isinstance(kind, str):
            return Skip(where, f"event {index} names its action or observation with a {json_kind(kind)}")
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        metadata = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else None
        if kind in SILENT:
            continue
        if kind in CONDENSATION:
            if "action" in event:
                points.append({"at_message": len(transcript.messages), "event": event.get("id")})
            else:
                left_out["condensation_summaries"] += 1
            continue
        if "action" in event:
            if kind == "system":
                transcript.say("system", args.get("content", event.get("message")))
                tools = args["tools"] if isinstance(args.get("tools"), list) else tools
            elif metadata is not None:
                problem, reply_model = _reply(transcript, metadata, args, answered, replies, left_out,
                                              event.get("message"))
                if problem:
                    return Skip(where, f"event {index}: {problem}")
                model = reply_model or model
            elif kind == "message":
                role = "user" if event.get("source") == "user" else "assistant"
                transcript.say(role, args.get("content", event.get("message")))
            else:
                transcript.say("assistant", args.get("thought") or event.get("message"))
        else:
            call_id = _call_id(event)
            if call_id is None:
                transcript.say("user", event.get("content", event.get("message")))
            elif call_id not in results:
                results.add(call_id)
                transcript.answer(call_id, event.get("content", event.get("message")))
    return finished(Recording(
        id=name, messages=transcript.messages, tools=tools, model=model, source=f"OpenHands {where}",
        meta={"importer": "openhands", "events": len(events), "compressions": len(points),
              "compression_points": points, "left_out": left_out}), where)


def _call_id(event: dict[str, Any]) -> str | None:
    metadata = event.get("tool_call_metadata")
    call_id = metadata.get("tool_call_id") if isinstance(metadata, dict) else None
    return call_id if isinstance(call_id, str) and call_id else None


def _reply(transcript: Transcript, metadata: dict[str, Any], args: dict[str, Any], answered: set[str],
           replies: set[str], left_out: dict[str, int], said: Any) -> tuple[str | None, str | None]:
    """Add the model reply behind one function-call action, once per reply; (problem, model).

    A reply left with neither text nor calls (a bare ``finish``) says what the
    action says to the user, ``said``.
    """
    response = metadata.get("model_response") if isinstance(metadata.get("model_response"), dict) else {}
    choices = response.get("choices") if isinstance(response.get("choices"), list) else []
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    model = response.get("model") if isinstance(response.get("model"), str) else None
    if not isinstance(message, dict):
        call_id = metadata.get("tool_call_id")
        if not isinstance(call_id, str) or call_id not in answered:
            left_out["unanswered_calls"] += 1
            transcript.say("assistant", args.get("thought"))
            return None, model
        transcript.say("assistant", args.get("thought"))
        transcript.call(call_id, str(metadata.get("function_name") or ""),
                        {k: v for k, v in args.items() if k != "thought"})
        return None, model
    reply_id = str(response.get("id") or metadata.get("tool_call_id"))
    if reply_id in replies:
        return None, model
    replies.add(reply_id)
    transcript.say("assistant", message.get("content"))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return f"the model's reply has tool_calls that are a {json_kind(calls)}, not a list", model
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            return "a tool call in the model's reply has no 'function' object", model
        if not isinstance(call.get("id"), str) or call["id"] not in answered:
            left_out["unanswered_calls"] += 1
            continue
        transcript.call(call["id"], str(function.get("name") or ""), function.get("arguments"))
    last = transcript.messages[-1]
    if not last["content"] and "tool_calls" not in last and isinstance(said, str):
        last["content"] = said
    return None, model


FORMAT = SourceFormat("openhands", "OpenHands events: a trajectory, an events/ folder or an evaluation output.jsonl",
                      _recognises, _read, _recognises_folder)
