"""SWE-agent trajectories (``*.traj``): the chat ``history`` the model was sent, one conversation a file.

A ``.traj`` holds both ``trajectory`` (steps: action, observation, state) and
``history`` (the messages, with SWE-agent's own keys ``agent``,
``message_type``, ``thought``, ``action``); the history is what a replay
needs. Files written before SWE-agent 1.0 keep ``tool_calls`` and
``tool_call_ids`` as Python reprs of lists rather than JSON (see
tests/test_data/trajectories in SWE-agent at commit 3ea751c0); both are
read. Demonstrations (``is_demo``) were part of the prompt and are kept.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, json_kind

from .base import ImportOptions, Sample, Skip, SourceFormat, json_document
from .transcript import Transcript, finished


def _recognises(sample: Sample) -> bool:
    document = sample.document
    return (isinstance(document, dict) and isinstance(document.get("history"), list)
            and "trajectory" in document)


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    document = json_document(path)
    yield document if isinstance(document, Skip) else trajectory_recording(document, path)


def _listed(value: Any) -> list[Any]:
    """A list kept as JSON or as a Python repr (older SWE-agent), else empty."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return []
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> dict[str, Any]:
    """A dict kept as JSON text, a Python repr or itself, else empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return {}
    return value if isinstance(value, dict) else {}


def trajectory_recording(document: Any, path: Path) -> Recording | Skip:
    """The recording of one parsed ``.traj``, or why it cannot be one."""
    if not isinstance(document, dict) or not isinstance(document.get("history"), list):
        return Skip(str(path), f"a SWE-agent trajectory is an object with a 'history' list, got {json_kind(document)}")
    transcript = Transcript()
    for index, message in enumerate(document["history"]):
        if not isinstance(message, dict):
            return Skip(str(path), f"history entry {index} is a {json_kind(message)}, not an object")
        role = message.get("role")
        if role in ("system", "user", "assistant"):
            transcript.say(role, message.get("content"))
            for call in _listed(message.get("tool_calls")):
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    return Skip(str(path), f"history entry {index} has a tool call without a 'function' object")
                transcript.call(str(call.get("id") or ""), str(function.get("name") or ""),
                                function.get("arguments"))
        elif role == "tool":
            ids = _listed(message.get("tool_call_ids")) or [message.get("tool_call_id")]
            for call_id in ids:
                transcript.answer(str(call_id or ""), message.get("content"))
        else:
            return Skip(str(path), f"history entry {index} has an unknown role {role!r}")
    info = _mapping(document.get("info"))
    replay = _mapping(document.get("replay_config"))
    agent = _mapping(replay.get("agent"))
    model = _mapping(agent.get("model")).get("name") or replay.get("model_name")
    stats = _mapping(info.get("model_stats"))
    return finished(Recording(
        id=f"swe-agent/{path.stem}", messages=transcript.messages, model=model if isinstance(model, str) else None,
        source=f"SWE-agent {path}",
        meta={"importer": "swe-agent", "exit_status": info.get("exit_status"), "api_calls": stats.get("api_calls"),
              "instance_cost": stats.get("instance_cost"), "tokens_sent": stats.get("tokens_sent"),
              "tokens_received": stats.get("tokens_received"), "steps": len(_listed(document.get("trajectory")))}),
        str(path))


FORMAT = SourceFormat("swe-agent", "a SWE-agent trajectory (.traj)", _recognises, _read)
