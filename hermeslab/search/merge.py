"""Moving the unmerged messages' postings into the blocks without making searches wait.

A merge reads a snapshot in one read transaction (the counters, message
lengths, the pending postings and the stored blocks it will cut again),
computes the new blocks with no lock held, and writes them in one short
transaction. Searches read their own snapshot on their own connection, so
they never wait for it; other writers wait only for the final write. If
another merge got in first (the ``merges`` counter moved), the work is
dropped, so two processes merging at once stay correct.

``SearchIndex`` runs the merges an ``add`` makes due in a child process
(``main``): a thread would share the interpreter lock with the searches and
slow them down while it works. Stopping the child at any point is safe: its
write is one transaction.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hermeslab.search import storage
from hermeslab.search.delta import Segment, read_segments
from hermeslab.search.postings import BlockHead, PostingBlock, merge_postings
from hermeslab.search.storage import CHUNK_DOCS, SearchIndexError, block_key, block_range, transaction

_SQL_VARIABLES = 500
#: How much lower the scheduling priority of a background merge is.
BACKGROUND_NICENESS = 10


@dataclass
class _Plan:
    """What a merge will write, and the counters it was computed from."""

    merges: int
    first: int
    upto: int
    next_term: int
    #: (term, id, document frequency to add)
    terms: list[tuple[str, int, int]] = field(default_factory=list)
    #: Terms whose stored blocks are all replaced.
    replaced: list[int] = field(default_factory=list)
    #: Rows for ``blocks``.
    blocks: list[tuple] = field(default_factory=list)
    postings: int = 0


def merge_pending(con: sqlite3.Connection, *, stop: Callable[[], bool] = lambda: False) -> int:
    """Merge every message pending at the start; returns the postings moved (0 if dropped or nothing to do).

    ``stop`` is polled between terms (true: give up).
    """
    plan = _plan(con, stop)
    if plan is None or stop():
        return 0
    with transaction(con):
        meta = storage.read_meta(con)
        if int(meta["merges"]) != plan.merges or int(meta["merged_docs"]) != plan.first:
            return 0
        con.executemany("INSERT INTO terms (term, id, df) VALUES (?, ?, ?) "
                        "ON CONFLICT (term) DO UPDATE SET df = df + excluded.df", plan.terms)
        con.executemany("DELETE FROM blocks WHERE key BETWEEN ? AND ?",
                        [block_range(term_id) for term_id in plan.replaced])
        con.executemany("INSERT INTO blocks (key, bound, avgdl, size, docs, tfs, nexts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        plan.blocks)
        con.execute("DELETE FROM pending WHERE upto <= ?", (plan.upto,))
        storage.write_meta(con, {"terms": plan.next_term, "merged_docs": plan.upto, "merges": plan.merges + 1})
    return plan.postings


def merge_due(con: sqlite3.Connection, merge_docs: int, *, stop: Callable[[], bool] = lambda: False) -> int:
    """Merge until fewer than ``merge_docs`` messages are pending (adds go on meanwhile); returns the postings moved."""
    moved = 0
    while not stop():
        moved += merge_pending(con, stop=stop)
        meta = storage.read_meta(con)
        if int(meta["docs"]) - int(meta["merged_docs"]) < merge_docs:
            break
    return moved


def main(argv: Sequence[str] | None = None) -> None:
    """The child process of a background merge: ``INDEX [--merge-docs N] [--timeout SECONDS]``."""
    parser = argparse.ArgumentParser(description="Merge the pending postings of a search index.")
    parser.add_argument("index", type=Path)
    parser.add_argument("--merge-docs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0)
    options = parser.parse_args(argv)
    if not options.index.is_file():
        parser.error(f"no search index at {options.index}")
    if hasattr(os, "nice"):
        os.nice(BACKGROUND_NICENESS)  # searches of the parent come first when the cores are busy
    con = storage.connect(options.index, timeout=options.timeout)
    try:
        merge_due(con, max(1, options.merge_docs))
    finally:
        con.close()


def _plan(con: sqlite3.Connection, stop: Callable[[], bool]) -> _Plan | None:
    """The rows a merge of everything pending will write, computed in one read snapshot (None: nothing to do)."""
    con.execute("BEGIN")
    try:
        meta = storage.read_meta(con)
        first, upto = int(meta["merged_docs"]), int(meta["docs"])
        if upto <= first:
            return None
        lengths = _read_lengths(con, upto)
        pending = Segment.joined(read_segments(con, first, upto))
        avgdl = int(meta["total_length"]) / upto
        ids = _term_ids(con, pending.terms)
        plan = _Plan(int(meta["merges"]), first, upto, int(meta["terms"]), postings=len(pending.docs))
        for term in pending.terms:
            if term not in ids:
                ids[term], plan.next_term = (plan.next_term, True), plan.next_term + 1
        for term in sorted(pending.terms, key=lambda term: ids[term][0]):
            if stop():
                return None
            term_id, is_new = ids[term]
            docs, tfs, nexts = pending.postings(term)
            plan.terms.append((term, term_id, len(docs)))
            _merge_term(con, plan, term_id, docs.astype(np.int64), tfs, nexts, lengths, avgdl, is_new=is_new)
        return plan
    finally:
        con.execute("COMMIT")


def _merge_term(con: sqlite3.Connection, plan: _Plan, term_id: int, docs: np.ndarray, tfs: np.ndarray,
                nexts: np.ndarray, lengths: np.ndarray, avgdl: float, *, is_new: bool) -> None:
    low, high = block_range(term_id)
    heads = [] if is_new else [
        BlockHead(key - low, bound, block_avgdl, size) for key, bound, block_avgdl, size in con.execute(
            "SELECT key, bound, avgdl, size FROM blocks WHERE key BETWEEN ? AND ?", (low, high))]
    replace, blocks = merge_postings(heads, lambda block_id: _read_block(con, low + block_id), docs, tfs, nexts,
                                     lengths, avgdl)
    if replace and heads:
        plan.replaced.append(term_id)
    plan.blocks.extend((block_key(term_id, block_id), block.bound, block.avgdl, len(block.docs), *block.encode())
                       for block_id, block in blocks.items())


def _term_ids(con: sqlite3.Connection, terms: tuple[str, ...]) -> dict[str, tuple[int, bool]]:
    """Term → (id, new?) for the terms already in the table."""
    found: dict[str, tuple[int, bool]] = {}
    for start in range(0, len(terms), _SQL_VARIABLES):
        part = terms[start:start + _SQL_VARIABLES]
        found.update((term, (int(term_id), False)) for term, term_id in con.execute(
            f"SELECT term, id FROM terms WHERE term IN ({','.join('?' * len(part))})", part))
    return found


def _read_block(con: sqlite3.Connection, key: int) -> PostingBlock:
    bound, block_avgdl, docs, tfs, nexts = con.execute(
        "SELECT bound, avgdl, docs, tfs, nexts FROM blocks WHERE key = ?", (key,)).fetchone()
    return PostingBlock.decode(docs, tfs, nexts, bound, block_avgdl)


def _read_lengths(con: sqlite3.Connection, upto: int) -> np.ndarray:
    """The lengths of messages ``0 .. upto - 1`` (uint32)."""
    parts = [np.frombuffer(packed, "<u4") for (packed,) in con.execute(
        "SELECT lengths FROM chunks WHERE chunk < ? ORDER BY chunk", (-(-upto // CHUNK_DOCS),))]
    lengths = np.concatenate(parts)[:upto] if parts else np.zeros(0, np.uint32)
    if len(lengths) < upto:
        raise SearchIndexError("message lengths are missing; rebuild the index")
    return lengths
