"""A lab's conversations as Inspect AI evaluations, so ``inspect view`` lists them beside other evals.

A sample is one conversation, read back the way ``hermeslab export`` reads it
(``recordings.lab.import_lab``: the whole transcript across compressions,
from the root session to its newest continuation), with where it compressed
in the sample's metadata. Inspect holds one model per evaluation, so a lab
whose conversations ran on several models gives one log per model.

Token usage is every model call the conversation's sessions logged (turns,
summaries and any other purpose), summed per model and, as Inspect's
``role_usage``, per purpose, in the counts each server reported and billed.
Where a server reported none, the lab holds hermeslab's estimate; the sample
says how many of its calls were estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hermeslab.core.messages import text_of
from hermeslab.recordings import Recording
from hermeslab.recordings.lab import import_lab, lab_chain
from hermeslab.store import Lab
from hermeslab.store import open as open_lab

from .inspect_log import LogHead, Tokens, chat_messages, eval_log, eval_sample, require_inspect, usage_by_key

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

TASK = "hermeslab-lab"
#: What the usage figures are, said in every log.
USAGE_NOTE = ("token usage as each server reported it for every logged call (turns, summaries and others), summed "
              "per model; a sample's estimated_calls counts calls whose usage hermeslab estimated instead")


@dataclass(frozen=True)
class CallTotals:
    """The calls of one conversation to one model for one purpose, and their tokens."""

    model: str
    purpose: str
    calls: int
    estimated: int
    tokens: Tokens


@dataclass(frozen=True)
class Conversation:
    """One logged conversation: its transcript, when it ran, and its model calls."""

    recording: Recording
    started: datetime | None
    ended: datetime | None
    calls: tuple[CallTotals, ...]


# ---------------------------------------------------------------- reading the lab


def read_conversations(lab: Lab | str | Path, session_ids: Sequence[str] = ()) -> list[Conversation]:
    """The conversations of ``session_ids`` (any session of each), or every conversation with messages.

    Raises ValueError for an unknown session or a named one with no messages.
    """
    lab = lab if isinstance(lab, Lab) else open_lab(lab)
    sessions = {row["id"]: row for row in _records(lab.sql(
        "SELECT s.id, s.parent_session_id, s.reason, s.started_at, s.ended_at, "
        "EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id) AS has_messages "
        "FROM sessions s ORDER BY s.started_at, s.id"))}
    for sid in session_ids:
        if sid not in sessions:
            raise ValueError(f"no session {sid!r} in the lab {lab.path}")
    chains: dict[str, list[str]] = {}
    for sid in session_ids or sessions:
        chain = lab_chain(sessions, sid)
        if any(sessions[member]["has_messages"] for member in chain):
            chains.setdefault(chain[0], chain)
        elif session_ids:
            raise ValueError(f"session {sid!r} of the lab {lab.path} holds no messages")
    if not chains:
        raise ValueError(f"the lab {lab.path} holds no conversation with messages")
    calls = _records(lab.sql(
        "SELECT session_id, coalesce(model, '') AS model, coalesce(purpose, 'turn') AS purpose, count(*) AS calls, "
        "count(*) FILTER (WHERE usage_estimated) AS estimated, "
        "coalesce(sum(prompt_tokens), 0) AS prompt, coalesce(sum(completion_tokens), 0) AS completion, "
        "coalesce(sum(cache_read_tokens), 0) AS cache_read, coalesce(sum(cache_write_tokens), 0) AS cache_write, "
        "coalesce(sum(reasoning_tokens), 0) AS reasoning "
        "FROM api_calls WHERE list_contains($ids, session_id) GROUP BY ALL ORDER BY ALL",
        {"ids": [sid for chain in chains.values() for sid in chain]}))
    found = []
    for root, chain in chains.items():
        mine = [row for row in calls if row["session_id"] in chain]
        found.append(Conversation(
            recording=import_lab(lab, root), started=sessions[chain[0]]["started_at"],
            ended=sessions[chain[-1]]["ended_at"], calls=_merged(mine)))
    return found


def _merged(rows: list[dict[str, Any]]) -> tuple[CallTotals, ...]:
    """Per-session rows summed per (model, purpose) over the conversation's sessions."""
    merged: dict[tuple[str, str], CallTotals] = {}
    for row in rows:
        key = (row["model"], row["purpose"])
        part = CallTotals(row["model"], row["purpose"], int(row["calls"]), int(row["estimated"]),
                          Tokens(int(row["prompt"]), int(row["completion"]), int(row["cache_read"]),
                                 int(row["cache_write"]), int(row["reasoning"])))
        if key in merged:
            before = merged[key]
            part = CallTotals(part.model, part.purpose, before.calls + part.calls,
                              before.estimated + part.estimated, before.tokens + part.tokens)
        merged[key] = part
    return tuple(merged.values())


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, SQL NULL (and NaT) as None."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


# ---------------------------------------------------------------- the logs


def lab_logs(conversations: Sequence[Conversation], lab_name: str) -> list[EvalLog]:
    """One finished evaluation per model the conversations ran on."""
    require_inspect()
    by_model: dict[str, list[Conversation]] = {}
    for conversation in conversations:
        by_model.setdefault(conversation.recording.model or "unknown", []).append(conversation)
    logs = []
    for model, group in by_model.items():
        starts = [c.started for c in group if c.started is not None]
        head = LogHead(task=TASK, model=model, run_id=f"{lab_name}:{model}", created=min(starts, default=None)
                       or datetime(1970, 1, 1), dataset=lab_name, task_args={"lab": lab_name},
                       metadata={"usage": USAGE_NOTE})
        logs.append(eval_log(head, [conversation_sample(c) for c in group]))
    return logs


def conversation_sample(conversation: Conversation) -> EvalSample:
    """One conversation as a sample: its messages, the first user text as input, usage per model and purpose."""
    recording = conversation.recording
    model = recording.model or "unknown"
    messages = chat_messages(recording.messages, model)
    first_user = next((text_of(m) for m in recording.messages if m.get("role") == "user"), "")
    meta = recording.meta
    points = [{key: point.get(key) for key in ("at_message", "session_id", "mode", "new_session_id", "trigger",
                                                "tokens_before", "tokens_after")}
              for point in meta.get("compression_points", [])]
    calls = conversation.calls
    metadata = {"title": meta.get("title"), "lineage": meta.get("lineage"), "turns": meta.get("turns"),
                "compressions": meta.get("compressions"), "compression_points": points,
                "context_length": meta.get("context_length"), "config_hash": meta.get("config_hash"),
                "end_reason": meta.get("end_reason"), "calls": sum(c.calls for c in calls),
                "estimated_calls": sum(c.estimated for c in calls)}
    return eval_sample(
        recording.id, input=first_user, messages=messages, model=model, metadata=metadata,
        usage=usage_by_key((c.model or model, c.tokens) for c in calls),
        role_usage=usage_by_key((c.purpose, c.tokens) for c in calls),
        started=conversation.started, completed=conversation.ended)
