"""What each searching process keeps in memory of the index, and how it catches up with other writers.

Ranking needs every message's length and session and every session's lineage
root at hand; reading them per query would cost more than the query. A
``Mirror`` holds them, with the in-memory postings of unmerged messages
(``hermeslab.search.delta``), and ``catch_up`` loads only what was added since
it last looked, inside the caller's read snapshot.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from hermeslab.search.delta import Delta, read_segments
from hermeslab.search.lineage import roots_by_id
from hermeslab.search.storage import CHUNK_DOCS, SearchIndexError


class Mirror:
    """Counters, per-message lengths and sessions, session ids and titles, lineage roots, unmerged postings."""

    def __init__(self) -> None:
        self.docs = 0
        self.total_length = 0
        self.lengths = np.zeros(0, np.uint32)
        self.sessions = np.zeros(0, np.int32)
        self.sessions_version = -1
        self.session_ids: list[str] = []
        self.session_index: dict[str, int] = {}
        self.session_rows: dict[int, tuple[str | None, float | None]] = {}
        self.roots = np.zeros(0, np.int64)
        self.merges = -1
        self.delta = Delta(0)

    @property
    def avgdl(self) -> float:
        return self.total_length / self.docs if self.docs else 1.0

    def catch_up(self, con: sqlite3.Connection, meta: dict[str, Any], path: Path) -> None:
        """Load what writers added since the last call; ``meta`` was read in the same snapshot as ``con``.

        The index must not hold fewer messages than this mirror (after a
        rebuild it may): the caller starts a new mirror then.
        """
        docs = int(meta["docs"])
        if int(meta["merges"]) != self.merges:
            if self.merges < 0:
                self.delta = Delta(int(meta["merged_docs"]))
            else:
                self.delta.drop_below(int(meta["merged_docs"]))
            self.merges = int(meta["merges"])
        if docs > self.docs:
            first_chunk = self.docs // CHUNK_DOCS
            kept = first_chunk * CHUNK_DOCS
            lengths, sessions = [self.lengths[:kept]], [self.sessions[:kept]]
            for packed_lengths, packed_sessions in con.execute(
                    "SELECT lengths, sessions FROM chunks WHERE chunk >= ? ORDER BY chunk", (first_chunk,)):
                lengths.append(np.frombuffer(packed_lengths, "<u4"))
                sessions.append(np.frombuffer(packed_sessions, "<i4"))
            self.lengths = np.concatenate(lengths)[:docs]
            self.sessions = np.concatenate(sessions)[:docs]
            if len(self.lengths) < docs:
                raise SearchIndexError(f"{path}: message lengths are missing; rebuild the index")
        self.docs, self.total_length = docs, int(meta["total_length"])
        if self.delta.upto < docs:
            self.delta.extend(read_segments(con, self.delta.upto, docs))
        if int(meta["sessions_version"]) != self.sessions_version or len(self.session_ids) != meta["sessions"]:
            self._load_sessions(con, int(meta["sessions_version"]))

    def _load_sessions(self, con: sqlite3.Connection, version: int) -> None:
        rows = con.execute("SELECT idx, id, parent, title, started_at FROM sessions ORDER BY idx").fetchall()
        self.session_ids = [row[1] for row in rows]
        self.session_index = {row[1]: row[0] for row in rows}
        self.session_rows = {row[0]: (row[3], row[4]) for row in rows}
        roots = roots_by_id({row[1]: row[2] for row in rows})
        self.roots = np.array([self.session_index[roots[row[1]]] for row in rows], np.int64)
        self.sessions_version = version
