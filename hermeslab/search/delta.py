"""Postings of the newest messages, not yet merged into blocks.

Adding a message to the index file must stay cheap: updating per-term rows
would dirty one page per distinct term and cost tens of milliseconds per
turn. So ``add`` writes the message rows plus one ``pending`` row per batch
holding the batch's postings grouped by term (a ``Segment``, a few appended
pages). Every searching process keeps the postings above the merge mark in
memory as a list of segments, loaded from those rows without tokenising
anything, and reads a term's postings whole at every query of it. A merge
moves them into the impact-ordered blocks and drops the segments below its
mark. Messages without a ``pending`` row (written by an older version) are
tokenised from their text instead.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any, Sequence

import numpy as np

from hermeslab.search.postings import MAX_TF, decode_nexts
from hermeslab.search.tokens import analysed

#: A segment at most this many times larger than the newest is folded together with it.
_FOLD_RATIO = 2


class Segment:
    """The postings of messages ``first .. upto - 1``, grouped by term (message order within a term).

    A posting is a message number, a term frequency and a successor mask
    (see ``hermeslab.search.postings``).
    """

    def __init__(self, first: int, upto: int, terms: tuple[str, ...], offsets: np.ndarray, docs: np.ndarray,
                 tfs: np.ndarray, nexts: np.ndarray) -> None:
        self.first, self.upto, self.terms = first, upto, terms
        #: ``offsets[i] .. offsets[i + 1]`` are the postings of ``terms[i]``.
        self.offsets = offsets
        self.docs = docs  # uint32
        self.tfs = tfs  # uint16
        self.nexts = nexts  # uint16
        self._index = {term: i for i, term in enumerate(terms)}

    @classmethod
    def from_counts(cls, first: int, counts: Sequence[Counter[str]], masks: Sequence[dict[str, int]]) -> "Segment":
        """The segment of messages ``first, first + 1, ...`` with these term frequencies and successor masks."""
        ids: dict[str, int] = {}
        term_ids, docs, tfs, nexts = array("I"), array("I"), array("H"), array("H")
        for doc, (found, successors) in enumerate(zip(counts, masks), first):
            term_ids.extend([ids.setdefault(term, len(ids)) for term in found])
            docs.extend([doc] * len(found))
            tfs.extend([min(tf, MAX_TF) for tf in found.values()])
            nexts.extend([successors.get(term, 0) for term in found])
        return cls._grouped(first, first + len(counts), tuple(ids), np.frombuffer(term_ids, np.uint32),
                            np.frombuffer(docs, np.uint32), np.frombuffer(tfs, np.uint16),
                            np.frombuffer(nexts, np.uint16))

    @classmethod
    def _grouped(cls, first: int, upto: int, terms: tuple[str, ...], term_ids: np.ndarray, docs: np.ndarray,
                 tfs: np.ndarray, nexts: np.ndarray) -> "Segment":
        """Postings in any order with their term numbers, grouped by term (a stable sort keeps message order)."""
        order = np.argsort(term_ids, kind="stable")
        offsets = np.zeros(len(terms) + 1, np.int64)
        np.cumsum(np.bincount(term_ids, minlength=len(terms)), out=offsets[1:])
        return cls(first, upto, terms, offsets, docs[order].astype(np.uint32), tfs[order].astype(np.uint16),
                   nexts[order].astype(np.uint16))

    def encode(self) -> tuple[str, bytes, bytes, bytes, bytes]:
        """(terms, postings per term, message numbers, term frequencies, successor masks) for a ``pending`` row."""
        return ("\n".join(self.terms), np.diff(self.offsets).astype("<u4").tobytes(),
                self.docs.astype("<u4").tobytes(), self.tfs.astype("<u2").tobytes(), self.nexts.astype("<u2").tobytes())

    @classmethod
    def decode(cls, first: int, upto: int, terms: str, counts: bytes, docs: bytes, tfs: bytes,
               nexts: bytes | None) -> "Segment":
        sizes = np.frombuffer(counts, "<u4")
        offsets = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        names = tuple(terms.split("\n")) if terms else ()
        total = int(offsets[-1])
        if len(names) != len(sizes) or total * 4 != len(docs) or total * 2 != len(tfs) or (
                nexts is not None and total * 2 != len(nexts)):
            raise ValueError(f"pending postings of messages {first}..{upto - 1} are damaged")
        return cls(first, upto, names, offsets, np.frombuffer(docs, "<u4"), np.frombuffer(tfs, "<u2"),
                   decode_nexts(nexts, total))

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The term's message numbers, term frequencies and successor masks."""
        i = self._index.get(term)
        if i is None:
            return self.docs[:0], self.tfs[:0], self.nexts[:0]
        part = slice(self.offsets[i], self.offsets[i + 1])
        return self.docs[part], self.tfs[part], self.nexts[part]

    def df(self, term: str) -> int:
        i = self._index.get(term)
        return 0 if i is None else int(self.offsets[i + 1] - self.offsets[i])

    def from_doc(self, mark: int) -> "Segment":
        """The part of the segment at or above message ``mark``."""
        if mark <= self.first:
            return self
        term_ids = np.repeat(np.arange(len(self.terms), dtype=np.uint32), np.diff(self.offsets))
        keep = self.docs >= mark
        return Segment._grouped(min(max(mark, self.first), self.upto), self.upto, self.terms, term_ids[keep],
                                self.docs[keep], self.tfs[keep], self.nexts[keep])

    @staticmethod
    def joined(segments: Sequence["Segment"]) -> "Segment":
        """Consecutive segments as one."""
        ids: dict[str, int] = {}
        term_ids = [np.repeat(np.array([ids.setdefault(term, len(ids)) for term in segment.terms], np.uint32),
                              np.diff(segment.offsets)) for segment in segments]
        return Segment._grouped(segments[0].first, segments[-1].upto, tuple(ids), np.concatenate(term_ids),
                                np.concatenate([segment.docs for segment in segments]),
                                np.concatenate([segment.tfs for segment in segments]),
                                np.concatenate([segment.nexts for segment in segments]))

    def __len__(self) -> int:
        return self.upto - self.first


def read_segments(con: Any, first: int, upto: int) -> list[Segment]:
    """The postings of messages ``first .. upto - 1`` from the ``pending`` rows of the index at ``con``."""
    segments, position = [], first
    rows = con.execute("SELECT first, upto, terms, counts, docs, tfs, nexts FROM pending WHERE upto > ? AND first < ?"
                       " ORDER BY first", (first, upto))
    for row in rows.fetchall():
        segment = Segment.decode(*row)
        if segment.first > position:
            segments.append(_tokenised(con, position, segment.first))
        segments.append(segment.from_doc(position))
        position = segment.upto
    if position < upto:
        segments.append(_tokenised(con, position, upto))
    return segments


def _tokenised(con: Any, first: int, upto: int) -> Segment:
    texts = con.execute("SELECT text FROM docs WHERE doc >= ? AND doc < ? ORDER BY doc", (first, upto)).fetchall()
    found = [analysed(text) for (text,) in texts]
    return Segment.from_counts(first, [counts for counts, _, _ in found], [masks for _, _, masks in found])


class Delta:
    """The postings of messages ``first .. upto - 1``, as a short list of segments.

    Appended segments are folded together while the one before is at most
    twice the size of the newest, so a delta of n messages has O(log n)
    segments and a query looks a term up in each of them.
    """

    def __init__(self, first: int) -> None:
        self.first = first
        self.upto = first
        self.segments: list[Segment] = []

    def append(self, segment: Segment) -> None:
        """Add the postings of the next messages."""
        if segment.first != self.upto:
            raise ValueError(f"the delta expects message {self.upto} next, got {segment.first}")
        self.upto = segment.upto
        if not len(segment):
            return
        self.segments.append(segment)
        while len(self.segments) > 1 and len(self.segments[-2]) <= _FOLD_RATIO * len(self.segments[-1]):
            self.segments[-2:] = [Segment.joined(self.segments[-2:])]

    def extend(self, segments: Sequence[Segment]) -> None:
        """Append several segments, joined first (one pass instead of a fold per segment)."""
        if len(segments) > 1:
            self.append(Segment.joined(segments))
        elif segments:
            self.append(segments[0])

    def drop_below(self, mark: int) -> None:
        """Forget the messages below ``mark`` (a merge moved them into blocks)."""
        if mark <= self.first:
            return
        self.segments = [segment.from_doc(mark) for segment in self.segments if segment.upto > mark]
        self.first, self.upto = mark, max(self.upto, mark)

    def df(self, term: str) -> int:
        return sum(segment.df(term) for segment in self.segments)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The term's message numbers (int64), term frequencies and successor masks (uint16)."""
        parts = [segment.postings(term) for segment in self.segments]
        parts = [part for part in parts if len(part[0])]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.uint16), np.zeros(0, np.uint16)
        return (np.concatenate([docs for docs, _, _ in parts]).astype(np.int64),
                np.concatenate([tfs for _, tfs, _ in parts]), np.concatenate([nexts for _, _, nexts in parts]))

    @property
    def size(self) -> int:
        """Postings held."""
        return sum(len(segment.docs) for segment in self.segments)

    def __len__(self) -> int:
        return self.upto - self.first
