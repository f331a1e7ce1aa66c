"""mini-swe-agent trajectories (``*.traj.json``): one conversation a file.

Three shapes are in use (mini-swe-agent's docs/usage/output_files.md and
agents/default.py ``serialize``, commit a83fcae8): before v1 a bare list of
chat messages; from v1 an object with ``info`` and ``messages``; from v2
(``"trajectory_format": "mini-swe-agent-1.1"``) the same object whose
messages may be tool-calling chat messages or OpenAI Responses API items, and
end with a ``role: "exit"`` record. The exit record and each message's
``extra`` (costs, raw outputs) are bookkeeping, not turns: the exit status
and cost go to ``meta``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, json_kind

from .base import ImportOptions, Sample, Skip, SourceFormat, json_document
from .transcript import Transcript, finished

FORMAT_TAG = "mini-swe-agent"
SUFFIX = ".traj.json"


def _recognises(sample: Sample) -> bool:
    document = sample.document
    if isinstance(document, dict):
        info = document.get("info")
        return isinstance(document.get("messages"), list) and (
            str(document.get("trajectory_format", "")).startswith(FORMAT_TAG)
            or (isinstance(info, dict) and "mini_version" in info))
    return (isinstance(document, list) and sample.path.name.endswith(SUFFIX)
            and all(isinstance(m, dict) and "role" in m for m in document))


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    document = json_document(path)
    yield document if isinstance(document, Skip) else trajectory_recording(document, path)


def trajectory_recording(document: Any, path: Path) -> Recording | Skip:
    """The recording of one parsed trajectory, or why it cannot be one."""
    if isinstance(document, list):
        document = {"messages": document}
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        return Skip(str(path), f"a mini-swe-agent trajectory is an object with a 'messages' list, "
                               f"got {json_kind(document)}")
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    transcript = Transcript()
    exit_status = info.get("exit_status")
    for index, message in enumerate(document["messages"]):
        if not isinstance(message, dict):
            return Skip(str(path), f"message {index} is a {json_kind(message)}, not an object")
        role = message.get("role")
        if role == "exit":
            extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
            exit_status = extra.get("exit_status") or message.get("content") or exit_status
        elif "type" in message and role in (None, "user", "assistant", "system", "developer"):
            if not transcript.response_item(message):
                return Skip(str(path), f"message {index} is a Responses API item of unknown type "
                                       f"{message.get('type')!r}")
        elif role in ("system", "user", "assistant"):
            transcript.say(role, message.get("content"))
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                return Skip(str(path), f"message {index} has tool_calls that are a {json_kind(calls)}, not a list")
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    return Skip(str(path), f"message {index} has a tool call without a 'function' object")
                transcript.call(str(call.get("id") or ""), str(function.get("name") or ""),
                                function.get("arguments"))
        elif role == "tool":
            transcript.answer(str(message.get("tool_call_id") or ""), message.get("content"))
        else:
            return Skip(str(path), f"message {index} has an unknown role {role!r}")
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model = (config.get("model") or {}).get("model_name") if isinstance(config.get("model"), dict) else None
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    name = path.name.removesuffix(SUFFIX) if path.name.endswith(SUFFIX) else path.stem
    return finished(Recording(
        id=f"mini-swe-agent/{name}", messages=transcript.messages, model=model if isinstance(model, str) else None,
        source=f"mini-swe-agent {path}",
        meta={"importer": "mini-swe-agent", "exit_status": exit_status, "mini_version": info.get("mini_version"),
              "trajectory_format": document.get("trajectory_format"), "api_calls": stats.get("api_calls"),
              "instance_cost": stats.get("instance_cost")}), str(path))


FORMAT = SourceFormat("mini-swe-agent", "a mini-swe-agent trajectory (.traj.json)", _recognises, _read)
