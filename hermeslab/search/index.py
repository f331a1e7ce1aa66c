"""``SearchIndex``: BM25 over every message of every session, one SQLite file, many processes.

``add`` writes only message rows (text, length, session): a few appended
pages per turn. The postings of messages above the merge mark live in memory
(``hermeslab.search.delta``); once there are ``merge_docs`` of them, ``merge``
folds them into the impact-ordered blocks (``hermeslab.search.postings``) and
the term table. ``rebuild`` builds everything from scratch into a new file
and swaps it in. A process notices what other processes wrote at its next
call (the counters in ``meta`` moved, or the file was replaced) and loads
only the new part.

``search`` runs the early-terminating top-k of ``hermeslab.search.topk`` over
the query's terms, groups hits by lineage root (``hermeslab.search.lineage``),
leaves out the caller's own conversation, re-scores the answer exactly from
the stored text and attaches snippets and the neighbouring messages.
"""

from __future__ import annotations

import logging
import os
import threading
from array import array
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from hermeslab.search import storage
from hermeslab.search.bm25 import factor, factor_bound, factors, idf
from hermeslab.search.delta import Delta
from hermeslab.search.documents import MessageDoc, SessionInfo
from hermeslab.search.lineage import roots_by_id
from hermeslab.search.postings import MAX_TF, BlockHead, PostingBlock, all_blocks, merge_postings
from hermeslab.search.query import Query, parse_query
from hermeslab.search.snippets import preview, snippet
from hermeslab.search.storage import CHUNK_DOCS, SearchIndexError, block_key, block_range, transaction
from hermeslab.search.tokens import term_counts, terms
from hermeslab.search.topk import Block, Ranked, top_groups

log = logging.getLogger(__name__)

#: Unmerged messages that trigger a merge into the blocks.
MERGE_DOCS = 5_000
#: The work cap of one query (see ``topk``).
MAX_POSTINGS = 1_500_000
#: Messages a query may score exactly from their text instead of reading further down long posting lists.
RESOLVE_DOCS = 256
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
        self._lock = threading.RLock()
        self._con = storage.connect(self.path, timeout=self.timeout)
        self._inode = self._file_id()
        self._mirror = _Mirror()

    def __repr__(self) -> str:
        return f"SearchIndex({str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> "SearchIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- facts

    @property
    def lab_rowid(self) -> int:
        """The highest lab ``messages`` rowid a sync has read (-1: none)."""
        with self._lock:
            self._check_file()
            return int(storage.read_meta(self._con)["lab_rowid"])

    def stats(self) -> dict[str, float]:
        with self._lock:
            self._check_file()
            meta = storage.read_meta(self._con)
            docs = int(meta["docs"])
            return {"messages": docs, "sessions": int(meta["sessions"]), "terms": int(meta["terms"]),
                    "unmerged_messages": docs - int(meta["merged_docs"]),
                    "avgdl": meta["total_length"] / docs if docs else 0.0, "bytes": self.size_bytes()}

    def known_messages(self, message_ids: Iterable[str]) -> set[str]:
        """Which of these message ids are indexed."""
        with self._lock:
            self._check_file()
            return set(_select_in(self._con, "SELECT message_id, doc FROM docs WHERE message_id IN ({})", message_ids))

    def size_bytes(self) -> int:
        """The index file with its write-ahead log."""
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    # ---------------------------------------------------------------- writing

    def add(self, docs: Iterable[MessageDoc], sessions: Iterable[SessionInfo] = (), *,
            lab_rowid: int | None = None) -> int:
        """Index messages not indexed yet (by message id) and record sessions; returns how many were new.

        Committed on return: a query from any process finds them. ``lab_rowid``
        advances the lab sync watermark in the same transaction.
        """
        docs, sessions = list(docs), list(sessions)
        for doc in docs:
            if not isinstance(doc, MessageDoc):
                raise TypeError(f"add() takes MessageDoc items, got {type(doc).__name__}")
        for session in sessions:
            if not isinstance(session, SessionInfo):
                raise TypeError(f"add() takes SessionInfo items as sessions, got {type(session).__name__}")
        counts = {doc.message_id: term_counts(doc.text) for doc in docs}  # outside the write lock
        with self._lock:
            self._check_file()
            with transaction(self._con) as con:
                meta = storage.read_meta(con)
                version = int(meta["sessions_version"]) + self._upsert_sessions(con, meta, sessions)
                fresh = self._unseen(con, docs)
                counted: dict[int, Counter[str]] = {}
                if fresh:
                    version += self._upsert_sessions(
                        con, meta, [SessionInfo(doc.session_id) for doc in fresh], fill_only=True)
                    counted = self._insert_docs(con, meta, fresh, counts)
                updates = {"sessions_version": version, "docs": meta["docs"], "total_length": meta["total_length"],
                           "sessions": meta["sessions"]}
                if lab_rowid is not None:
                    updates["lab_rowid"] = max(int(lab_rowid), int(meta["lab_rowid"]))
                storage.write_meta(con, updates)
            self._refresh(counted)
            if len(self._mirror.delta) >= self.merge_docs:
                self.merge()
        return len(fresh)

    def merge(self) -> int:
        """Fold the unmerged messages' postings into the blocks and the term table; returns the postings moved."""
        with self._lock:
            self._check_file()
            with transaction(self._con) as con:
                self._refresh()
                mirror = self._mirror
                delta, avgdl = mirror.delta, mirror.avgdl
                if not len(delta):
                    return 0
                wanted = delta.terms()
                ids = _select_in(con, "SELECT term, id FROM terms WHERE term IN ({})", wanted)
                stored = set(ids)
                next_id = int(storage.read_meta(con)["terms"])
                for term in wanted:
                    if term not in ids:
                        ids[term], next_id = next_id, next_id + 1
                con.executemany("INSERT INTO terms (term, id, df) VALUES (?, ?, ?) "
                                "ON CONFLICT (term) DO UPDATE SET df = df + excluded.df",
                                [(term, ids[term], delta.df(term)) for term in wanted])
                for term in sorted(wanted, key=ids.__getitem__):
                    self._merge_term(con, ids[term], *delta.postings(term), avgdl, stored=term in stored)
                storage.write_meta(con, {"terms": next_id, "merged_docs": delta.upto,
                                         "merges": int(storage.read_meta(con)["merges"]) + 1})
            self._refresh()
            return delta.size

    def _merge_term(self, con, term_id: int, docs: np.ndarray, tfs: np.ndarray, avgdl: float, *,
                    stored: bool) -> None:
        """Merge one term's delta postings; a term new to the table has no blocks to look up."""
        low, high = block_range(term_id)
        heads = [BlockHead(key - low, bound, block_avgdl, size) for key, bound, block_avgdl, size in con.execute(
            "SELECT key, bound, avgdl, size FROM blocks WHERE key BETWEEN ? AND ?", (low, high))] if stored else []
        replace, blocks = merge_postings(heads, lambda block_id: self._block(con, low + block_id), docs, tfs,
                                         self._mirror.lengths, avgdl)
        if replace and heads:
            con.execute("DELETE FROM blocks WHERE key BETWEEN ? AND ?", (low, high))
        con.executemany("INSERT INTO blocks (key, bound, avgdl, size, docs, tfs) VALUES (?, ?, ?, ?, ?, ?)",
                        [(block_key(term_id, block_id), block.bound, block.avgdl, len(block.docs), *block.encode())
                         for block_id, block in blocks.items()])

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
            count = _bulk_build(con, docs, sessions, lab_rowid)
        finally:
            con.close()
        with self._lock:
            self._con.close()
            os.replace(scratch, self.path)
            for suffix in ("-wal", "-shm"):
                _remove(Path(f"{self.path}{suffix}"))
            self._reconnect()
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
            self._check_file()
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
        mirror, con = self._mirror, self._con
        avgdl = mirror.avgdl
        used = [term for term in query.terms if term in found]
        blocks_per_term: list[list[Block]] = []
        for term in used:
            term_id, df = found[term]
            weight = idf(mirror.docs, df)
            blocks: list[Block] = []
            delta_docs, delta_tfs = mirror.delta.postings(term)
            if len(delta_docs):
                contributions = weight * factors(delta_tfs, mirror.lengths[delta_docs], avgdl)
                blocks.append(Block(float(contributions.max()), _fixed(delta_docs, contributions)))
            if term_id >= 0:
                low, high = block_range(term_id)
                for key, bound, block_avgdl in con.execute(
                        "SELECT key, bound, avgdl FROM blocks WHERE key BETWEEN ? AND ?", (low, high)):
                    blocks.append(Block(weight * factor_bound(bound, block_avgdl, avgdl),
                                        self._block_loader(key, weight, avgdl)))
            blocks_per_term.append(blocks)
        def accept(doc: int) -> bool:
            return query.matches(self._text(doc))

        def resolve(docs: np.ndarray) -> np.ndarray:
            texts = _select_in(self._con, "SELECT doc, text FROM docs WHERE doc IN ({})", docs.tolist())
            return np.array([self._exact_score(texts[doc], found, query) for doc in docs.tolist()])

        top = top_groups(blocks_per_term, required=[term in query.required for term in used], n_docs=mirror.docs,
                         group_of=group_of, limit=limit, accept=accept if query.phrases else (lambda doc: True),
                         max_postings=self.max_postings, resolve=resolve, resolve_budget=RESOLVE_DOCS)
        return top.hits, top.exact, top.postings_read

    def _scan(self, query: Query, group_of, limit: int) -> tuple[list[Ranked], bool, int]:
        """Newest first through the text of the last ``SCAN_DOCS`` messages (a query of lone CJK characters)."""
        needle = query.phrases[0].split()[0]
        first = max(0, self._mirror.docs - SCAN_DOCS)
        chosen: dict[int, Ranked] = {}
        cursor = self._con.execute(
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
        mirror = self._mirror
        hits = []
        for item in ranked:
            message_id, session, seq, role, created_at, text = self._con.execute(
                "SELECT message_id, session, seq, role, created_at, text FROM docs WHERE doc = ?",
                (item.doc,)).fetchone()
            root_title, root_started = mirror.session_rows.get(item.group, (None, None))
            own_title = mirror.session_rows.get(session, (None, None))[0]
            hits.append(SearchHit(
                root_session_id=mirror.session_ids[item.group], session_id=mirror.session_ids[session],
                message_id=message_id, role=role, score=self._exact_score(text, found) if found else 0.0,
                created_at=_datetime(created_at), title=root_title or own_title, started_at=_datetime(root_started),
                snippet=snippet(text, query), before=self._neighbour(session, seq, item.doc, -1),
                after=self._neighbour(session, seq, item.doc, +1)))
        hits.sort(key=lambda hit: -hit.score)
        return hits

    def _exact_score(self, text: str, found: dict[str, tuple[int, int]], query: Query | None = None) -> float:
        """The BM25 score of a message from its text; with ``query``, -inf unless it is a hit of it."""
        counts, length = term_counts(text)
        if query is not None and (any(not counts[term] for term in query.required) or not query.matches(text)):
            return -np.inf
        mirror = self._mirror
        return sum(idf(mirror.docs, df) * factor(min(counts[term], MAX_TF), length, mirror.avgdl)
                   for term, (_, df) in found.items() if counts[term])

    def _neighbour(self, session: int, seq: int | None, doc: int, step: int) -> Neighbour | None:
        if seq is None:
            where, key = "doc", doc
        else:
            where, key = "seq", seq
        operator, order = ("<", "DESC") if step < 0 else (">", "ASC")
        row = self._con.execute(
            f"SELECT role, text FROM docs WHERE session = ? AND {where} {operator} ? ORDER BY {where} {order} LIMIT 1",
            (session, key)).fetchone()
        return None if row is None else Neighbour(row[0], preview(row[1]))

    def _lookup_terms(self, wanted: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Term → (id in the term table or -1, document frequency counting unmerged messages); absent terms left out."""
        placeholders = ",".join("?" * len(wanted))
        rows = self._con.execute(f"SELECT term, id, df FROM terms WHERE term IN ({placeholders})", list(wanted))
        stored = {term: (int(term_id), int(df)) for term, term_id, df in rows}
        delta = self._mirror.delta
        found = {}
        for term in wanted:
            term_id, df = stored.get(term, (-1, 0))
            df += delta.df(term)
            if df > 0:
                found[term] = (term_id, df)
        return found

    def _block_loader(self, key: int, weight: float, avgdl: float):
        def load() -> tuple[np.ndarray, np.ndarray]:
            block = self._block(self._con, key)
            docs = block.docs.astype(np.int64)
            return docs, weight * factors(block.tfs, self._mirror.lengths[docs], avgdl)
        return load

    @staticmethod
    def _block(con, key: int) -> PostingBlock:
        bound, block_avgdl, docs, tfs = con.execute(
            "SELECT bound, avgdl, docs, tfs FROM blocks WHERE key = ?", (key,)).fetchone()
        return PostingBlock.decode(docs, tfs, bound, block_avgdl)

    def _text(self, doc: int) -> str:
        return self._con.execute("SELECT text FROM docs WHERE doc = ?", (doc,)).fetchone()[0]

    def _excluded_root(self, session_id: str | None) -> int:
        index = self._mirror.session_index.get(session_id) if session_id else None
        return -2 if index is None else int(self._mirror.roots[index])

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
                     counts: dict[str, tuple[Counter[str], int]]) -> dict[int, Counter[str]]:
        """Append message rows and their lengths; returns each new message's term counts by number."""
        first = int(meta["docs"])
        session_of = _select_in(con, "SELECT id, idx FROM sessions WHERE id IN ({})", {d.session_id for d in docs})
        counted = [counts[doc.message_id] for doc in docs]
        con.executemany(
            "INSERT INTO docs (doc, message_id, session, seq, role, created_at, length, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(first + i, d.message_id, session_of[d.session_id], d.seq, d.role, d.created_at, counted[i][1], d.text)
             for i, d in enumerate(docs)])
        lengths = np.array([length for _, length in counted], np.uint32)
        _append_chunks(con, first, lengths, np.array([session_of[d.session_id] for d in docs], np.int32))
        meta["docs"] = first + len(docs)
        meta["total_length"] = int(meta["total_length"]) + int(lengths.sum())
        return {first + i: counts for i, (counts, _) in enumerate(counted)}

    # ---------------------------------------------------------------- keeping the mirror current

    def _file_id(self) -> tuple[int, int]:
        stat = self.path.stat()
        return stat.st_dev, stat.st_ino

    def _check_file(self) -> None:
        """Reopen when another process swapped in a rebuilt file (or the file was deleted)."""
        try:
            current = self._file_id()
        except FileNotFoundError:
            current = None
        if current != self._inode:
            self._con.close()
            self._reconnect()

    def _reconnect(self) -> None:
        self._con = storage.connect(self.path, timeout=self.timeout)
        self._inode = self._file_id()
        self._mirror = _Mirror()

    def _refresh(self, counted: dict[int, Counter[str]] | None = None) -> None:
        """Load what other writers (or this one) added since the last call.

        ``counted`` holds term counts this process already has, so its own
        messages are not tokenised twice.
        """
        meta = storage.read_meta(self._con)
        mirror = self._mirror
        docs = int(meta["docs"])
        if docs < mirror.docs:
            mirror = self._mirror = _Mirror()
        if int(meta["merges"]) != mirror.merges:
            mirror.delta, mirror.merges = Delta(int(meta["merged_docs"])), int(meta["merges"])
        if docs > mirror.docs:
            first_chunk = mirror.docs // CHUNK_DOCS
            kept = first_chunk * CHUNK_DOCS
            lengths, sessions = [mirror.lengths[:kept]], [mirror.sessions[:kept]]
            for packed_lengths, packed_sessions in self._con.execute(
                    "SELECT lengths, sessions FROM chunks WHERE chunk >= ? ORDER BY chunk", (first_chunk,)):
                lengths.append(np.frombuffer(packed_lengths, "<u4"))
                sessions.append(np.frombuffer(packed_sessions, "<i4"))
            mirror.lengths = np.concatenate(lengths)[:docs]
            mirror.sessions = np.concatenate(sessions)[:docs]
            if len(mirror.lengths) < docs:
                raise SearchIndexError(f"{self.path}: message lengths are missing; rebuild the index")
        mirror.docs, mirror.total_length = docs, int(meta["total_length"])
        if mirror.delta.upto < docs:
            counted = counted or {}
            for doc, text in self._con.execute("SELECT doc, text FROM docs WHERE doc >= ? AND doc < ? ORDER BY doc",
                                               (mirror.delta.upto, docs)):
                mirror.delta.add(doc, counted.get(doc) or term_counts(text)[0])
        if int(meta["sessions_version"]) != mirror.sessions_version or len(mirror.session_ids) != meta["sessions"]:
            self._load_sessions(int(meta["sessions_version"]))

    def _load_sessions(self, version: int) -> None:
        mirror = self._mirror
        rows = self._con.execute("SELECT idx, id, parent, title, started_at FROM sessions ORDER BY idx").fetchall()
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


def _fixed(docs: np.ndarray, contributions: np.ndarray):
    return lambda: (docs, contributions)


def _append_chunks(con, first: int, lengths: np.ndarray, sessions: np.ndarray) -> None:
    """Write the lengths and sessions of messages ``first, first+1, ...`` into their chunks."""
    position = 0
    while position < len(lengths):
        chunk, offset = divmod(first + position, CHUNK_DOCS)
        take = min(CHUNK_DOCS - offset, len(lengths) - position)
        row = con.execute("SELECT lengths, sessions FROM chunks WHERE chunk = ?", (chunk,)).fetchone()
        old_lengths, old_sessions = (row if row else (b"", b""))
        con.execute("INSERT OR REPLACE INTO chunks (chunk, lengths, sessions) VALUES (?, ?, ?)",
                    (chunk, old_lengths[:offset * 4] + lengths[position:position + take].astype("<u4").tobytes(),
                     old_sessions[:offset * 4] + sessions[position:position + take].astype("<i4").tobytes()))
        position += take


def _bulk_build(con, docs: Iterable[MessageDoc], sessions: Iterable[SessionInfo], lab_rowid: int) -> int:
    """Fill an empty index file in one pass: rows as they come, then all postings sorted at once."""
    session_idx: dict[str, int] = {}

    def session_of(session_id: str) -> int:
        return session_idx.setdefault(session_id, len(session_idx))

    infos = {s.id: s for s in sessions}
    for session_id in infos:
        session_of(session_id)
    term_ids: dict[str, int] = {}
    post_terms, post_docs, post_tfs = array("I"), array("I"), array("H")
    lengths, doc_sessions = array("I"), array("i")
    seen: set[str] = set()
    batch: list[tuple] = []
    insert = ("INSERT INTO docs (doc, message_id, session, seq, role, created_at, length, text) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    with transaction(con):
        for doc in docs:
            if not isinstance(doc, MessageDoc):
                raise TypeError(f"rebuild() takes MessageDoc items, got {type(doc).__name__}")
            if doc.message_id in seen:
                continue
            seen.add(doc.message_id)
            number = len(lengths)
            counts = Counter(terms(doc.text))
            length = sum(counts.values())
            post_terms.extend([term_ids.setdefault(term, len(term_ids)) for term in counts])
            post_docs.extend([number] * len(counts))
            post_tfs.extend([min(tf, MAX_TF) for tf in counts.values()])
            lengths.append(length)
            doc_sessions.append(session_of(doc.session_id))
            batch.append((number, doc.message_id, doc_sessions[-1], doc.seq, doc.role, doc.created_at, length,
                          doc.text))
            if len(batch) >= 10_000:
                con.executemany(insert, batch)
                batch.clear()
        con.executemany(insert, batch)
        n_docs = len(lengths)
        length_array = np.frombuffer(lengths, np.uint32) if n_docs else np.zeros(0, np.uint32)
        total = int(length_array.sum())
        avgdl = total / n_docs if n_docs else 1.0
        _write_blocks(con, np.frombuffer(post_terms, np.uint32), np.frombuffer(post_docs, np.uint32),
                      np.frombuffer(post_tfs, np.uint16), length_array, avgdl)
        df = np.bincount(np.frombuffer(post_terms, np.uint32), minlength=len(term_ids)) if term_ids else []
        con.executemany("INSERT INTO terms (term, id, df) VALUES (?, ?, ?)",
                        ((term, term_id, int(df[term_id])) for term, term_id in term_ids.items()))
        _append_chunks(con, 0, length_array, np.frombuffer(doc_sessions, np.int32) if n_docs
                       else np.zeros(0, np.int32))
        con.executemany("INSERT INTO sessions (idx, id, parent, title, started_at, source) VALUES (?, ?, ?, ?, ?, ?)",
                        [(idx, session_id, infos[session_id].parent_id if session_id in infos else None,
                          infos[session_id].title if session_id in infos else None,
                          infos[session_id].started_at if session_id in infos else None,
                          infos[session_id].source if session_id in infos else None)
                         for session_id, idx in session_idx.items()])
        storage.write_meta(con, {"docs": n_docs, "total_length": total, "terms": len(term_ids),
                                 "sessions": len(session_idx), "merged_docs": n_docs, "merges": 0,
                                 "sessions_version": 0, "lab_rowid": int(lab_rowid)})
    return n_docs


def _write_blocks(con, post_terms: np.ndarray, post_docs: np.ndarray, post_tfs: np.ndarray, lengths: np.ndarray,
                  avgdl: float) -> None:
    con.executemany("INSERT INTO blocks (key, bound, avgdl, size, docs, tfs) VALUES (?, ?, ?, ?, ?, ?)",
                    ((block_key(term_id, block_id), block.bound, block.avgdl, len(block.docs), *block.encode())
                     for term_id, block_id, block in all_blocks(post_terms, post_docs, post_tfs, lengths, avgdl)))


def _datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
