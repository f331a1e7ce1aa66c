"""OpenHands' condensers as hermeslab strategies: which events each one forgets, masks or summarises.

Three rules, each read from OpenHands' own code (the preset module cites file
and line for every number):

* ``summarizing`` — openhands-sdk's ``LLMSummarizingCondenser``: once the view
  holds more than ``max_size`` events, forget everything between the first
  ``keep_first`` events (never the system prompt) and the newest
  ``max_size // 2 - keep_first - 1``, both ends moved forward to the next
  position that splits no model response and no call from its result, and put
  one summary (a user message) where the forgotten range began. A range under
  ``minimum_progress`` of the view, or empty, is no condensation.
* ``amortized`` — OpenHands 0.62's ``AmortizedForgettingCondenser``: the same
  trigger, forgetting all but the first ``keep_first`` and the newest
  ``max_size // 2 - keep_first`` events, with no summary and no regard for
  pairs. Its view is every event not forgotten, checked for nothing, so a call
  or result whose partner went stays in it and is counted; only the prompt
  leaves it out. hermeslab holds such an event (``openhands_view.HELD_BEFORE``)
  instead of sending it, and trims a reply to the calls it still has.
* ``masking`` — OpenHands 0.62's ``ObservationMaskingCondenser``: every tool
  result older than the newest ``attention_window`` events reads ``<MASKED>``.

Decisions are positions in the view (``openhands_view.events_of``); the
strategies apply them to whole messages and return a ``BaselineResult``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hermeslab.core.messages import validate_messages

from .assemble import sanitize_tool_pairs
from .baselines import BaselineResult
from .openhands_view import (
    ACTION,
    HELD_AFTER,
    HELD_BEFORE,
    OBSERVATION,
    RESENT,
    SYSTEM,
    Event,
    enforce,
    events_of,
    held_record,
    manipulation_indices,
    next_index,
)

#: What a masked tool result reads (OpenHands puts ``AgentCondensationObservation('<MASKED>')`` in its place).
MASK = "<MASKED>"


@dataclass(frozen=True)
class Forgetting:
    """Forget view events ``[start, end)``; a summary, if any, goes in at ``start``."""

    start: int
    end: int


def summarizing_forgetting(view: Sequence[Event], *, max_size: int, keep_first: int,
                           minimum_progress: float, requested: bool = False) -> Forgetting | None:
    """The LLM summarizing condenser's range, or None when it does not (or cannot) condense.

    ``requested`` stands for an explicit condensation request (``/compress``),
    which keeps half the view instead of half of ``max_size``.
    """
    tails = []
    if requested:
        tails.append(len(view) // 2 - keep_first - 1)
    if len(view) > max_size:
        tails.append(max_size // 2 - keep_first - 1)
    if not tails:
        return None
    naive_end = len(view) - min(tails)
    protected = keep_first
    system = next((i for i, event in enumerate(view) if event.kind == SYSTEM), None)
    if system is not None:
        protected = max(protected, system + 1)
    indices = manipulation_indices(view)
    try:
        start = next_index(indices, protected)
        end = next_index(indices, naive_end)
    except ValueError:
        return None
    forgotten = max(0, end - start)
    if forgotten == 0 or forgotten < len(view) * minimum_progress:
        return None
    return Forgetting(start, end)


def amortized_forgetting(view: Sequence[Event], *, max_size: int, keep_first: int,
                         requested: bool = False) -> Forgetting | None:
    """The amortized forgetting condenser's range, or None below its trigger."""
    if not (len(view) > max_size or requested):
        return None
    head = min(keep_first, len(view))
    from_tail = max_size // 2 - head
    end = max(head, len(view) - from_tail)
    return Forgetting(head, end) if end > head else None


def masked_positions(view: Sequence[Event], *, attention_window: int) -> list[int]:
    """View positions of the observations the masking condenser hides."""
    return [i for i, event in enumerate(view) if event.kind == OBSERVATION and i < len(view) - attention_window]


def view_of(messages: Sequence[dict]) -> list[Event]:
    """The events OpenHands' view shows for ``messages``: all of them, less what its properties forbid."""
    events = events_of(messages)
    return enforce(list(events), events)


# ------------------------------------------------------------------ strategies on messages


def forget_holding(messages: list[dict], events: Sequence[Event], forgetting: Forgetting) -> list[dict]:
    """``messages`` once OpenHands 0.62 forgot ``events[start:end]`` from its log (``events`` as ``events_of``).

    Nothing else leaves the log: a kept call or result whose partner was just
    forgotten becomes held, still counted but never sent, as do the events
    held before. A reply keeps the calls it still sends (and its text); a
    message with nothing left to send goes, its held events moving to a
    neighbour. A system prompt no longer in the view is sent first all the
    same, uncounted (``RESENT``). With no message left to carry them (no
    system prompt and nothing sendable), held events are lost.
    """
    gone = {e.call_id for e in events[forgetting.start:forgetting.end] if e.kind in (ACTION, OBSERVATION)}
    sent_calls: dict[int, set[str]] = {}
    out_of: dict[int, int] = {}  # message index → its place in ``out``
    out: list[dict] = []
    gaps: list[list[dict]] = [[]]  # gaps[k]: the held events just before out[k]; the last, after out[-1]
    for event in [*events[:forgetting.start], *events[forgetting.end:]]:
        if event.held or (event.kind in (ACTION, OBSERVATION) and event.call_id in gone):
            gaps[-1].append(held_record(event))
            continue
        if event.kind == ACTION:
            sent_calls.setdefault(event.message, set()).add(event.call_id)
        if event.message not in out_of:
            out_of[event.message] = len(out)
            out.append(messages[event.message])
            gaps.append([])
    out = [_sendable(message, sent_calls.get(index)) for index, message in zip(out_of, out)]
    if messages and messages[0].get("role") in ("system", "developer") and 0 not in out_of:
        # openhands/memory/conversation_memory.py lines 805-826: a prompt starts with the system prompt.
        out, gaps = [{**_sendable(messages[0], None), RESENT: True}, *out], [[], *gaps]
    return _place_held(out, gaps)


def _sendable(message: dict, calls: set[str] | None) -> dict:
    """``message`` without the events it held, its tool calls cut to ``calls`` (when it makes any)."""
    trimmed = calls is not None and len(calls) != len(message["tool_calls"])
    if not trimmed and HELD_BEFORE not in message and HELD_AFTER not in message:
        return message
    out = {key: value for key, value in message.items() if key not in (HELD_BEFORE, HELD_AFTER)}
    if trimmed:
        out["tool_calls"] = [call for call in message["tool_calls"] if call["id"] in calls]
    return out


def _place_held(out: list[dict], gaps: list[list[dict]]) -> list[dict]:
    """Each gap's held events onto the message after it or, when that is a user message or there is
    none, onto the one before it (a user message with private keys is not joined on the wire with
    the user message before it, so it is the last choice)."""
    for k, records in enumerate(gaps):
        if not records:
            continue
        if k > 0 and (k == len(out) or out[k].get("role") == "user"):
            out[k - 1] = {**out[k - 1], HELD_AFTER: records}
        elif k < len(out):
            out[k] = {**out[k], HELD_BEFORE: records}
    return out


def forget_messages(messages: list[dict], view: Sequence[Event], forgetting: Forgetting,
                    summary: str) -> tuple[list[dict], list[int]]:
    """``messages`` without the forgotten events' messages (and those the view already left out),
    the summary as a user message at the range's start; with the forgotten message indices."""
    forgotten = sorted({event.message for event in view[forgetting.start:forgetting.end]})
    gone = set(forgotten)
    keep = [index for index in dict.fromkeys(event.message for event in view) if index not in gone]
    anchor = view[forgetting.start].message
    out = [messages[i] for i in keep if i < anchor]
    out.append({"role": "user", "content": summary, "_compressed_summary": True})
    out += [messages[i] for i in keep if i > anchor]
    return out, forgotten


def openhands_strategy(messages: list[dict], *, rule: str, max_size: int, keep_first: int,
                       attention_window: int, minimum_progress: float, requested: bool,
                       summarise: Callable[[list[dict]], str], estimate: Callable[[dict], int],
                       min_saving: float) -> BaselineResult:
    """Apply OpenHands rule ``rule`` (``summarizing``, ``amortized`` or ``masking``) to ``messages``."""
    validate_messages(messages)
    # OpenHands 0.62 makes its view from the log and checks nothing (openhands/memory/view.py lines 48-93);
    # the SDK's view also drops what its properties forbid.
    view = events_of(messages) if rule == "amortized" else view_of(messages)
    before = sum(map(estimate, messages))
    record: dict = {"strategy": f"openhands_{rule}", "events": len(view)}
    if rule == "masking":
        positions = masked_positions(view, attention_window=attention_window)
        targets = {view[p].message for p in positions}
        out = [{**m, "content": MASK} if i in targets and m.get("content") != MASK else m
               for i, m in enumerate(messages)]
        changed = sum(1 for i in targets if messages[i].get("content") != MASK)
        record["masked_indices"] = sorted(targets)
    elif rule == "amortized":
        forgetting = amortized_forgetting(view, max_size=max_size, keep_first=keep_first, requested=requested)
        out = list(messages) if forgetting is None else forget_holding(messages, view, forgetting)
        if forgetting is not None:
            record.update(forget_start=forgetting.start, forget_end=forgetting.end)
        verbatim = {id(message) for message in out}
        rewritten = [index for index, message in enumerate(messages) if id(message) not in verbatim]
        changed = len(rewritten)
        record["rewritten_indices"] = rewritten
    elif rule == "summarizing":
        forgetting = summarizing_forgetting(view, max_size=max_size, keep_first=keep_first,
                                            minimum_progress=minimum_progress, requested=requested)
        if forgetting is None:
            out, forgotten = list(messages), []
        else:
            span = sorted({e.message for e in view[forgetting.start:forgetting.end]})
            out, forgotten = forget_messages(messages, view, forgetting, summarise([messages[i] for i in span]))
            out, record["tool_pairs"] = sanitize_tool_pairs(out, missing="drop")
            record.update(forget_start=forgetting.start, forget_end=forgetting.end)
        changed = len(forgotten)
        record["forgotten_indices"] = forgotten
    else:
        raise ValueError(f"unknown OpenHands rule {rule!r}; expected summarizing, amortized or masking")
    after = sum(map(estimate, out))
    record.update(tokens_before=before, tokens_after=after)
    saved = before - after
    return BaselineResult(out, before, after, changed, changed > 0 and saved > 0 and saved >= min_saving * before,
                          record)
