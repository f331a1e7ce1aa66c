"""``SearchIndex``: BM25 over every message of every session, one SQLite file, many processes.

``add`` writes the message rows (text, length, session) and one row of the
batch's postings grouped by term: a few appended pages per turn. The postings
of messages above the merge mark live in memory in every searching process
(``hermeslab.search.delta``), loaded from those rows; once there are
``merge_docs`` of them, a merge in a child process folds them into the
impact-ordered blocks (``hermeslab.search.postings``) and the term table
(``hermeslab.search.merge``). ``rebuild`` builds everything from scratch into
a new file and swaps it in. A process notices what other processes wrote at
its next call (the counters in ``meta`` moved, or the file was replaced) and
loads only the new part.

Searches and writes use separate connections, and each search reads one
snapshot, so a search never waits for a write or a merge, and never sees a
merge half done.

``search`` runs the early-terminating top-k of ``hermeslab.search.topk`` over
the query's terms, groups hits by lineage root (``hermeslab.search.lineage``),
leaves out the caller's own conversation, re-scores the answer exactly from
the stored text and attaches snippets and the neighbouring messages.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from hermeslab.search import storage
from hermeslab.search.bm25 import factor, factor_bound, factors, idf
from hermeslab.search.build import bulk_build
from hermeslab.search.delta import Delta, Segment, read_segments
from hermeslab.search.documents import MessageDoc, SessionInfo
from hermeslab.search.lineage import roots_by_id
from hermeslab.search.merge import merge_pending
from hermeslab.search.phrases import PhraseFilter
from hermeslab.search.postings import MAX_TF, decode_nexts
from hermeslab.search.query import Query, parse_query
from hermeslab.search.snippets import preview, snippet
from hermeslab.search.storage import CHUNK_DOCS, SearchIndexError, append_chunks, block_range, transaction
from hermeslab.search.tokens import analysed, counts_of
from hermeslab.search.topk import Accumulators, Block, Postings, RandomAccess, Ranked, Term, top_groups

log = logging.getLogger(__name__)

#: Unmerged messages that trigger a merge into the blocks.
MERGE_DOCS = 5_000
#: The work cap of one query (see ``topk``).
MAX_POSTINGS = 1_500_000
#: What scoring one message from its text costs, in postings read: a fixed part and a part per term of it.
RESOLVE_COST = 2_000
RESOLVE_COST_PER_TERM = 20
#: How many of the newest messages a substring scan (a lone CJK character) looks at.
SCAN_DOCS = 200_000
MAX_LIMIT = 50
_SQL_VARIABLES = 500


@dataclass(frozen=True)
class Neighbour:
    role: str | None
    text: str


@dataclass(frozen=True)
class SearchHit:
    """One conversation that matched: where, how well, and what it said around the match."""

    root_session_id: str
    #: The session holding the best match (a descendant of the root, or the root itself).
    session_id: str
    message_id: str
    role: str | None
    score: float
    created_at: datetime | None
    title: str | None
    #: When the conversation (its root session) started.
    started_at: datetime | None
    snippet: str
    before: Neighbour | None
    after: Neighbour | None


@dataclass(frozen=True)
class SearchResult:
    query: Query
    hits: list[SearchHit]
    #: False when the work cap (or the scan window of a substring query) may have hidden a better hit.
    exact: bool
    postings_read: int


class _Mirror:
    """What a process keeps in memory: counters, per-message lengths and sessions, lineage roots."""

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


class _Connection:
    """A connection to the index file that reopens itself when the file was replaced (a rebuild)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self.con = storage.connect(path, timeout=timeout)
        self.file = _file_id(path)

    def current(self) -> bool:
        """Whether this is still the file at the path; reopens (and returns False) when it is not."""
        if _file_id(self.path) == self.file:
            return True
        self.reopen()
        return False

    def reopen(self) -> None:
        self.con.close()
        self.con = storage.connect(self.path, timeout=self.timeout)
        self.file = _file_id(self.path)


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
        self._reader = _Connection(self.path, self.timeout)
        self._writer = _Connection(self.path, self.timeout)
        self._mirror = _Mirror()
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
            return set(_select_in(self._reader.con, "SELECT message_id, doc FROM docs WHERE message_id IN ({})",
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
                version = int(meta["sessions_version"]) + self._upsert_sessions(con, meta, sessions)
                fresh = self._unseen(con, docs)
                if fresh:
                    version += self._upsert_sessions(
                        con, meta, [SessionInfo(doc.session_id) for doc in fresh], fill_only=True)
                    self._insert_docs(con, meta, fresh, counts)
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
            self._mirror = _Mirror()
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
                self._mirror = _Mirror()
            con = self._reader.con
            con.execute("BEGIN")  # one snapshot for the whole search
            try:
                return self._search(parsed, limit, exclude_session)
            finally:
                con.execute("COMMIT")

    def _search(self, parsed: Query, limit: int, exclude_session: str | None) -> SearchResult:
        self._refresh()
        mirror = self._mirror
        if parsed.empty or not mirror.docs:
            return SearchResult(parsed, [], True, 0)
        excluded = self._excluded_root(exclude_session)

        def group_of(docs: np.ndarray) -> np.ndarray:
            roots = mirror.roots[mirror.sessions[docs]]
            return np.where(roots == excluded, -1, roots)

        if parsed.terms:
            found = self._lookup_terms(parsed.terms)
            if any(term not in found for term in parsed.required) or not found:
                return SearchResult(parsed, [], True, 0)
            ranked, exact, read = self._rank(parsed, found, group_of, limit)
        else:
            ranked, exact, read = self._scan(parsed, group_of, limit)
            found = {}
        return SearchResult(parsed, self._hits(parsed, found, ranked), exact, read)

    # ---------------------------------------------------------------- search internals

    def _rank(self, query: Query, found: dict[str, tuple[int, int]], group_of, limit: int
              ) -> tuple[list[Ranked], bool, int]:
        mirror, con = self._mirror, self._reader.con
        avgdl, lengths = mirror.avgdl, mirror.lengths
        phrases = PhraseFilter(query, mirror.docs)
        terms = []
        for term, (term_id, df) in found.items():
            weight = idf(mirror.docs, df)

            def weigh(docs: np.ndarray, payload: np.ndarray, term: str = term, weight: float = weight) -> np.ndarray:
                """Contributions from the term frequencies; the successor masks go to the phrase filter."""
                phrases.record(term, docs, payload[:, 1])
                return weight * factors(payload[:, 0], lengths[docs], avgdl)

            blocks: list[Block] = []
            delta_docs, delta_tfs, delta_nexts = mirror.delta.postings(term)
            if len(delta_docs):
                delta_payload = np.column_stack((delta_tfs, delta_nexts))
                bound = float(weight * factors(delta_tfs, lengths[delta_docs], avgdl).max())
                blocks.append(Block(bound, len(delta_docs), (delta_docs, delta_payload)))
            if term_id >= 0:
                low, high = block_range(term_id)
                blocks.extend(Block(weight * factor_bound(bound, block_avgdl, avgdl), size, key)
                              for key, bound, block_avgdl, size in con.execute(
                                  "SELECT key, bound, avgdl, size FROM blocks WHERE key BETWEEN ? AND ?", (low, high)))
            terms.append(Term(blocks, self._load_blocks, weigh, required=term in query.required))

        def accept(docs: np.ndarray) -> np.ndarray:
            verdicts = phrases.passing(docs)
            worth_reading = docs[verdicts].tolist()
            texts = _select_in(con, "SELECT doc, text FROM docs WHERE doc IN ({})", worth_reading)
            verdicts[verdicts] = query.matching([texts[doc] for doc in worth_reading])
            return verdicts

        def exact_scores(docs: np.ndarray) -> np.ndarray:
            texts = _select_in(con, "SELECT doc, text FROM docs WHERE doc IN ({})", docs.tolist())
            return np.array([self._exact_score(texts[doc], doc, found, query) for doc in docs.tolist()])

        def costs(docs: np.ndarray) -> np.ndarray:
            return RESOLVE_COST + RESOLVE_COST_PER_TERM * lengths[docs].astype(np.float64)

        top = top_groups(terms, n_docs=mirror.docs, group_of=group_of, limit=limit,
                         accept=accept if query.phrases else None, max_postings=self.max_postings,
                         random_access=RandomAccess(exact_scores, costs, RESOLVE_COST), accumulators=self._accumulators)
        return top.hits, top.exact, top.postings_read

    def _load_blocks(self, blocks: Sequence[Block]) -> list[Postings]:
        """Stored blocks in one query, each as message numbers and (term frequency, successor mask) pairs.

        A block of in-memory postings carries them as its key.
        """
        keys = [block.key for block in blocks if isinstance(block.key, int)]
        stored = {}
        if keys:
            rows = self._reader.con.execute(
                f"SELECT key, docs, tfs, nexts FROM blocks WHERE key IN ({','.join('?' * len(keys))})", keys)
            for key, docs, tfs, nexts in rows:
                tf_values = np.frombuffer(tfs, "<u2")
                stored[key] = (np.frombuffer(docs, "<u4").astype(np.int64),
                               np.column_stack((tf_values, decode_nexts(nexts, len(tf_values)))))
        return [stored[block.key] if isinstance(block.key, int) else block.key for block in blocks]

    def _scan(self, query: Query, group_of, limit: int) -> tuple[list[Ranked], bool, int]:
        """Newest first through the text of the last ``SCAN_DOCS`` messages (a query of lone CJK characters)."""
        needle = query.phrases[0].split()[0]
        first = max(0, self._mirror.docs - SCAN_DOCS)
        chosen: dict[int, Ranked] = {}
        cursor = self._reader.con.execute(
            "SELECT doc, text FROM docs WHERE doc >= ? AND instr(text, ?) > 0 ORDER BY doc DESC", (first, needle))
        for doc, text in cursor:
            group = int(group_of(np.array([doc]))[0])
            if group < 0 or group in chosen or not query.matches(text):
                continue
            chosen[group] = Ranked(int(doc), group, 0.0)
            if len(chosen) == limit:
                break
        cursor.close()
        return list(chosen.values()), first == 0, 0

    def _hits(self, query: Query, found: dict[str, tuple[int, int]], ranked: list[Ranked]) -> list[SearchHit]:
        mirror, con = self._mirror, self._reader.con
        hits = []
        for item in ranked:
            message_id, session, seq, role, created_at, text = con.execute(
                "SELECT message_id, session, seq, role, created_at, text FROM docs WHERE doc = ?",
                (item.doc,)).fetchone()
            root_title, root_started = mirror.session_rows.get(item.group, (None, None))
            own_title = mirror.session_rows.get(session, (None, None))[0]
            hits.append(SearchHit(
                root_session_id=mirror.session_ids[item.group], session_id=mirror.session_ids[session],
                message_id=message_id, role=role, score=self._exact_score(text, item.doc, found) if found else 0.0,
                created_at=_datetime(created_at), title=root_title or own_title, started_at=_datetime(root_started),
                snippet=snippet(text, query), before=self._neighbour(session, seq, item.doc, -1),
                after=self._neighbour(session, seq, item.doc, +1)))
        hits.sort(key=lambda hit: -hit.score)
        return hits

    def _exact_score(self, text: str, doc: int, found: dict[str, tuple[int, int]], query: Query | None = None
                     ) -> float:
        """The BM25 score of message ``doc`` from its text; with ``query``, -inf unless it is a hit of it."""
        counts = counts_of(text, found)
        if query is not None and (any(not counts[term] for term in query.required) or not query.matches(text)):
            return -np.inf
        mirror = self._mirror
        length = float(mirror.lengths[doc])
        return sum(idf(mirror.docs, df) * factor(min(counts[term], MAX_TF), length, mirror.avgdl)
                   for term, (_, df) in found.items() if counts[term])

    def _neighbour(self, session: int, seq: int | None, doc: int, step: int) -> Neighbour | None:
        if seq is None:
            where, key = "doc", doc
        else:
            where, key = "seq", seq
        operator, order = ("<", "DESC") if step < 0 else (">", "ASC")
        row = self._reader.con.execute(
            f"SELECT role, text FROM docs WHERE session = ? AND {where} {operator} ? ORDER BY {where} {order} LIMIT 1",
            (session, key)).fetchone()
        return None if row is None else Neighbour(row[0], preview(row[1]))

    def _lookup_terms(self, wanted: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Term → (id in the term table or -1, document frequency counting unmerged messages); absent terms left out."""
        placeholders = ",".join("?" * len(wanted))
        rows = self._reader.con.execute(f"SELECT term, id, df FROM terms WHERE term IN ({placeholders})",
                                        list(wanted))
        stored = {term: (int(term_id), int(df)) for term, term_id, df in rows}
        delta = self._mirror.delta
        found = {}
        for term in wanted:
            term_id, df = stored.get(term, (-1, 0))
            df += delta.df(term)
            if df > 0:
                found[term] = (term_id, df)
        return found

    def _excluded_root(self, session_id: str | None) -> int:
        index = self._mirror.session_index.get(session_id) if session_id else None
        return -2 if index is None else int(self._mirror.roots[index])

    def _meta(self) -> dict:
        with self._lock:
            self._reader.current()
            return storage.read_meta(self._reader.con)

    # ---------------------------------------------------------------- writing internals

    @staticmethod
    def _unseen(con, docs: list[MessageDoc]) -> list[MessageDoc]:
        unique = {doc.message_id: doc for doc in docs}
        known = _select_in(con, "SELECT message_id, doc FROM docs WHERE message_id IN ({})", unique)
        return [doc for message_id, doc in unique.items() if message_id not in known]

    @staticmethod
    def _upsert_sessions(con, meta: dict, sessions: Sequence[SessionInfo], *, fill_only: bool = False) -> int:
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
        known = _select_in(con, "SELECT id, idx FROM sessions WHERE id IN ({})", latest)
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

    @staticmethod
    def _insert_docs(con, meta: dict, docs: list[MessageDoc],
                     counts: dict[str, tuple[Counter[str], int, dict[str, int]]]) -> None:
        """Append message rows, their lengths and their postings (one ``pending`` row)."""
        first = int(meta["docs"])
        session_of = _select_in(con, "SELECT id, idx FROM sessions WHERE id IN ({})", {d.session_id for d in docs})
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

    # ---------------------------------------------------------------- keeping the mirror current

    def _refresh(self) -> None:
        """Load what other writers (or this one) added since the last call, inside the search's snapshot."""
        con = self._reader.con
        meta = storage.read_meta(con)
        mirror = self._mirror
        docs = int(meta["docs"])
        if docs < mirror.docs:
            mirror = self._mirror = _Mirror()
        if int(meta["merges"]) != mirror.merges:
            if mirror.merges < 0:
                mirror.delta = Delta(int(meta["merged_docs"]))
            else:
                mirror.delta.drop_below(int(meta["merged_docs"]))
            mirror.merges = int(meta["merges"])
        if docs > mirror.docs:
            first_chunk = mirror.docs // CHUNK_DOCS
            kept = first_chunk * CHUNK_DOCS
            lengths, sessions = [mirror.lengths[:kept]], [mirror.sessions[:kept]]
            for packed_lengths, packed_sessions in con.execute(
                    "SELECT lengths, sessions FROM chunks WHERE chunk >= ? ORDER BY chunk", (first_chunk,)):
                lengths.append(np.frombuffer(packed_lengths, "<u4"))
                sessions.append(np.frombuffer(packed_sessions, "<i4"))
            mirror.lengths = np.concatenate(lengths)[:docs]
            mirror.sessions = np.concatenate(sessions)[:docs]
            if len(mirror.lengths) < docs:
                raise SearchIndexError(f"{self.path}: message lengths are missing; rebuild the index")
        mirror.docs, mirror.total_length = docs, int(meta["total_length"])
        if mirror.delta.upto < docs:
            mirror.delta.extend(read_segments(con, mirror.delta.upto, docs))
        if int(meta["sessions_version"]) != mirror.sessions_version or len(mirror.session_ids) != meta["sessions"]:
            self._load_sessions(int(meta["sessions_version"]))

    def _load_sessions(self, version: int) -> None:
        mirror = self._mirror
        rows = self._reader.con.execute(
            "SELECT idx, id, parent, title, started_at FROM sessions ORDER BY idx").fetchall()
        mirror.session_ids = [row[1] for row in rows]
        mirror.session_index = {row[1]: row[0] for row in rows}
        mirror.session_rows = {row[0]: (row[3], row[4]) for row in rows}
        roots = roots_by_id({row[1]: row[2] for row in rows})
        mirror.roots = np.array([mirror.session_index[roots[row[1]]] for row in rows], np.int64)
        mirror.sessions_version = version


def _select_in(con, query: str, keys: Iterable) -> dict:
    """``query`` (with ``{}`` for the placeholders) over ``keys`` in slices, as a dict of its two columns."""
    keys = list(keys)
    found: dict = {}
    for start in range(0, len(keys), _SQL_VARIABLES):
        part = keys[start:start + _SQL_VARIABLES]
        found.update(con.execute(query.format(",".join("?" * len(part))), part).fetchall())
    return found


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def _datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
