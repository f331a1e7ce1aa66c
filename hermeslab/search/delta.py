"""Postings of the newest messages, not yet merged into blocks, held in memory.

Adding a message to the index file writes only its row (text, length,
session): appends that touch a few pages, where updating per-term rows would
dirty one page per distinct term and cost tens of milliseconds per turn. The
postings of the messages above the merge mark are instead rebuilt in memory
by every process that searches, from those rows (each process tokenises each
new message once), and read whole by every query of the term. ``merge``
moves them into the impact-ordered blocks when they grow past a threshold.
"""

from __future__ import annotations

from array import array
from collections import Counter

import numpy as np

from hermeslab.search.postings import MAX_TF


class Delta:
    """Term → postings of messages ``first .. upto - 1``, in message order."""

    def __init__(self, first: int) -> None:
        self.first = first
        self.upto = first
        self._postings: dict[str, tuple[array, array]] = {}
        self.size = 0

    def add(self, doc: int, counts: Counter[str]) -> None:
        """Append the next message's term frequencies."""
        if doc != self.upto:
            raise ValueError(f"the delta expects message {self.upto} next, got {doc}")
        for term, tf in counts.items():
            docs, tfs = self._postings.setdefault(term, (array("I"), array("H")))
            docs.append(doc)
            tfs.append(min(tf, MAX_TF))
        self.upto += 1
        self.size += len(counts)

    def df(self, term: str) -> int:
        found = self._postings.get(term)
        return len(found[0]) if found else 0

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The term's message numbers (int64) and term frequencies (uint16)."""
        docs, tfs = self._postings.get(term, (array("I"), array("H")))
        return np.frombuffer(docs, np.uint32).astype(np.int64), np.frombuffer(tfs, np.uint16).copy()

    def terms(self) -> list[str]:
        return list(self._postings)

    def __len__(self) -> int:
        return self.upto - self.first
