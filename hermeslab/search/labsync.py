"""Keep a lab's search index current: index each commit, catch up on everything else.

The lab (DuckDB) is the system of record; the index beside it
(``lab.search.sqlite`` next to ``lab.duckdb``) is derived from it. Two paths
keep "committed ⇒ searchable" true at the least cost:

* **The commit hook.** ``LabSearch.record`` is registered with the process's
  ``StoreWriter`` (``on_commit``) and indexes a batch right after it is
  committed, on the writer's background thread, from the very rows that were
  stored (already redacted). Every hermeslab process writing the lab does the
  same into the same index file, so a second process's messages are
  searchable as soon as that process commits them.
* **Catch-up from the lab.** Whatever was written without the hook (a process
  killed between its two commits, a bulk import, an older hermeslab) is picked
  up by ``catch_up``: the index remembers the highest ``rowid`` of the lab's
  ``messages`` table it has read, and reads the rows above it, in short
  windows so the lab is never held for long, skipping messages it already has.
  ``search`` calls it first whenever the lab file changed since the last
  look; if another process holds the lab, the search goes ahead on the index
  as it is. DuckDB only appends to ``messages`` (archiving is an update in
  place), so row ids of committed rows only grow.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Iterator

from hermeslab.search.documents import MessageDoc, SessionInfo, doc_from_row, session_from_row, unix_seconds
from hermeslab.search.index import SearchIndex
from hermeslab.search.query import Query
from hermeslab.search.results import SearchResult
from hermeslab.store.schema import LabLockedError, open_lab_file, schema_version

log = logging.getLogger(__name__)

#: Lab rows read per visit to the lab file.
WINDOW_ROWS = 5_000
_MESSAGE_COLUMNS = ("id", "session_id", "seq", "role", "content", "tool_calls", "tool_name", "created_at")


def index_path_for(lab_path: str | Path) -> Path:
    """``.hermeslab/lab.search.sqlite`` for ``.hermeslab/lab.duckdb``."""
    lab_path = Path(lab_path)
    return lab_path.with_name(lab_path.stem + ".search.sqlite")


def batch_documents(batch: Any) -> tuple[list[MessageDoc], list[SessionInfo]]:
    """The messages and sessions of a ``StoreWriter`` batch, as the index takes them."""
    docs = [doc_from_row(row) for row in batch.rows.get("messages", [])]
    sessions = [session_from_row(row) for op, row in batch.lifecycle if op == "start"]
    started = {session.id for session in sessions}
    sessions += [SessionInfo(session_id, started_at=unix_seconds(ts)) for session_id, ts in batch.first_seen.items()
                 if session_id not in started]
    return docs, sessions


class LabSearch:
    """The search index of one lab, kept current from the lab's commits."""

    def __init__(self, lab_path: str | Path, index_path: str | Path | None = None, *, lock_timeout: float = 2.0):
        if not isinstance(lab_path, (str, Path)) or not str(lab_path):
            raise TypeError(f"lab_path must be a non-empty str or Path, got {lab_path!r}")
        if not lock_timeout > 0:
            raise ValueError(f"lock_timeout must be a positive number of seconds, got {lock_timeout!r}")
        self.lab_path = Path(lab_path).expanduser().absolute()
        self.index_path = Path(index_path) if index_path is not None else index_path_for(self.lab_path)
        self.lock_timeout = float(lock_timeout)
        self._index: SearchIndex | None = None
        self._guard = threading.Lock()
        self._seen_signature: tuple | None = None

    @property
    def index(self) -> SearchIndex:
        """The index, opened on first use (so wiring a runtime costs nothing until a search)."""
        with self._guard:
            if self._index is None:
                self._index = SearchIndex(self.index_path)
            return self._index

    def close(self) -> None:
        with self._guard:
            if self._index is not None:
                self._index.close()
                self._index = None

    def record(self, batch: Any) -> None:
        """Index a batch the lab has just committed (the ``StoreWriter.on_commit`` hook)."""
        docs, sessions = batch_documents(batch)
        if docs or sessions:
            self.index.add(docs, sessions)

    def search(self, query: str | Query, *, limit: int = 3, exclude_session: str | None = None) -> SearchResult:
        """Catch up with the lab if it changed, then search the index."""
        self.catch_up()
        return self.index.search(query, limit=limit, exclude_session=exclude_session)

    def catch_up(self, *, force: bool = False) -> int:
        """Index lab messages the index lacks; returns how many. Skipped while the lab is busy elsewhere."""
        signature = _signature(self.lab_path)
        if signature is None or (signature == self._seen_signature and not force):
            return 0
        try:
            added = sync(self.index, self.lab_path, timeout=self.lock_timeout)
        except LabLockedError:
            log.info("the lab %s is busy; searching the index as it is", self.lab_path)
            return 0
        self._seen_signature = signature
        return added

    def rebuild(self) -> int:
        """Build the index anew from the lab; returns the messages indexed."""
        if not self.lab_path.exists():
            return self.index.rebuild([], [])
        with open_lab_file(self.lab_path, read_only=True, timeout=self.lock_timeout) as con:
            if not schema_version(con):
                last, sessions = -1, []
            else:
                (last,) = con.execute("SELECT coalesce(max(rowid), -1) FROM messages").fetchone()
                sessions = _sessions(con)
        docs = (doc for _, doc in _windows(self.lab_path, -1, int(last), self.lock_timeout, known=None))
        count = self.index.rebuild(docs, sessions, lab_rowid=int(last))
        self._seen_signature = None
        return count


def sync(index: SearchIndex, lab_path: Path, *, timeout: float) -> int:
    """Add the lab's sessions and the messages above the index's watermark; returns the messages added."""
    if not lab_path.exists():
        return 0
    with open_lab_file(lab_path, read_only=True, timeout=timeout) as con:
        if not schema_version(con):
            return 0
        sessions = _sessions(con)
        (last,) = con.execute("SELECT coalesce(max(rowid), -1) FROM messages").fetchone()
    added = index.add([], sessions)
    batch: list[MessageDoc] = []
    high = index.lab_rowid
    for rowid, doc in _windows(lab_path, high, int(last), timeout, known=index):
        batch.append(doc)
        high = rowid
        if len(batch) >= WINDOW_ROWS:
            added += index.add(batch, lab_rowid=high)
            batch = []
    added += index.add(batch, lab_rowid=int(last))
    return added


def _windows(lab_path: Path, after: int, last: int, timeout: float,
             known: SearchIndex | None) -> Iterator[tuple[int, MessageDoc]]:
    """(rowid, document) of lab messages with ``after < rowid <= last``, one short lab visit per window.

    With ``known``, messages that index already holds are skipped before their text is read.
    """
    while after < last:
        with open_lab_file(lab_path, read_only=True, timeout=timeout) as con:
            ids = con.execute("SELECT rowid, id FROM messages WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?",
                              [after, last, WINDOW_ROWS]).fetchall()
            if not ids:
                return
            held = known.known_messages([message_id for _, message_id in ids]) if known is not None else set()
            wanted = [rowid for rowid, message_id in ids if message_id not in held]
            rows = []
            if wanted:
                rows = con.execute(f"SELECT rowid, {', '.join(_MESSAGE_COLUMNS)} FROM messages "
                                   "WHERE rowid IN (SELECT unnest(?)) ORDER BY rowid", [wanted]).fetchall()
        after = ids[-1][0]
        for row in rows:
            yield row[0], doc_from_row(dict(zip(_MESSAGE_COLUMNS, row[1:])))


def _sessions(con: Any) -> list[SessionInfo]:
    rows = con.execute("SELECT id, parent_session_id, title, started_at, source FROM sessions").fetchall()
    return [session_from_row(dict(zip(("id", "parent_session_id", "title", "started_at", "source"), row)))
            for row in rows]


def _signature(lab_path: Path) -> tuple | None:
    """Size and modification time of the lab file and its write-ahead log: they move with every commit."""
    parts = []
    for path in (lab_path, Path(f"{lab_path}.wal")):
        try:
            stat = path.stat()
        except FileNotFoundError:
            parts.append(None)
            continue
        parts.append((stat.st_size, stat.st_mtime_ns))
    return None if parts[0] is None else tuple(parts)
