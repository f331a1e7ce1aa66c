"""A recording built from hermeslab's own lab: the lab → recorded-session export.

``hermeslab export``, the notebook's ``%hermes export`` and the A/B tooling all
read a conversation back this way, so it sits below the notebook and eval.

**What a recording holds.** A compressed conversation is exported as its full
original transcript — every message the user, the model and the tools
produced, in order, with the handoff summaries and the rewritten copies that
compression inserted left out. That is what a replay needs: an A/B comparison
re-runs compression on the whole conversation under other settings. Where the
compressions happened is kept in ``meta["compression_points"]``.

The lab's compression records say exactly which rows a compression wrote (the
first ``messages_after`` rows of a rotated child; the rows from
``archived_before_seq`` on for an in-place compression). Each point also keeps
that rewritten ``context``, so the model's view at any step is the ``context``
of the latest point before it followed by the transcript from its
``at_message`` on. Lineages are walked with a set of visited sessions, so a
cycle in the ``parent_session_id`` links ends the walk instead of looping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from hermeslab.core.config import Config
from hermeslab.core.messages import Message
from hermeslab.store import Lab
from hermeslab.store import open as open_lab
from hermeslab.tools import builtin_registry

from .format import Recording, recorded_call, recorded_text


def import_lab(lab: Lab | str | Path, session_id: str, *, tools: list[dict[str, Any]] | None = None) -> Recording:
    """The logical conversation ``session_id`` belongs to, from its root session to its newest continuation.

    Only compression rotations are followed (a branch is a conversation of its
    own). The lab keeps no tool schemas; pass the ones that were offered as
    ``tools``. The recording's id is the root session's id.
    """
    lab = lab if isinstance(lab, Lab) else open_lab(lab)
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    sessions = {row["id"]: row for row in _records(lab.sql(
        "SELECT id, parent_session_id, reason, model, title, started_at, end_reason, context_length, config_hash "
        "FROM sessions"))}
    if session_id not in sessions:
        raise ValueError(f"no session {session_id!r} in the lab {lab.path}")
    chain = lab_chain(sessions, session_id)
    rows = _records(lab.sql(
        "SELECT session_id, seq, turn, role, content, tool_calls, tool_call_id FROM messages "
        "WHERE list_contains($ids, session_id) ORDER BY seq", {"ids": chain}))
    compressions = _records(lab.sql(
        "SELECT session_id, trigger, mode, new_session_id, archived_before_seq, messages_after, "
        "tokens_before, tokens_after FROM compressions "
        "WHERE list_contains($ids, session_id) AND coalesce(mode, '') <> 'none' ORDER BY created_at",
        {"ids": chain}))
    transcript, points = lab_transcript(chain, rows, compressions)
    root, tip = sessions[chain[0]], sessions[chain[-1]]
    turns = [row["turn"] for row in rows if row["turn"] is not None]
    return Recording(
        id=root["id"], messages=transcript, tools=tools or None, model=tip["model"],
        source=f"hermeslab lab {lab.path.name}: session {root['id']}",
        meta={"importer": "hermeslab-lab", "title": root["title"], "lineage": chain,
              "compressions": len(points), "compression_points": points, "turns": max(turns, default=0),
              "context_length": tip["context_length"], "config_hash": tip["config_hash"],
              "end_reason": tip["end_reason"]})


def builtin_tool_schemas(config: Config, messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The built-in tool schemas a logged session was offered, as near as the log can tell.

    The lab keeps no schemas: this is every built-in tool ``config`` enables,
    plus any other built-in tool the session called (the terminal, when it was
    enabled for that run only).
    """
    called = {call["function"]["name"] for message in messages for call in message.get("tool_calls", [])}
    here = config.with_overrides({"tools.workspace": "."})  # schemas do not depend on the folder
    offered = {schema["function"]["name"] for schema in builtin_registry(here.tools).schemas()}
    every = builtin_registry(here.with_overrides({"tools.terminal.enabled": True}).tools)
    return [schema for schema in every.schemas() if schema["function"]["name"] in offered | called]


def lab_chain(sessions: dict[str, dict[str, Any]], session_id: str) -> list[str]:
    """Session ids of one logical conversation, root first: compression parents back, continuations forward."""
    def parent(sid: str) -> str | None:
        row = sessions[sid]
        linked = row["parent_session_id"]
        return linked if row["reason"] == "compression" and linked in sessions else None

    def rank(sid: str) -> tuple[Any, str]:
        return sessions[sid]["started_at"], sid

    children: dict[str, list[str]] = {}
    for sid in sorted(sessions, key=rank):
        linked = parent(sid)
        if linked is not None:
            children.setdefault(linked, []).append(sid)
    return walk_chain(session_id, parent, lambda sid: children.get(sid, [])[-1:], rank)


def walk_chain(start: str, parent: Callable[[str], str | None], next_of: Callable[[str], list[str]],
          rank: Callable[[str], Any]) -> list[str]:
    """The chain through ``start``: up to its root, then down the first unseen continuation of each session.

    When the parent links loop, the loop's lowest-ranked session is taken as the root.
    The Hermes ``state.db`` importer walks its lineages with it too.
    """
    path = [start]
    while (up := parent(path[-1])) is not None:
        if up in path:
            path = [min(path[path.index(up):], key=rank)]
            break
        path.append(up)
    chain = [path[-1]]
    seen = set(chain)
    while True:
        step = next((sid for sid in next_of(chain[-1]) if sid not in seen), None)
        if step is None:
            return chain
        seen.add(step)
        chain.append(step)


def lab_transcript(chain: list[str], rows: list[dict[str, Any]],
                   compressions: list[dict[str, Any]]) -> tuple[list[Message], list[dict[str, Any]]]:
    """The original transcript of a chain of lab sessions, and where each compression rewrote the context."""
    by_session: dict[str, list[dict[str, Any]]] = {sid: [] for sid in chain}
    for row in rows:
        by_session[row["session_id"]].append(row)
    transcript: list[Message] = []
    points: list[dict[str, Any]] = []
    for position, sid in enumerate(chain):
        rewrites = sorted(((rec["archived_before_seq"], rec) for rec in compressions
                           if rec["session_id"] == sid and rec["mode"] == "in_place"
                           and rec["archived_before_seq"] is not None), key=lambda item: item[0])
        if position:
            rewrites.insert(0, (0, _rotation_record(compressions, chain[position - 1], sid)))
        pending = list(rewrites)
        current: tuple[int, int, dict[str, Any]] | None = None
        for row in sorted(by_session[sid], key=lambda r: r["seq"]):
            while pending and row["seq"] >= pending[0][0]:
                start, rec = pending.pop(0)
                current = (start, start + int(rec["messages_after"] or 0), _point(rec, len(transcript)))
                points.append(current[2])
            message = _lab_message(row)
            if current is not None and current[0] <= row["seq"] < current[1]:
                current[2]["context"].append(message)
            else:
                transcript.append(message)
        for _, rec in pending:
            points.append(_point(rec, len(transcript)))
    return transcript, points


def _rotation_record(compressions: list[dict[str, Any]], parent: str, child: str) -> dict[str, Any]:
    """The parent's compression that started ``child`` (files older than the mode column name no child)."""
    own = [rec for rec in compressions if rec["session_id"] == parent and rec["mode"] != "in_place"]
    named = [rec for rec in own if rec["new_session_id"] == child]
    if named or own:
        return (named or own)[-1]
    raise ValueError(f"session {child!r} continues {parent!r} after a compression, but the lab has no "
                     "compression record for it")


def _point(rec: dict[str, Any], at: int) -> dict[str, Any]:
    return {"at_message": at, "session_id": rec["session_id"], "mode": rec["mode"] or "rotation",
            "new_session_id": rec["new_session_id"], "trigger": rec["trigger"],
            "tokens_before": rec["tokens_before"], "tokens_after": rec["tokens_after"], "context": []}


def _lab_message(row: dict[str, Any]) -> Message:
    message: Message = {"role": row["role"], "content": recorded_text(row["content"])}
    if row["tool_calls"]:
        message["tool_calls"] = [recorded_call(call) for call in json.loads(row["tool_calls"])]
    if row["tool_call_id"]:
        message["tool_call_id"] = row["tool_call_id"]
    return message


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as dicts with SQL NULL as None (pandas reads it as NaN)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")
