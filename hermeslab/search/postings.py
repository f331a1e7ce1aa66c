"""Impact-ordered posting blocks: how one term's postings are cut up and kept in order.

A posting is (message number, term frequency, successor mask); the mask
(``tokens.successors``: which units may follow the term in the message) only
serves phrase queries. A term's postings are sorted by
their BM25 factor (``bm25.factor``, which depends on the term frequency and
the message's length) and cut into blocks of ``BLOCK_POSTINGS``; each block
records the largest factor in it and the average length it was computed with.
Order *inside* a block does not matter, because a block is always read whole.

New postings first live in an unordered delta (every query of the term reads
it whole). ``merge_postings`` later moves them into blocks: small terms are
simply cut again; a large term gets them as extra blocks of their own, each
with its own bound, and is cut again from scratch once it has a few too many.
Readers visit blocks in order of bound, so an extra block is just another
block. A bound is exact for the average length it names, and
``bm25.factor_bound`` keeps it safe as the average drifts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from hermeslab.search.bm25 import factors

BLOCK_POSTINGS = 4_096
#: A term with at most this many postings is kept as freshly cut blocks.
SPLIT_POSTINGS = 2 * BLOCK_POSTINGS
#: Blocks a large term may carry beyond what its size needs before it is re-cut.
EXTRA_BLOCKS = 4
#: Term frequencies are stored in 16 bits; more repeats than this in one message count as this many.
MAX_TF = np.iinfo(np.uint16).max
#: The successor mask of postings stored without one (by an older version): anything may follow.
ANY_SUCCESSOR = 0xFFFF


@dataclass
class PostingBlock:
    docs: np.ndarray  # uint32
    tfs: np.ndarray  # uint16
    nexts: np.ndarray  # uint16 successor masks
    #: The largest BM25 factor of any posting here, computed with ``avgdl``.
    bound: float
    avgdl: float

    def encode(self) -> tuple[bytes, bytes, bytes]:
        return self.docs.astype("<u4").tobytes(), self.tfs.astype("<u2").tobytes(), self.nexts.astype("<u2").tobytes()

    @classmethod
    def decode(cls, docs: bytes, tfs: bytes, nexts: bytes | None, bound: float, avgdl: float) -> "PostingBlock":
        return cls(np.frombuffer(docs, "<u4"), np.frombuffer(tfs, "<u2"), decode_nexts(nexts, len(tfs) // 2),
                   bound, avgdl)


def decode_nexts(nexts: bytes | None, count: int) -> np.ndarray:
    """Stored successor masks; ``ANY_SUCCESSOR`` for postings stored without them."""
    return np.full(count, ANY_SUCCESSOR, np.uint16) if nexts is None else np.frombuffer(nexts, "<u2")


def cut_blocks(docs: np.ndarray, tfs: np.ndarray, nexts: np.ndarray, lengths: np.ndarray,
               avgdl: float) -> list[PostingBlock]:
    """One term's postings in impact order, cut into blocks of ``BLOCK_POSTINGS``.

    ``lengths`` holds the length of every message (indexed by message number).
    """
    impacts = factors(tfs, lengths[docs], avgdl)
    order = np.argsort(-impacts, kind="stable")
    return cut_sorted(docs[order], tfs[order], nexts[order], impacts[order], avgdl)


def cut_sorted(docs: np.ndarray, tfs: np.ndarray, nexts: np.ndarray, impacts: np.ndarray,
               avgdl: float) -> list[PostingBlock]:
    """``cut_blocks`` for postings already sorted by their factor (``impacts``), largest first."""
    return [PostingBlock(docs[start:start + BLOCK_POSTINGS].astype(np.uint32),
                         tfs[start:start + BLOCK_POSTINGS].astype(np.uint16),
                         nexts[start:start + BLOCK_POSTINGS].astype(np.uint16), float(impacts[start]), avgdl)
            for start in range(0, len(docs), BLOCK_POSTINGS)]


def all_blocks(term_ids: np.ndarray, docs: np.ndarray, tfs: np.ndarray, nexts: np.ndarray, lengths: np.ndarray,
               avgdl: float) -> Iterator[tuple[int, int, PostingBlock]]:
    """(term id, block id, block) for the postings of a whole collection, sorted in one pass."""
    if not len(term_ids):
        return
    impacts = factors(tfs, lengths[docs], avgdl)
    order = np.lexsort((-impacts, term_ids))
    term_ids, docs, tfs, nexts, impacts = term_ids[order], docs[order], tfs[order], nexts[order], impacts[order]
    starts = np.flatnonzero(np.r_[True, term_ids[1:] != term_ids[:-1]])
    for start, end in zip(starts.tolist(), np.r_[starts[1:], len(term_ids)].tolist()):
        cut = cut_sorted(docs[start:end], tfs[start:end], nexts[start:end], impacts[start:end], avgdl)
        for block_id, block in enumerate(cut):
            yield int(term_ids[start]), block_id, block


@dataclass(frozen=True)
class BlockHead:
    """What is known about a stored block without reading its postings."""

    id: int
    bound: float
    avgdl: float
    size: int


def merge_postings(heads: list[BlockHead], load: Callable[[int], PostingBlock], docs: np.ndarray, tfs: np.ndarray,
                   nexts: np.ndarray, lengths: np.ndarray, avgdl: float) -> tuple[bool, dict[int, PostingBlock]]:
    """Add postings to a term's stored blocks.

    Returns ``(replace, blocks)``: when ``replace`` is true, ``blocks`` are all
    the term's blocks and the old ones must go; otherwise ``blocks`` are new
    blocks to add under fresh ids. Small terms are re-cut every time (one or
    two short blocks); a large term gets the new postings as extra blocks, and
    is re-cut once it carries ``EXTRA_BLOCKS`` more blocks than its size needs,
    so a merge writes what it adds rather than every block of every common term.
    """
    total = sum(head.size for head in heads) + len(docs)
    needed = -(-total // BLOCK_POSTINGS)
    if total > SPLIT_POSTINGS and len(heads) + -(-len(docs) // BLOCK_POSTINGS) <= needed + EXTRA_BLOCKS:
        next_id = max((head.id for head in heads), default=-1) + 1
        return False, {next_id + offset: block
                       for offset, block in enumerate(cut_blocks(docs, tfs, nexts, lengths, avgdl))}
    stored = [load(head.id) for head in heads]
    all_docs = np.concatenate([block.docs for block in stored] + [docs.astype(np.uint32)])
    all_tfs = np.concatenate([block.tfs for block in stored] + [tfs.astype(np.uint16)])
    all_nexts = np.concatenate([block.nexts for block in stored] + [nexts.astype(np.uint16)])
    return True, dict(enumerate(cut_blocks(all_docs, all_tfs, all_nexts, lengths, avgdl)))
