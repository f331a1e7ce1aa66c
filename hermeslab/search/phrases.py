"""Turning most candidates of a phrase query away before their text is read.

A phrase can only be checked against a message's text, and reading the text
of every message that holds all the words of ``"want have"`` (tens of
thousands of them, when both words are common and never adjacent) is what
makes such a query slow. So every posting carries its term's successor mask
in that message (``tokens.successors``): a 16-bit hash set of the units that
directly follow it. A message can hold ``u v`` only if ``v``'s bit is in the
mask of its ``u`` posting. ``PhraseFilter`` keeps the masks of the phrase
words' postings as the search reads them, and lets through only the messages
that pass, so the text check sees a small fraction of them (about one in
sixteen per unrelated successor, plus the true matches).
"""

from __future__ import annotations

import numpy as np

from hermeslab.search.query import Query
from hermeslab.search.tokens import successor_bit


class PhraseFilter:
    """The successor-mask test for the phrases of one query, over messages ``0 .. n_docs - 1``."""

    def __init__(self, query: Query, n_docs: int) -> None:
        #: Term → the bits its mask must hold (one per word that must follow it).
        self.needed: dict[str, int] = {}
        for phrase in query.phrases:
            units = phrase.split()
            for unit, after in zip(units, units[1:]):
                if unit in query.required:  # a word with postings of its own (not a lone CJK character)
                    self.needed[unit] = self.needed.get(unit, 0) | successor_bit(after)
        self._masks = {term: np.zeros(n_docs, np.uint16) for term in self.needed}
        self._known = {term: np.zeros(n_docs, bool) for term in self.needed}

    def record(self, term: str, docs: np.ndarray, masks: np.ndarray) -> None:
        """Keep the masks of postings of ``term`` just read."""
        if term in self._masks:
            self._masks[term][docs] = masks
            self._known[term][docs] = True

    def passing(self, docs: np.ndarray) -> np.ndarray:
        """Which messages may hold the phrases.

        A message passes when its postings were not read, or when a mask is
        empty: an index written before ``_`` separated units stored none for
        the pieces of ``snake_case`` words, and the text check decides them.
        """
        keep = np.ones(len(docs), bool)
        for term, bits in self.needed.items():
            masks = self._masks[term][docs]
            keep &= ~self._known[term][docs] | (masks == 0) | ((masks & bits) == bits)
        return keep
