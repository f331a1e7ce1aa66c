"""Hermes's own jev eval arm (``evals/compaction/jev_arm.py``) stepped over a recording, before each recorded reply.

The source is not a package: ``params["source"]`` names a folder holding
``evals/compaction/jev_arm.py`` as read from Hermes's repository (see
``hermeslab.reference.hermes_eval_arms``); the module is loaded from that file.
The decision model is the file's own offline asker (``fake_asker``), whose
answers sit under the plugin's threshold, as the published scorecard measured
Jev's. The messages arrive with ``key`` (the recording's index) and
``tokens`` (hermeslab's count) beside their role, content, tool calls and tool
result id. Before each recorded assistant reply, when the history's tokens
reach ``params["threshold"]``, the arm's ``JevCompactor.compress`` replaces it;
a ``ValueError`` (the history does not fit the plugin's request) leaves it as
it was and is recorded as a fallback.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

JEV_ARM = Path("evals") / "compaction" / "jev_arm.py"


def describe() -> dict:
    return {"agent": "hermes-eval-jev"}


_LOADED: dict[str, Any] = {}


def _load(source: str) -> Any:
    if source in _LOADED:
        return _LOADED[source]
    path = Path(source) / JEV_ARM
    spec = importlib.util.spec_from_file_location("hermes_eval_jev_arm", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no {JEV_ARM} under {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    _LOADED[source] = module
    return module


def _call_ids(message: dict) -> list[str]:
    return [str(call.get("id")) for call in message.get("tool_calls") or []]


def view_entry(message: dict, original_calls: dict[str, list[str]]) -> str:
    """The message's key, and after a colon the call ids it still makes when some of them were removed."""
    calls = _call_ids(message)
    if calls == original_calls[message["key"]]:
        return message["key"]
    return f"{message['key']}:{','.join(calls)}"


def replay(messages: list[dict], params: dict) -> list[dict]:
    arm = _load(params["source"])
    original_calls = {m["key"]: _call_ids(m) for m in messages}
    history: list[dict] = []
    steps: list[dict] = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            step: dict[str, Any] = {"at": index, "compacted": False}
            if sum(m["tokens"] for m in history) >= params["threshold"]:
                compactor = arm.JevCompactor(asker=arm.fake_asker(),
                                             options=arm.JevOptions(preserve_recent_messages=params["pinned"]))
                try:
                    out = compactor.compress(json.loads(json.dumps(history)), force=True)
                except ValueError as exc:
                    step["fallback"] = str(exc)
                else:
                    step["compacted"] = [m["key"] for m in out] != [m["key"] for m in history] or any(
                        _call_ids(m) != _call_ids(h) for m, h in zip(out, history))
                    history = out
            body = history[1:] if history and history[0].get("role") == "system" else history
            step["view"] = [view_entry(m, original_calls) for m in body]
            steps.append(step)
        history.append(message)
    return steps
