"""Where a compaction timeline comes from: a lab file, or a replay's own record of its compactions.

The lab holds each compaction's row (its summary and, by message id, the fate
of every message it saw) and the messages themselves; the context after a
rotation is the child session's opening, after an in-place compaction the
rows logged from ``archived_before_seq`` on. A replay run (``eval.replay``)
keeps every attempt's messages before and after and the strategy's result,
which is all a timeline needs; it is read by its attributes, so this package
does not import the evaluation one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd

from ..context.fates import fates_of_result
from ..core.tokens import default_counter
from ..store import Lab
from .timeline_data import CompactionView, Timeline, compaction_view

_MESSAGE_COLUMNS = "id, session_id, seq, role, content, tool_calls, tool_call_id, tokens"


def lab_timeline(lab: Lab, session_id: str) -> Timeline:
    """The compactions of the conversation ending at ``session_id``; ValueError for a session the lab lacks."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session must be a non-empty session id, got {session_id!r}")
    lineage = lab.lineage(session_id)
    if not lineage:
        raise ValueError(f"no session {session_id!r} in {lab.path}")
    rows = lab.sql("SELECT * FROM compressions WHERE list_contains(?, session_id) ORDER BY created_at", [lineage])
    views: list[CompactionView] = []
    for row in rows.itertuples(index=False):
        if _text(row.mode) in (None, "none"):
            continue
        fates = json.loads(row.message_fates) if _text(row.message_fates) else None
        before = _messages(lab, "list_contains(?, id)", [list(fates)]) if fates else []
        if fates and len(before) != len(fates):  # rows missing from the log: the view would misplace fates
            fates, before = None, []
        views.append(compaction_view(
            len(views) + 1, session_id=row.session_id, turn=_int(row.turn), trigger=str(row.trigger),
            strategy=str(row.strategy), mode=str(row.mode), tokens_before=_int(row.tokens_before) or 0,
            tokens_after=_int(row.tokens_after) or 0, before=[_sized(m) for m in _in_order(before, fates)],
            fates=list(fates.values()) if fates else None, after=[_sized(m) for m in _after(lab, row)],
            summary_text=_text(row.summary_text)))
    not_applied = sum(1 for mode in rows["mode"] if _text(mode) in (None, "none"))
    return Timeline(session_id=session_id, sessions=tuple(lineage), compactions=tuple(views),
                    not_applied=not_applied)


def replay_timeline(run: Any, count: Callable[[dict[str, Any]], int] | None = None) -> Timeline:
    """The compactions of a replay run (``eval.replay.ReplayRun``), counted in the run's own token unit."""
    records = getattr(run, "compressions", None)
    if not isinstance(records, list):
        raise TypeError(f"expected a lab or a replay run with a list of compressions, got {type(run).__name__}")
    counter = getattr(run, "counter", None) or default_counter
    count = count or counter.count_message
    name = str(getattr(run, "recording_id", "replay"))
    views: list[CompactionView] = []
    for record in records:
        if not record.changed:
            continue
        result = record.result
        views.append(compaction_view(
            len(views) + 1, session_id=name, turn=None, trigger=record.trigger, strategy=record.strategy,
            mode="replay", tokens_before=int(getattr(result, "tokens_before", 0)),
            tokens_after=int(getattr(result, "tokens_after", 0)),
            before=[(m, count(m)) for m in record.before], fates=fates_of_result(record.before, record.after, result),
            after=[(m, count(m)) for m in record.after], summary_text=getattr(result, "summary_text", None)))
    return Timeline(session_id=name, sessions=(name,), compactions=tuple(views),
                    not_applied=len(records) - len(views))


def _messages(lab: Lab, where: str, params: list[Any], limit: int | None = None) -> list[dict[str, Any]]:
    tail = f" LIMIT {int(limit)}" if limit is not None else ""
    frame = lab.sql(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY seq{tail}", params)
    return frame.to_dict("records")


def _after(lab: Lab, row: Any) -> list[dict[str, Any]]:
    """The context the compaction left, as logged: the child session's opening, or the rewritten history."""
    count = _int(row.messages_after) or 0
    if row.mode == "rotation" and _text(row.new_session_id):
        return _messages(lab, "session_id = ?", [row.new_session_id], count)
    if row.mode == "in_place" and _int(row.archived_before_seq) is not None:
        return _messages(lab, "session_id = ? AND seq >= ?", [row.session_id, _int(row.archived_before_seq)], count)
    return []


def _in_order(rows: list[dict[str, Any]], fates: dict[str, str] | None) -> list[dict[str, Any]]:
    by_id = {row["id"]: row for row in rows}
    return [by_id[key] for key in fates or ()]


def _sized(row: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A messages row as a chat message (list content and tool calls were stored as JSON), with its tokens."""
    message: dict[str, Any] = {"role": _text(row["role"]) or ""}
    content = _text(row["content"]) or ""
    if content.startswith("[") and content.endswith("]"):
        try:
            parsed = json.loads(content)
            content = parsed if isinstance(parsed, list) and all(isinstance(p, dict) for p in parsed) else content
        except json.JSONDecodeError:
            pass
    message["content"] = content
    if _text(row["tool_calls"]):
        message["tool_calls"] = json.loads(row["tool_calls"])
    if _text(row["tool_call_id"]):
        message["tool_call_id"] = row["tool_call_id"]
    return message, _int(row["tokens"]) or 0


def _text(value: Any) -> str | None:
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)
