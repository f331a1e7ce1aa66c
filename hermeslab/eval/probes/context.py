"""The three contexts a probe is asked in, taken from what a replay actually sent.

A replay keeps, for every compression, the context before and after it, and
for every answered call the exact message list it was sent. A compression
that changed the context is *effective* for the model only through the next
call it was followed by, so that call is where its contexts are read from;
several compressions before one call (an overflow retried, a preflight then a
pressure pass) are one effective compaction, the first one's input against
what the call finally carried. A compression after which no call was answered
(the replay ended, or every retry was refused) changed nothing a model read,
and yields none.

The arms:

* ``compacted`` — exactly the messages of that next call;
* ``ceiling`` — the uncompacted history up to that same call: every message
  the conversation produced, in order, none of those a compactor wrote
  (summaries, stubs, cut copies, an annotated system prompt);
* ``floor`` — the original system prompt alone.

Messages are told apart by identity: the replay hands the very same message
objects from the loop's history to every call and compression, and a
compactor's output holds new objects only for what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..metrics import message_text
from ..replay import ReplayRun

ARMS = ("compacted", "ceiling", "floor")


@dataclass(frozen=True)
class EffectiveCompaction:
    """One effective compaction of a replay and the contexts it is examined in."""

    #: 0-based position among the replay's effective compactions.
    index: int
    #: The next answered call (``run.calls[call]``).
    call: int
    #: Positions in ``run.compressions`` of the compressions it joins.
    records: tuple[int, ...]
    #: The context before the first of them (``source_message`` indexes into it).
    before: list[dict[str, Any]]
    #: Exactly what the next call was sent.
    compacted: list[dict[str, Any]]
    #: The uncompacted history up to that call.
    uncompacted: list[dict[str, Any]]
    #: Positions in ``before`` of the messages it removed: recorded ones, not system, absent from ``compacted``.
    removed: tuple[int, ...]
    #: Prompt tokens of the next call as billed (``token_unit`` of the run).
    retained_tokens: int
    #: Tokens of the removed messages in the same unit.
    removed_tokens: int
    #: Prompt tokens the uncompacted history would have been billed (tool schemas and priming included).
    ceiling_tokens: int

    def arm(self, name: str) -> list[dict[str, Any]]:
        """The messages of arm ``name`` (one of ``ARMS``)."""
        if name == "compacted":
            return self.compacted
        if name == "ceiling":
            return self.uncompacted
        if name == "floor":
            return floor_messages(self.uncompacted)
        raise ValueError(f"unknown arm {name!r} (expected one of {', '.join(ARMS)})")

    def removed_messages(self) -> list[dict[str, Any]]:
        return [self.before[i] for i in self.removed]


def floor_messages(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The original system prompt alone (nothing when the conversation has none)."""
    return [history[0]] if history and history[0].get("role") == "system" else []


def effective_compactions(run: ReplayRun) -> list[EffectiveCompaction]:
    """The effective compactions of ``run`` in order (see the module docstring)."""
    if not isinstance(run, ReplayRun):
        raise TypeError(f"effective_compactions() needs a ReplayRun, got {type(run).__name__}")
    written: set[int] = set()  # ids of messages some compactor wrote
    by_call: dict[int, list[int]] = {}
    for position, record in enumerate(run.compressions):
        inputs = {id(m) for m in record.before}
        written.update(id(m) for m in record.after if id(m) not in inputs)
        by_call.setdefault(record.call, []).append(position)
    history: list[dict[str, Any]] = []
    seen: set[int] = set()
    counted: list[int] = [0]  # running token sums over ``history``
    counter = run.counter

    def extend(messages: Sequence[dict[str, Any]]) -> None:
        for message in messages:
            key = id(message)
            if key in seen or key in written:
                continue
            seen.add(key)
            history.append(message)
            counted.append(counted[-1] + counter.count_message(message))

    found: list[EffectiveCompaction] = []
    extras = _request_extras(run)
    for number, call in enumerate(run.calls):
        records = by_call.get(number, ())
        for position in records:
            extend(run.compressions[position].before)
        extend(call.messages)
        changed = tuple(p for p in records if run.compressions[p].changed)
        if not changed:
            continue
        before = run.compressions[changed[0]].before
        kept_ids = {id(m) for m in call.messages}
        kept_texts = {message_text(m) for m in call.messages}
        removed = tuple(i for i, m in enumerate(before)
                        if id(m) not in kept_ids and id(m) in seen and m.get("role") != "system"
                        and message_text(m) not in kept_texts)
        found.append(EffectiveCompaction(
            index=len(found), call=number, records=changed, before=before, compacted=call.messages,
            uncompacted=list(history), removed=removed, retained_tokens=call.prompt_tokens,
            removed_tokens=sum(counter.count_message(before[i]) for i in removed),
            ceiling_tokens=counted[-1] + extras))
    return found


def _request_extras(run: ReplayRun) -> int:
    """What a request is billed beyond its messages' own counts: tool schemas and reply priming."""
    if not run.calls:
        return run.tool_tokens
    first = run.calls[0]
    return max(0, first.prompt_tokens - sum(run.counter.count_message(m) for m in first.messages))
