"""Answer one query from one read snapshot of the index: look up terms, rank, re-score, build the hits.

``SearchIndex.search`` opens the snapshot and brings the process's ``Mirror``
up to date; a ``Searcher`` then runs the early-terminating top-k of
``hermeslab.search.topk`` over the query's terms (postings from the stored
blocks and from the in-memory delta), groups hits by lineage root
(``hermeslab.search.lineage``), leaves out the caller's own conversation,
re-scores the answer exactly from the stored text and attaches snippets and
the neighbouring messages. A query of lone CJK characters has no terms and is
answered by scanning the newest messages' text instead.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Callable, Sequence

import numpy as np

from hermeslab.search.bm25 import factor, factor_bound, factors, idf
from hermeslab.search.mirror import Mirror
from hermeslab.search.phrases import PhraseFilter
from hermeslab.search.postings import MAX_TF, decode_nexts
from hermeslab.search.query import Query
from hermeslab.search.results import Neighbour, SearchHit, SearchResult
from hermeslab.search.snippets import preview, snippet
from hermeslab.search.storage import block_range, select_in
from hermeslab.search.tokens import counts_of
from hermeslab.search.topk import Accumulators, Block, Postings, RandomAccess, Ranked, Term, top_groups

#: What scoring one message from its text costs, in postings read: a fixed part and a part per term of it.
RESOLVE_COST = 2_000
RESOLVE_COST_PER_TERM = 20
#: How many of the newest messages a substring scan (a lone CJK character) looks at.
SCAN_DOCS = 200_000

#: Message numbers to their conversation (lineage root), -1 for the excluded conversation.
GroupOf = Callable[[np.ndarray], np.ndarray]


class Searcher:
    """One query's work on a snapshot: ``con`` is inside the read transaction ``mirror`` was brought up to date in."""

    def __init__(self, con: sqlite3.Connection, mirror: Mirror, accumulators: Accumulators, max_postings: int):
        self.con = con
        self.mirror = mirror
        self.accumulators = accumulators
        self.max_postings = max_postings

    def run(self, parsed: Query, limit: int, exclude_session: str | None) -> SearchResult:
        """The ``limit`` best conversations for ``parsed``, leaving out the lineage of ``exclude_session``."""
        mirror = self.mirror
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

    def _rank(self, query: Query, found: dict[str, tuple[int, int]], group_of: GroupOf, limit: int
              ) -> tuple[list[Ranked], bool, int]:
        mirror, con = self.mirror, self.con
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
            texts = select_in(con, "SELECT doc, text FROM docs WHERE doc IN ({})", worth_reading)
            verdicts[verdicts] = query.matching([texts[doc] for doc in worth_reading])
            return verdicts

        def exact_scores(docs: np.ndarray) -> np.ndarray:
            texts = select_in(con, "SELECT doc, text FROM docs WHERE doc IN ({})", docs.tolist())
            return np.array([self._exact_score(texts[doc], doc, found, query) for doc in docs.tolist()])

        def costs(docs: np.ndarray) -> np.ndarray:
            return RESOLVE_COST + RESOLVE_COST_PER_TERM * lengths[docs].astype(np.float64)

        top = top_groups(terms, n_docs=mirror.docs, group_of=group_of, limit=limit,
                         accept=accept if query.phrases else None, max_postings=self.max_postings,
                         random_access=RandomAccess(exact_scores, costs, RESOLVE_COST), accumulators=self.accumulators)
        return top.hits, top.exact, top.postings_read

    def _load_blocks(self, blocks: Sequence[Block]) -> list[Postings]:
        """Stored blocks in one query, each as message numbers and (term frequency, successor mask) pairs.

        A block of in-memory postings carries them as its key.
        """
        keys = [block.key for block in blocks if isinstance(block.key, int)]
        stored = {}
        if keys:
            rows = self.con.execute(
                f"SELECT key, docs, tfs, nexts FROM blocks WHERE key IN ({','.join('?' * len(keys))})", keys)
            for key, docs, tfs, nexts in rows:
                tf_values = np.frombuffer(tfs, "<u2")
                stored[key] = (np.frombuffer(docs, "<u4").astype(np.int64),
                               np.column_stack((tf_values, decode_nexts(nexts, len(tf_values)))))
        return [stored[block.key] if isinstance(block.key, int) else block.key for block in blocks]

    def _scan(self, query: Query, group_of: GroupOf, limit: int) -> tuple[list[Ranked], bool, int]:
        """Newest first through the text of the last ``SCAN_DOCS`` messages (a query of lone CJK characters)."""
        needle = query.phrases[0].split()[0]
        first = max(0, self.mirror.docs - SCAN_DOCS)
        chosen: dict[int, Ranked] = {}
        cursor = self.con.execute(
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
        mirror, con = self.mirror, self.con
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
        mirror = self.mirror
        length = float(mirror.lengths[doc])
        return sum(idf(mirror.docs, df) * factor(min(counts[term], MAX_TF), length, mirror.avgdl)
                   for term, (_, df) in found.items() if counts[term])

    def _neighbour(self, session: int, seq: int | None, doc: int, step: int) -> Neighbour | None:
        if seq is None:
            where, key = "doc", doc
        else:
            where, key = "seq", seq
        operator, order = ("<", "DESC") if step < 0 else (">", "ASC")
        row = self.con.execute(
            f"SELECT role, text FROM docs WHERE session = ? AND {where} {operator} ? ORDER BY {where} {order} LIMIT 1",
            (session, key)).fetchone()
        return None if row is None else Neighbour(row[0], preview(row[1]))

    def _lookup_terms(self, wanted: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Term → (id in the term table or -1, document frequency counting unmerged messages); absent terms left out."""
        placeholders = ",".join("?" * len(wanted))
        rows = self.con.execute(f"SELECT term, id, df FROM terms WHERE term IN ({placeholders})",
                                        list(wanted))
        stored = {term: (int(term_id), int(df)) for term, term_id, df in rows}
        delta = self.mirror.delta
        found = {}
        for term in wanted:
            term_id, df = stored.get(term, (-1, 0))
            df += delta.df(term)
            if df > 0:
                found[term] = (term_id, df)
        return found

    def _excluded_root(self, session_id: str | None) -> int:
        index = self.mirror.session_index.get(session_id) if session_id else None
        return -2 if index is None else int(self.mirror.roots[index])


def _datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)
