"""A chat history seen as OpenHands sees it: a list of events, and where that list may be cut.

OpenHands' condensers count and cut *events*, not messages. An assistant
message that calls N tools is N action events sharing one model response (its
text rides on the first as the "thought"); each tool result is one observation;
every other message (system prompt, user text, assistant text, a summary) is
one event. ``events_of`` builds that list with each event pointing back at its
message, so a decision about events maps back onto whole messages.

``manipulation_indices`` are the positions where the list may be cut without
splitting a model response (batch atomicity) or separating a call from its
result (tool-call matching); ``enforce`` drops what a view cannot show (an
action without its observation, a duplicate observation, the rest of a batch
one of whose actions went), as OpenHands does when it rebuilds a view. The
agents' thinking-block tool loops are not modelled: chat recordings carry no
provider thinking blocks, so that rule never removes an index here.

OpenHands 0.62 also keeps events it will not send: once a condensation forgets
one half of a call/result pair, the other half stays in its event log and in
its view, counting toward the next trigger and cut, and only its conversation
memory leaves it out of the prompt. hermeslab cannot send such an event, so a
message carries it in a private key (``HELD_BEFORE`` or ``HELD_AFTER``, never
sent) at its place; ``events_of`` reads it back there as a ``held`` event. The
other way round, once its view has no system prompt left OpenHands 0.62 puts
one first in the prompt without counting it: such a message is marked
``RESENT`` and is no event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Event kinds: the system prompt, user or agent text, a tool call, a tool result.
SYSTEM, USER, AGENT, ACTION, OBSERVATION = "system", "user", "agent", "action", "observation"
#: Private message keys listing held events (``{"kind", "call_id"}``) just before or after the message's own.
HELD_BEFORE, HELD_AFTER = "_openhands_held_before", "_openhands_held_after"
#: Private flag of a message sent but not in OpenHands' view (only its held events count).
RESENT = "_openhands_resent"


@dataclass(frozen=True)
class Event:
    """One OpenHands event made from (part of) message ``message``."""

    kind: str
    message: int
    #: The model response an action belongs to (its message index); None for other kinds.
    batch: int | None = None
    #: The tool call an action makes or an observation answers.
    call_id: str | None = None
    #: Kept in OpenHands' view but left out of the prompt; ``message`` is the message carrying it.
    held: bool = False


def events_of(messages: Sequence[dict[str, Any]]) -> list[Event]:
    """The events OpenHands would hold for ``messages``, in order."""
    events: list[Event] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"message {index} is a {type(message).__name__}, not a chat message object")
        events += _held_events(message, HELD_BEFORE, index)
        events += [] if message.get(RESENT) else _own_events(message, index)
        events += _held_events(message, HELD_AFTER, index)
    return events


def _own_events(message: dict[str, Any], index: int) -> list[Event]:
    role = message.get("role")
    calls = message.get("tool_calls") or []
    if role == "assistant" and calls:
        return [Event(ACTION, index, batch=index, call_id=_call_id(call, index)) for call in calls]
    if role == "tool":
        return [Event(OBSERVATION, index, call_id=str(message.get("tool_call_id") or ""))]
    if role in ("system", "developer"):
        return [Event(SYSTEM if index == 0 else USER, index)]
    if role == "assistant":
        return [Event(AGENT, index)]
    if role == "user":
        return [Event(USER, index)]
    raise ValueError(f"message {index} has role {role!r}; expected system, user, assistant or tool")


def _held_events(message: dict[str, Any], key: str, index: int) -> list[Event]:
    records = message.get(key) or []
    if not isinstance(records, list):
        raise TypeError(f"message {index}: {key} must be a list of held events")
    events = []
    for record in records:
        if not isinstance(record, dict) or record.get("kind") not in (ACTION, OBSERVATION) or not record.get("call_id"):
            raise ValueError(f"message {index}: {key} holds {record!r}; "
                             "expected {'kind': 'action' or 'observation', 'call_id': ...}")
        events.append(Event(record["kind"], index, call_id=str(record["call_id"]), held=True))
    return events


def held_record(event: Event) -> dict[str, str]:
    """What a message carries for held event ``event``."""
    return {"kind": event.kind, "call_id": str(event.call_id)}


def _call_id(call: Any, index: int) -> str:
    if not isinstance(call, dict) or not call.get("id"):
        raise ValueError(f"message {index} has a tool call without an id")
    return str(call["id"])


def event_count(messages: Sequence[dict[str, Any]]) -> int:
    """How many events ``messages`` are to OpenHands (what its ``max_size`` limits), held ones included."""
    return sum(_own_count(m) + len(m.get(HELD_BEFORE) or ()) + len(m.get(HELD_AFTER) or ()) for m in messages)


def _own_count(message: dict[str, Any]) -> int:
    if message.get(RESENT):
        return 0
    return len(message.get("tool_calls") or []) or 1 if message.get("role") == "assistant" else 1


def manipulation_indices(events: Sequence[Event]) -> list[int]:
    """Sorted positions in ``0..len(events)`` where events may be inserted or a range removed."""
    allowed = set(range(len(events) + 1))
    pending: set[str] = set()
    for index, event in enumerate(events):
        nxt = events[index + 1] if index + 1 < len(events) else None
        if event.kind == ACTION and nxt is not None and nxt.kind == ACTION and nxt.batch == event.batch:
            allowed.discard(index + 1)  # inside one model response
        if event.kind == ACTION:
            pending.add(event.call_id)
        elif event.kind == OBSERVATION:
            pending.discard(event.call_id)
        if pending:
            allowed.discard(index + 1)  # between a call and its result
    return sorted(allowed)


def next_index(indices: Sequence[int], threshold: int) -> int:
    """The smallest manipulation index at or after ``threshold``; ValueError when there is none."""
    for value in indices:
        if value >= threshold:
            return value
    raise ValueError(f"no manipulation index at or after {threshold}")


def enforce(view: list[Event], history: Sequence[Event]) -> list[Event]:
    """``view`` without what OpenHands' view properties forbid, applied until nothing changes.

    ``history`` is every event the conversation produced (a batch is whole when
    all of its actions there are in the view).
    """
    batches: dict[int, set[str]] = {}
    for event in history:
        if event.kind == ACTION:
            batches.setdefault(event.batch, set()).add(event.call_id)
    while True:
        drop = _first_violation(view, batches)
        if not drop:
            return view
        view = [event for position, event in enumerate(view) if position not in drop]


def _first_violation(view: Sequence[Event], batches: dict[int, set[str]]) -> set[int]:
    """Positions the first violated property removes (uniqueness, batch atomicity, then matching)."""
    seen: set[str] = set()
    duplicates = set()
    for position, event in enumerate(view):
        if event.kind == OBSERVATION:
            if event.call_id in seen:
                duplicates.add(position)
            seen.add(event.call_id)
    if duplicates:
        return duplicates
    present: dict[int, set[str]] = {}
    for event in view:
        if event.kind == ACTION:
            present.setdefault(event.batch, set()).add(event.call_id)
    partial = {batch for batch, calls in present.items() if calls != batches.get(batch)}
    if partial:
        return {p for p, e in enumerate(view) if e.kind == ACTION and e.batch in partial}
    actions = {e.call_id for e in view if e.kind == ACTION}
    observations = {e.call_id for e in view if e.kind == OBSERVATION}
    return {p for p, e in enumerate(view)
            if (e.kind == ACTION and e.call_id not in observations)
            or (e.kind == OBSERVATION and e.call_id not in actions)}
