"""What two runs of one session are compared on, message by message: one digest per message, and a short view.

A message's digest covers its role, its content, its tool-call id and each
tool call's id, ``call_id``, name and arguments: everything a provider is
sent. In-process keys (a leading underscore) and the order of keys do not
count. Both the reference worker (inside the Hermes virtualenv) and
hermeslab's side of ``benchmarks/session_parity.py`` import this module, so
it imports only the standard library.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Characters of a message's content a view shows.
VIEW_CHARS = 160


def _calls(message: dict) -> list[dict]:
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        calls.append({"id": call.get("id") if isinstance(call, dict) else None,
                      "call_id": call.get("call_id") if isinstance(call, dict) else None,
                      "name": function.get("name"), "arguments": function.get("arguments")})
    return calls


def sent_form(message: dict) -> dict[str, Any]:
    """The parts of a message a provider is sent, in a fixed shape."""
    return {"role": message.get("role"), "content": message.get("content"),
            "tool_call_id": message.get("tool_call_id"), "tool_calls": _calls(message)}


def digest(message: dict) -> str:
    """A short hash of ``sent_form(message)``."""
    text = json.dumps(sent_form(message), sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha1(text.encode("ascii")).hexdigest()[:16]


def view(message: dict) -> dict[str, Any]:
    """A message shortened for a report: role, the start of its content, its ids."""
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
    form = sent_form(message)
    shown = {"role": form["role"], "content": (text or "")[:VIEW_CHARS], "chars": len(text or "")}
    if form["tool_call_id"]:
        shown["tool_call_id"] = form["tool_call_id"]
    if form["tool_calls"]:
        shown["tool_calls"] = [{"id": c["id"], "name": c["name"], "arguments": str(c["arguments"])[:VIEW_CHARS]}
                               for c in form["tool_calls"]]
    return shown


def compared(messages: list[dict]) -> dict[str, Any]:
    """What a compression's output is compared on: every message's digest, and a view of each."""
    return {"digests": [digest(m) for m in messages], "views": [view(m) for m in messages]}
