"""Hermes's request normalisation: text contents stripped, tool-call arguments as compact JSON with sorted keys.

Hermes 0.19.0 applies this to the copy of the conversation it is about to
send, before its pressure estimate and the call (never to the transcript it
keeps), so that a provider's prompt cache sees the same bytes for the same
prefix on every turn. Under the ``hermes-0.19`` preset
(``compression.normalise_requests``) hermeslab does the same at the same two
points; the seed sends the transcript as it is.

A message that needs no change is returned as it is, and a changed one is
remembered by identity, so the estimators' per-message caches keep working on
a history that is normalised before every call.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from hermeslab.core.cache import bounded_put

Message = dict[str, Any]
#: Normalised copies, by the identity of the message they come from (which they keep alive).
_copies: dict[int, tuple[Message, Message]] = {}
_COPIES_MAX = 50_000


def _compact(arguments: Any) -> Any:
    """Arguments re-serialised as Hermes sends them; anything that is not JSON text stays as it is."""
    if not isinstance(arguments, str):
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _normalised_calls(calls: Any) -> list | None:
    """The calls with their arguments compacted, or None when none changes."""
    if not isinstance(calls, list) or not calls:
        return None
    out, changed = [], False
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and "arguments" in function:
            compact = _compact(function["arguments"])
            if compact != function["arguments"]:
                call, changed = {**call, "function": {**function, "arguments": compact}}, True
        out.append(call)
    return out if changed else None


def normalised_message(message: Message) -> Message:
    """``message`` as Hermes sends it; the same object when nothing changes."""
    entry = _copies.get(id(message))
    if entry is not None and entry[0] is message:
        return entry[1]
    content = message.get("content")
    stripped = content.strip() if isinstance(content, str) else content
    calls = _normalised_calls(message.get("tool_calls"))
    if stripped == content and calls is None:
        return message
    copy = dict(message)
    copy["content"] = stripped
    if calls is not None:
        copy["tool_calls"] = calls
    bounded_put(_copies, id(message), (message, copy), _COPIES_MAX)
    return copy


def normalised_request(messages: Sequence[Message]) -> list[Message]:
    """The messages of a request as Hermes sends them (the input is not modified)."""
    return [normalised_message(message) for message in messages]
