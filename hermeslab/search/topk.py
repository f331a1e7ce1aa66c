"""The best ``limit`` conversations for a query, reading as few postings as the answer allows.

The tail latency of full-text search comes from common terms: a word found in
half of a million messages has half a million postings, and an engine that
scores every posting (SQLite FTS5's ``ORDER BY rank`` does) pays for all of
them although only the first few results are shown. Chosen here:

* **Impact-ordered blocks.** Each term's postings are kept in blocks grouped
  by their BM25 factor, every block with an upper bound on what any of its
  postings can contribute (``hermeslab.search.postings``). The best postings of
  a term are in its first block.
* **Score-at-a-time with a threshold stop (the NRA family of Fagin et al.).**
  The block with the largest remaining bound, over all query terms, is read
  next. After each growth step the loop knows a lower bound for every message
  seen (what it has collected) and an upper bound (plus what the unread blocks
  of its missing terms could still add); a message never seen can reach at most
  the sum of the terms' remaining bounds. It stops once ``limit`` conversations
  hold a lower bound no other conversation can reach, and within each of them
  no other message can overtake the best one. A single-term query
  therefore reads one block, whatever the term's frequency, and common terms
  of multi-word queries stop early because their low idf shrinks their bounds.
* **Random access for the last few rivals (Fagin's TA).** Once nothing unseen
  can win, the messages that still might (those seen in a rare term's list but
  not yet in a common term's long one) are scored exactly from their text, up
  to a budget, instead of reading the common term's list down to them.
* **Deduplication inside the loop.** Messages are grouped by lineage root
  while ranking, so the stop rule counts conversations, not messages.
* **A cap on work.** At most ``max_postings`` postings are read; a query that
  reaches the cap returns the best conversations found so far, flagged inexact.

Required terms (the words of quoted phrases) only admit a message once it has
been seen with all of them; the phrase itself is checked against the text of
the few messages about to enter the answer (``accept``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

Loader = Callable[[], tuple[np.ndarray, np.ndarray]]
Resolver = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Block:
    """Some postings of one term."""

    #: No posting in the block contributes more than this to a score.
    bound: float
    #: Returns the block's message numbers (int64) and their weighted contributions (float64).
    load: Loader


@dataclass(frozen=True)
class Ranked:
    doc: int
    group: int
    #: The score collected for ``doc`` (its exact BM25 score once all its terms were read).
    score: float


@dataclass(frozen=True)
class TopGroups:
    #: The best message of each of the best groups, best first.
    hits: list[Ranked]
    #: False when the work cap stopped the search before the answer was proven.
    exact: bool
    postings_read: int


def top_groups(terms: Sequence[Sequence[Block]], *, required: Sequence[bool], n_docs: int,
               group_of: Callable[[np.ndarray], np.ndarray], limit: int,
               accept: Callable[[int], bool] = lambda doc: True, max_postings: int = 2_000_000,
               resolve: Resolver | None = None, resolve_budget: int = 256) -> TopGroups:
    """The ``limit`` best groups of messages, each with its best message.

    ``terms[t]`` are the blocks of query term ``t`` (any order); ``required[t]``
    makes the term mandatory; ``group_of`` maps message numbers to group numbers
    (-1 leaves a message out); ``accept`` is asked about a message, once, before it
    enters the answer. ``resolve`` (optional) returns the exact scores of some
    messages (-inf for one that is not a hit), at most ``resolve_budget`` in all.
    """
    if len(terms) != len(required):
        raise ValueError("terms and required must have the same length")
    if len(terms) > 32:
        raise ValueError(f"at most 32 terms per query, got {len(terms)}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    queues = [sorted(blocks, key=lambda block: -block.bound) for blocks in terms]
    required_mask = np.uint32(sum(1 << t for t, flag in enumerate(required) if flag))
    state = _State(n_docs, len(terms), resolve, resolve_budget)
    cursors = [0] * len(terms)
    read, next_check = 0, 0
    while True:
        remaining = np.array([queue[c].bound if c < len(queue) else 0.0 for queue, c in zip(queues, cursors)])
        exhausted = not remaining.any()
        if exhausted or read >= next_check or read >= max_postings:
            choice = state.choose(remaining, required_mask, group_of, limit, accept)
            if exhausted or choice.decided:
                return TopGroups(choice.hits, True, read)
            if read >= max_postings:
                return TopGroups(choice.hits, False, read)
            next_check = read + max(read // 2, 1)
        term = int(np.argmax(remaining))
        docs, contributions = queues[term][cursors[term]].load()
        cursors[term] += 1
        read += len(docs)
        state.add(term, docs, contributions)


@dataclass
class _Choice:
    hits: list[Ranked]
    decided: bool


class _State:
    """Scores collected so far: dense arrays over all messages, and the list of those touched."""

    def __init__(self, n_docs: int, n_terms: int, resolve: Resolver | None, budget: int) -> None:
        self.score = np.zeros(n_docs, np.float64)
        self.seen = np.zeros(n_docs, np.uint32)
        #: Messages whose exact score came from ``resolve``; later postings of theirs add nothing.
        self.resolved = np.zeros(n_docs, bool)
        self.n_terms = n_terms
        self._all_terms = np.uint32((1 << n_terms) - 1)
        self._resolve = resolve
        self._budget = budget if resolve is not None else 0
        self._touched: list[np.ndarray] = []
        self._verdicts: dict[int, bool] = {}

    def add(self, term: int, docs: np.ndarray, contributions: np.ndarray) -> None:
        self._touched.append(docs[self.seen[docs] == 0])
        self.score[docs] += np.where(self.resolved[docs], 0.0, contributions)
        self.seen[docs] |= np.uint32(1 << term)

    def choose(self, remaining: np.ndarray, required_mask: np.uint32, group_of: Callable[[np.ndarray], np.ndarray],
               limit: int, accept: Callable[[int], bool]) -> _Choice:
        """The best groups so far and whether they are proven; resolves a few rivals when that can prove them."""
        while True:
            choice, threats = self._choose_once(remaining, required_mask, group_of, limit, accept)
            if choice.decided or not len(threats) or len(threats) > self._budget:
                return choice
            self._budget -= len(threats)
            self.score[threats] = self._resolve(threats)
            self.seen[threats] = self._all_terms
            self.resolved[threats] = True

    def _choose_once(self, remaining: np.ndarray, required_mask: np.uint32,
                     group_of: Callable[[np.ndarray], np.ndarray], limit: int,
                     accept: Callable[[int], bool]) -> tuple[_Choice, np.ndarray]:
        """The choice, and the unresolved messages whose upper bound stands in the way of proving it."""
        nothing = np.zeros(0, np.int64)
        if not self._touched:
            return _Choice([], False), nothing
        if len(self._touched) > 1:
            self._touched = [np.concatenate(self._touched)]
        docs = self._touched[0]
        seen = self.seen[docs]
        groups = group_of(docs)
        lower = np.where(((seen & required_mask) == required_mask) & (groups >= 0), self.score[docs], -np.inf)
        chosen = self._best(docs, groups, lower, limit, accept)
        hits = [Ranked(int(docs[i]), int(groups[i]), float(lower[i])) for i in chosen]
        if len(hits) < limit:
            return _Choice(hits, False), nothing
        # Upper bounds after the phrase checks: a rejected message scores -inf from now on.
        unseen_bound = float(remaining.sum())
        upper = self.score[docs] + unseen_bound
        for term in range(self.n_terms):
            if remaining[term] > 0:
                upper -= ((seen >> np.uint32(term)) & np.uint32(1)) * remaining[term]
        upper = np.where(self.resolved[docs], self.score[docs], upper)
        upper = np.where(groups >= 0, upper, -np.inf)
        # Decided when no other group can overtake the last one chosen, and no other message of a
        # chosen group can overtake that group's best (so each group's best message is known too).
        # The margin absorbs rounding in the sums, so equal scores never count as overtaking.
        threshold = hits[-1].score
        margin = 1e-9 * max(1.0, abs(threshold))
        threatening = np.zeros(len(docs), bool)
        outside = np.ones(len(docs), bool)
        for position, hit in zip(chosen, hits):
            member = groups == hit.group
            member[position] = False
            threatening |= member & (upper > hit.score + margin)
            outside &= groups != hit.group
        threatening |= outside & (upper > threshold + margin)
        threats = docs[threatening & ~self.resolved[docs]]
        decided = threshold >= unseen_bound and not threatening.any()
        # Upper bounds only fall and the threshold only rises: a message below it never matters again
        # (the chosen messages always stay).
        keep = upper >= threshold - margin
        keep[chosen] = True
        self._touched = [docs[keep]]
        # Resolving helps only when nothing unseen can still win.
        return _Choice(hits, decided), threats if threshold >= unseen_bound else nothing

    def _best(self, docs: np.ndarray, groups: np.ndarray, lower: np.ndarray, limit: int,
              accept: Callable[[int], bool]) -> list[int]:
        """Positions of the best message of each of the ``limit`` best groups, best first."""
        window = min(len(docs), max(64, 16 * limit))
        while True:
            top = np.argpartition(-lower, window - 1)[:window] if window < len(docs) else np.arange(len(docs))
            top = top[np.argsort(-lower[top], kind="stable")]
            chosen: dict[int, int] = {}
            for position in top:
                if lower[position] == -np.inf:
                    break
                group = int(groups[position])
                if group in chosen:
                    continue
                if not self._accepted(int(docs[position]), accept):
                    lower[position] = -np.inf
                    continue
                chosen[group] = int(position)
                if len(chosen) == limit:
                    return list(chosen.values())
            if window >= len(docs) or lower[top[-1]] == -np.inf:
                return list(chosen.values())
            window = min(len(docs), window * 4)

    def _accepted(self, doc: int, accept: Callable[[int], bool]) -> bool:
        verdict = self._verdicts.get(doc)
        if verdict is None:
            verdict = self._verdicts[doc] = bool(accept(doc))
            if not verdict:
                self.score[doc] = -np.inf  # never a hit, whatever else is read
        return verdict
