"""``SearchIndex``: BM25 over every message of every session, one SQLite file, many processes.

``add`` writes the message rows (text, length, session) and one row of the
batch's postings grouped by term (``hermeslab.search.ingest``): a few appended
pages per turn. The postings of messages above the merge mark live in memory
in every searching process (``hermeslab.search.mirror``), loaded from those
rows; once there are ``merge_docs`` of them, a merge in a child process folds
them into the impact-ordered blocks (``hermeslab.search.postings``) and the
term table (``hermeslab.search.merge``). ``rebuild`` builds everything from
scratch into a new file and swaps it in. A process notices what other
processes wrote at its next call (the counters in ``meta`` moved, or the file
was replaced) and loads only the new part.

Searches and writes use separate connections, and each search reads one
snapshot, so a search never waits for a write or a merge, and never sees a
merge half done. Within the snapshot a ``Searcher``
(``hermeslab.search.searcher``) ranks, re-scores and builds the hits.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable

from hermeslab.search import storage
from hermeslab.search.build import bulk_build
from hermeslab.search.documents import MessageDoc, SessionInfo
from hermeslab.search.ingest import insert_docs, unseen, upsert_sessions
from hermeslab.search.merge import merge_pending
from hermeslab.search.mirror import Mirror
from hermeslab.search.query import Query, parse_query
from hermeslab.search.results import MAX_LIMIT, SearchResult
from hermeslab.search.searcher import Searcher
from hermeslab.search.storage import Connection, select_in, transaction
from hermeslab.search.tokens import analysed
from hermeslab.search.topk import Accumulators

log = logging.getLogger(__name__)

#: Unmerged messages that trigger a merge into the blocks.
MERGE_DOCS = 5_000
#: The work cap of one query (see ``topk``).
MAX_POSTINGS = 1_500_000


class SearchIndex:
    """The search index at ``path`` (created on first use). Thread-safe; safe to share between processes."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0, merge_docs: int = MERGE_DOCS,
                 max_postings: int = MAX_POSTINGS):
        if not isinstance(path, (str, Path)) or not str(path):
            raise TypeError(f"path must be a non-empty str or Path, got {path!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if merge_docs < 1 or max_postings < 1:
            raise ValueError("merge_docs and max_postings must be positive")
        self.path = Path(path).expanduser().absolute()
        self.timeout = float(timeout)
        self.merge_docs = int(merge_docs)
        self.max_postings = int(max_postings)
        #: The read side (searches, the in-memory mirror) and the write side never wait for each other.
        self._lock = threading.RLock()
        self._write_lock = threading.RLock()
        self._reader = Connection(self.path, self.timeout)
        self._writer = Connection(self.path, self.timeout)
        self._mirror = Mirror()
        self._accumulators = Accumulators()
        self._merge_guard = threading.Lock()
        self._merger: threading.Thread | None = None
        self._child: subprocess.Popen | None = None
        #: Bumped by ``rebuild`` and ``close``: a background merge started before gives up.
        self._generation = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"SearchIndex({str(self.path)!r})"

    def close(self) -> None:
        """Close the connections. A background merge is stopped; the next merge of the index redoes its work."""
        self._stop_merging(closing=True)
        with self._write_lock:
            self._writer.con.close()
        with self._lock:
            self._reader.con.close()

    def __enter__(self) -> "SearchIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- facts

    @property
    def lab_rowid(self) -> int:
        """The highest lab ``messages`` rowid a sync has read (-1: none)."""
        return int(self._meta()["lab_rowid"])

    def stats(self) -> dict[str, float]:
        meta = self._meta()
        docs = int(meta["docs"])
        return {"messages": docs, "sessions": int(meta["sessions"]), "terms": int(meta["terms"]),
                "unmerged_messages": docs - int(meta["merged_docs"]),
                "avgdl": meta["total_length"] / docs if docs else 0.0, "bytes": self.size_bytes()}

    def known_messages(self, message_ids: Iterable[str]) -> set[str]:
        """Which of these message ids are indexed."""
        with self._lock:
            self._reader.current()
            return set(select_in(self._reader.con, "SELECT message_id, doc FROM docs WHERE message_id IN ({})",
                                 message_ids))

    def size_bytes(self) -> int:
        """The index file with its write-ahead log."""
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    @property
    def merging(self) -> bool:
        """Whether a background merge is running in this process."""
        merger = self._merger
        return merger is not None and merger.is_alive()

    def wait_for_merge(self, timeout: float | None = None) -> bool:
        """Wait for this process's background merge, if any; returns False if it is still running."""
        merger = self._merger
        if merger is not None:
            merger.join(timeout)
        return not self.merging

    # ---------------------------------------------------------------- writing

    def add(self, docs: Iterable[MessageDoc], sessions: Iterable[SessionInfo] = (), *,
            lab_rowid: int | None = None) -> int:
        """Index messages not indexed yet (by message id) and record sessions; returns how many were new.

        Committed on return: a query from any process finds them. ``lab_rowid``
        advances the lab sync watermark in the same transaction. Once
        ``merge_docs`` messages are unmerged, a merge starts in the background.
        """
        docs, sessions = list(docs), list(sessions)
        for doc in docs:
            if not isinstance(doc, MessageDoc):
                raise TypeError(f"add() takes MessageDoc items, got {type(doc).__name__}")
        for session in sessions:
            if not isinstance(session, SessionInfo):
                raise TypeError(f"add() takes SessionInfo items as sessions, got {type(session).__name__}")
        counts = {doc.message_id: analysed(doc.text) for doc in docs}  # outside the write lock
        with self._write_lock:
            self._writer.current()
            with transaction(self._writer.con) as con:
                meta = storage.read_meta(con)
                version = int(meta["sessions_version"]) + upsert_sessions(con, meta, sessions)
                fresh = unseen(con, docs)
                if fresh:
                    version += upsert_sessions(
                        con, meta, [SessionInfo(doc.session_id) for doc in fresh], fill_only=True)
                    insert_docs(con, meta, fresh, counts)
                updates = {"sessions_version": version, "docs": meta["docs"], "total_length": meta["total_length"],
                           "sessions": meta["sessions"]}
                if lab_rowid is not None:
                    updates["lab_rowid"] = max(int(lab_rowid), int(meta["lab_rowid"]))
                storage.write_meta(con, updates)
        if int(meta["docs"]) - int(meta["merged_docs"]) >= self.merge_docs:
            self._merge_in_background()
        return len(fresh)

    def merge(self) -> int:
        """Fold every unmerged message into the blocks and the term table now; returns the postings moved.

        Waits for a background merge first (it may have done part of the work).
        """
        self.wait_for_merge()
        with self._merge_guard:
            generation = self._generation
        return self._merge(generation)

    def _merge_in_background(self) -> None:
        with self._merge_guard:
            if self._closed or self.merging:
                return
            self._merger = threading.Thread(target=self._merge_in_child, args=(self._generation,),
                                            name=f"merge {self.path.name}", daemon=True)
            self._merger.start()

    def _merge_in_child(self, generation: int) -> None:
        """Run ``hermeslab.search.merge`` in a child process and wait for it (on a thread of its own)."""
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-c", "import sys; from hermeslab.search.merge import main; main(sys.argv[1:])",
                   str(self.path), "--merge-docs", str(self.merge_docs), "--timeout", str(self.timeout)]
        try:
            child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        except OSError as exc:  # the next add tries again
            log.warning("cannot start a merge of the search index %s: %s", self.path, exc)
            return
        with self._merge_guard:
            self._child = child
            if self._generation != generation:
                child.terminate()
        _, errors = child.communicate()
        if child.returncode and self._generation == generation:
            log.warning("merging the search index %s failed: %s", self.path, errors.strip()[-2_000:])

    def _merge(self, generation: int) -> int:
        """Merge everything pending now, in this thread; returns the postings moved."""
        con = storage.connect(self.path, timeout=self.timeout)
        try:
            return merge_pending(con, stop=lambda: self._generation != generation)
        finally:
            con.close()

    def _stop_merging(self, *, closing: bool = False) -> None:
        """Make a running merge give up (its work so far is dropped), and wait for it."""
        with self._merge_guard:
            self._closed = self._closed or closing
            self._generation += 1
            if self._child is not None and self._child.poll() is None:
                self._child.terminate()
        self.wait_for_merge()

    def rebuild(self, docs: Iterable[MessageDoc], sessions: Iterable[SessionInfo] = (), *,
                lab_rowid: int = -1) -> int:
        """Replace the whole index with these messages and sessions; returns the messages indexed.

        Built into a new file and swapped in, so readers never see half an
        index; other processes switch to the new file at their next call.
        """
        scratch = self.path.with_name(self.path.name + ".rebuild")
        _remove(scratch)
        con = storage.connect(scratch, timeout=self.timeout, bulk=True)
        try:
            count = bulk_build(con, docs, sessions, lab_rowid)
        finally:
            con.close()
        self._stop_merging()
        with self._write_lock, self._lock:
            self._writer.con.close()
            self._reader.con.close()
            os.replace(scratch, self.path)
            for suffix in ("-wal", "-shm"):
                _remove(Path(f"{self.path}{suffix}"))
            self._writer.reopen()
            self._reader.reopen()
            self._mirror = Mirror()
        return count

    # ---------------------------------------------------------------- searching

    def search(self, query: str | Query, *, limit: int = 3, exclude_session: str | None = None) -> SearchResult:
        """The ``limit`` best conversations for ``query``, one hit per lineage root.

        ``exclude_session`` leaves out the whole lineage (same root) of that
        session, typically the conversation asking.
        """
        parsed = parse_query(query) if isinstance(query, str) else query
        if not isinstance(parsed, Query):
            raise TypeError(f"query must be a string or a Query, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
        if exclude_session is not None and not isinstance(exclude_session, str):
            raise TypeError(f"exclude_session must be a session id string, got {exclude_session!r}")
        with self._lock:
            if not self._reader.current():
                self._mirror = Mirror()
            con = self._reader.con
            con.execute("BEGIN")  # one snapshot for the whole search
            try:
                return self._search(parsed, limit, exclude_session)
            finally:
                con.execute("COMMIT")

    def _search(self, parsed: Query, limit: int, exclude_session: str | None) -> SearchResult:
        self._refresh()
        return Searcher(self._reader.con, self._mirror, self._accumulators, self.max_postings).run(
            parsed, limit, exclude_session)

    def _refresh(self) -> None:
        """Load what other writers (or this one) added since the last call, inside the search's snapshot."""
        con = self._reader.con
        meta = storage.read_meta(con)
        if int(meta["docs"]) < self._mirror.docs:
            self._mirror = Mirror()
        self._mirror.catch_up(con, meta, self.path)

    def _meta(self) -> dict:
        with self._lock:
            self._reader.current()
            return storage.read_meta(self._reader.con)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
