"""Append messages and sessions to the index file, inside the caller's write transaction.

``SearchIndex.add`` holds the write lock and the transaction; these functions
are the rows it writes: new messages (their text, length and session), their
postings as one ``pending`` row (``hermeslab.search.delta``), the packed
lengths and sessions, and the session table, whose changes bump
``sessions_version`` so readers recompute lineage roots. ``meta`` is the
counter dict the caller writes back at the end.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any, Sequence

import numpy as np

from hermeslab.search.delta import Segment
from hermeslab.search.documents import MessageDoc, SessionInfo
from hermeslab.search.storage import append_chunks, select_in

#: What ``hermeslab.search.tokens.analysed`` makes of a message: term counts, length, successor masks.
Counted = tuple[Counter[str], int, dict[str, int]]


def unseen(con: sqlite3.Connection, docs: list[MessageDoc]) -> list[MessageDoc]:
    """The messages not indexed yet, each message id once (the last of its repeats)."""
    unique = {doc.message_id: doc for doc in docs}
    known = select_in(con, "SELECT message_id, doc FROM docs WHERE message_id IN ({})", unique)
    return [doc for message_id, doc in unique.items() if message_id not in known]


def upsert_sessions(con: sqlite3.Connection, meta: dict[str, Any], sessions: Sequence[SessionInfo], *,
                    fill_only: bool = False) -> int:
    """Insert new sessions and fill in or update known ones; returns 1 if any row changed, else 0."""
    latest: dict[str, SessionInfo] = {}
    for session in sessions:  # repeated ids: later non-empty fields win
        earlier = latest.get(session.id)
        latest[session.id] = session if earlier is None else SessionInfo(
            session.id, *(new if new is not None else old for new, old in zip(
                (session.parent_id, session.title, session.started_at, session.source),
                (earlier.parent_id, earlier.title, earlier.started_at, earlier.source))))
    if not latest:
        return 0
    before = con.total_changes
    known = select_in(con, "SELECT id, idx FROM sessions WHERE id IN ({})", latest)
    new = [session for session_id, session in latest.items() if session_id not in known]
    con.executemany("INSERT INTO sessions (idx, id, parent, title, started_at, source) VALUES (?, ?, ?, ?, ?, ?)",
                    [(meta["sessions"] + offset, s.id, s.parent_id, s.title, s.started_at, s.source)
                     for offset, s in enumerate(new)])
    meta["sessions"] += len(new)
    if not fill_only:
        con.executemany(
            "UPDATE sessions SET parent = coalesce(?1, parent), title = coalesce(?2, title),"
            " started_at = coalesce(?3, started_at), source = coalesce(?4, source) WHERE id = ?5 AND ("
            "parent IS NOT coalesce(?1, parent) OR title IS NOT coalesce(?2, title) OR "
            "started_at IS NOT coalesce(?3, started_at) OR source IS NOT coalesce(?4, source))",
            [(s.parent_id, s.title, s.started_at, s.source, s.id) for s in latest.values() if s.id in known])
    return int(con.total_changes > before)


def insert_docs(con: sqlite3.Connection, meta: dict[str, Any], docs: list[MessageDoc],
                counts: dict[str, Counted]) -> None:
    """Append message rows, their lengths and their postings (one ``pending`` row)."""
    first = int(meta["docs"])
    session_of = select_in(con, "SELECT id, idx FROM sessions WHERE id IN ({})", {d.session_id for d in docs})
    counted = [counts[doc.message_id] for doc in docs]
    con.executemany(
        "INSERT INTO docs (doc, message_id, session, seq, role, created_at, length, text) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(first + i, d.message_id, session_of[d.session_id], d.seq, d.role, d.created_at, counted[i][1], d.text)
         for i, d in enumerate(docs)])
    segment = Segment.from_counts(first, [found for found, _, _ in counted], [masks for _, _, masks in counted])
    con.execute("INSERT INTO pending (first, upto, terms, counts, docs, tfs, nexts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (first, first + len(docs), *segment.encode()))
    lengths = np.array([length for _, length, _ in counted], np.uint32)
    append_chunks(con, first, lengths, np.array([session_of[d.session_id] for d in docs], np.int32))
    meta["docs"] = first + len(docs)
    meta["total_length"] = int(meta["total_length"]) + int(lengths.sum())
