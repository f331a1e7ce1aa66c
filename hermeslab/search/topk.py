"""The best ``limit`` conversations for a query, reading as few postings as the answer allows.

The tail latency of full-text search comes from common terms: a word found in
half of a million messages has half a million postings, and an engine that
scores every posting (SQLite FTS5's ``ORDER BY rank`` does) pays for all of
them although only the first few results are shown. Chosen here:

* **Impact-ordered blocks.** Each term's postings are kept in blocks grouped
  by their BM25 factor, every block with an upper bound on what any of its
  postings can contribute (``hermeslab.search.postings``). The best postings of
  a term are in its first block.
* **Score-at-a-time growth (the NRA family of Fagin et al.).** The block with
  the largest remaining bound, over all query terms, is read next, and every
  posting in it is scored. A small pool of the best messages so far gives the
  threshold θ: the score of the ``limit``-th best conversation found. A message
  never seen can reach at most ``U``, the sum of the terms' remaining bounds
  (nothing at all once a required term is read to its end). Growth stops when
  ``θ ≥ U``: from then on no new message can enter the answer.
* **Refinement over a fixed candidate set.** The messages seen so far whose
  upper bound (what they collected, plus the remaining bounds of the terms they
  were not seen in) still reaches θ are the only candidates left. Further
  blocks are read only for them: a membership test per posting, no scoring of
  the rest. It stops once no candidate can overtake the answer: ``limit``
  conversations hold a lower bound no other can reach, and within each of them
  no other message can overtake the best one.
* **Random access when it is cheaper (Fagin's TA).** When the messages still in
  the way would cost less to score exactly from their text than the postings
  left in the lists they miss, they are scored that way instead.
* **Deduplication inside the loop.** Messages are grouped by lineage root
  while ranking, so the stop rule counts conversations, not messages.
* **A cap on work.** At most ``max_postings`` postings are read; a query that
  reaches the cap returns the best conversations found so far, flagged inexact.

Apart from one pass over the messages seen when refinement starts, every
check costs time in proportion to the pool or the candidate set, and the
per-message arrays are reused between queries (``Accumulators``), so a
query's cost follows the postings it reads.

Required terms (the words of quoted phrases) only admit a message once it has
been seen with all of them; the phrase itself is checked against the text of
the messages about to enter the answer (``accept``), a batch at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

Postings = tuple[np.ndarray, np.ndarray]
#: During refinement, postings read between two checks of the candidate set: at least this many, and
#: this many per candidate (a check costs about as much per candidate as reading costs per few postings).
REFINE_POSTINGS, REFINE_POSTINGS_PER_CANDIDATE = 16_384, 2
#: Messages ``accept`` is first asked about at once (see ``_Search._leading_groups``).
ACCEPT_BATCH = 8


@dataclass(frozen=True)
class Block:
    """Some postings of one term, not read yet."""

    #: No posting in the block contributes more than this to a score.
    bound: float
    #: How many postings it holds: what reading it costs.
    size: int
    #: Whatever the term's ``load`` needs to find the block.
    key: object


@dataclass(frozen=True)
class Term:
    """One query term: its blocks and how to read and weigh them."""

    blocks: Sequence[Block]
    #: Reads blocks (several in one go when asked): for each, message numbers (int64) and a payload.
    load: Callable[[Sequence[Block]], list[Postings]]
    #: The contributions (float64) of postings, given their message numbers and payload.
    weigh: Callable[[np.ndarray, np.ndarray], np.ndarray]
    #: Only messages holding the term can be hits.
    required: bool = False


@dataclass(frozen=True)
class RandomAccess:
    """Exact scores of given messages from somewhere other than the postings (their text)."""

    #: The exact score of each message (-inf for one that is not a hit).
    scores: Callable[[np.ndarray], np.ndarray]
    #: What scoring each message would cost, in postings read.
    costs: Callable[[np.ndarray], np.ndarray]
    #: No message costs less than this (so a long list of them is turned down without pricing each).
    least: float = 0.0


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


class Accumulators:
    """Per-message working arrays, kept between queries and left all zero after each.

    For a million messages they are tens of megabytes; allocating them and
    faulting their pages in for every query would cost more than clearing the
    entries one query touched.
    """

    def __init__(self) -> None:
        self.score = np.zeros(0, np.float64)
        self.seen = np.zeros(0, np.uint32)
        self.candidate = np.zeros(0, bool)
        #: What ``accept`` said: 1 yes, -1 no, 0 not asked.
        self.verdict = np.zeros(0, np.int8)

    def reserve(self, n_docs: int) -> None:
        if len(self.score) < n_docs:
            size = max(n_docs, len(self.score) * 5 // 4)
            self.score = np.zeros(size, np.float64)
            self.seen = np.zeros(size, np.uint32)
            self.candidate = np.zeros(size, bool)
            self.verdict = np.zeros(size, np.int8)

    def clear(self, touched: Sequence[np.ndarray]) -> None:
        if sum(len(docs) for docs in touched) > len(self.score) // 8:
            self.score.fill(0.0)
            self.seen.fill(0)
            self.candidate.fill(False)
            self.verdict.fill(0)
            return
        for docs in touched:
            self.score[docs] = 0.0
            self.seen[docs] = 0
            self.candidate[docs] = False
            self.verdict[docs] = 0


def top_groups(terms: Sequence[Term], *, n_docs: int, group_of: Callable[[np.ndarray], np.ndarray], limit: int,
               accept: Callable[[np.ndarray], np.ndarray] | None = None, max_postings: int = 2_000_000,
               random_access: RandomAccess | None = None,
               accumulators: Accumulators | None = None) -> TopGroups:
    """The ``limit`` best groups of messages, each with its best message.

    ``group_of`` maps message numbers to group numbers (-1 leaves a message
    out); ``accept`` (optional) tells which of some messages may be hits
    (booleans), and is asked about a message once, before it enters the
    answer. ``accumulators`` are working arrays to reuse (see ``Accumulators``).
    """
    if len(terms) > 32:
        raise ValueError(f"at most 32 terms per query, got {len(terms)}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if max_postings < 1:
        raise ValueError(f"max_postings must be at least 1, got {max_postings}")
    accumulators = accumulators if accumulators is not None else Accumulators()
    accumulators.reserve(n_docs)
    search = _Search(terms, accumulators, group_of, limit, accept, random_access)
    try:
        return search.run(max_postings)
    finally:
        accumulators.clear(search.touched)


class _Search:
    """One query's progress: the unread blocks, the scores collected, the pool, then the candidates."""

    def __init__(self, terms: Sequence[Term], acc: Accumulators, group_of: Callable[[np.ndarray], np.ndarray],
                 limit: int, accept: Callable[[np.ndarray], np.ndarray] | None,
                 random_access: RandomAccess | None) -> None:
        self.terms = terms
        self.queues = [sorted(term.blocks, key=lambda block: -block.bound) for term in terms]
        self.cursors = [0] * len(terms)
        self.bounds = np.array([queue[0].bound if queue else 0.0 for queue in self.queues])
        self.left = np.array([sum(block.size for block in queue) for queue in self.queues], np.int64)
        self.required = np.uint32(sum(1 << t for t, term in enumerate(terms) if term.required))
        self.all_terms = np.uint32((1 << len(terms)) - 1)
        self.acc = acc
        self.group_of = group_of
        self.limit = limit
        self.accept = accept
        self.random_access = random_access
        self.touched: list[np.ndarray] = []
        self.pool = np.zeros(0, np.int64)
        self.candidates = np.zeros(0, np.int64)
        self.candidate_groups = np.zeros(0, np.int64)
        self.hits: list[Ranked] = []
        self.read = 0
        self._accept_batch = ACCEPT_BATCH

    # ---------------------------------------------------------------- the two phases

    def run(self, max_postings: int) -> TopGroups:
        while (unseen := self.unseen_bound()) > 0.0 and self.threshold < unseen:
            if self.read >= max_postings:
                return TopGroups(self.hits, False, self.read)
            self._grow(int(np.argmax(self.bounds)))
        self._enter_refinement()
        while True:
            threats, missing = self._check()
            if not len(threats):
                return TopGroups(self.hits, True, self.read)
            if self.read >= max_postings:
                return TopGroups(self.hits, False, self.read)
            if self._cheaper_to_resolve(threats, missing):
                self._resolve(threats)
            else:
                self._refine(missing, max(REFINE_POSTINGS, REFINE_POSTINGS_PER_CANDIDATE * len(self.candidates)))

    @property
    def threshold(self) -> float:
        return self.hits[-1].score if len(self.hits) == self.limit else -np.inf

    def unseen_bound(self) -> float:
        """The most a message not seen yet can score: nothing once a required term is read to its end."""
        if self.required & self._exhausted():
            return 0.0
        return float(self.bounds.sum())

    def _exhausted(self) -> np.uint32:
        return np.uint32(sum(1 << t for t, bound in enumerate(self.bounds) if bound <= 0.0))

    def _next(self, term: int, count: int) -> list[Postings]:
        """Read the next ``count`` blocks of ``term``."""
        queue, start = self.queues[term], self.cursors[term]
        blocks = queue[start:start + count]
        self.cursors[term] = start + len(blocks)
        self.bounds[term] = queue[self.cursors[term]].bound if self.cursors[term] < len(queue) else 0.0
        self.left[term] -= sum(block.size for block in blocks)
        loaded = self.terms[term].load(blocks)
        self.read += sum(len(docs) for docs, _ in loaded)
        return loaded

    # ---------------------------------------------------------------- growth

    def _grow(self, term: int) -> None:
        """Read one block of ``term``, score all of it, and let its best messages into the pool."""
        acc, bit = self.acc, np.uint32(1 << term)
        ((docs, payload),) = self._next(term, 1)
        seen = acc.seen[docs]
        self.touched.append(docs[seen == 0])
        seen |= bit
        acc.seen[docs] = seen
        score = acc.score[docs] + self.terms[term].weigh(docs, payload)
        acc.score[docs] = score
        entering = (seen & self.required) == self.required
        threshold = self.threshold
        if threshold > -np.inf:
            entering &= score >= threshold - _margin(threshold)
        if entering.any():
            self.pool = np.concatenate([self.pool, docs[entering]])
        self._choose_from_pool()

    def _choose_from_pool(self) -> None:
        pool = np.sort(self.pool)
        pool = pool[_first_of_runs(pool)]
        groups = self.group_of(pool)
        lower = np.where(groups >= 0, self.acc.score[pool], -np.inf)
        chosen = self._best(pool, groups, lower)
        self.hits = [Ranked(int(pool[i]), int(groups[i]), float(lower[i])) for i in chosen]
        threshold = self.threshold
        keep = lower > -np.inf
        if threshold > -np.inf:
            keep &= lower >= threshold - _margin(threshold)
        self.pool = pool[keep]

    # ---------------------------------------------------------------- refinement

    def _enter_refinement(self) -> None:
        """The candidates: every message seen whose upper bound still reaches the threshold."""
        docs = np.concatenate(self.touched) if self.touched else np.zeros(0, np.int64)
        groups = self.group_of(docs)
        upper = np.where(groups >= 0, self._upper(docs, self.acc.seen[docs], self.acc.score[docs]), -np.inf)
        threshold = self.threshold
        keep = upper > -np.inf
        if threshold > -np.inf:
            keep &= upper >= threshold - _margin(threshold)
        self.candidates, self.candidate_groups = docs[keep], groups[keep]
        self.acc.candidate[self.candidates] = True

    def _upper(self, docs: np.ndarray, seen: np.ndarray, score: np.ndarray) -> np.ndarray:
        """What each message could still reach: its score plus the remaining bound of every term it lacks."""
        upper = score + float(self.bounds.sum())
        for term, bound in enumerate(self.bounds.tolist()):
            if bound > 0.0:
                upper -= ((seen >> np.uint32(term)) & np.uint32(1)) * bound
        lacking_required = self.required & ~seen & self._exhausted()
        return np.where(lacking_required != 0, -np.inf, upper)

    def _check(self) -> tuple[np.ndarray, np.uint32]:
        """Choose the answer among the candidates and drop the hopeless ones.

        Returns the candidates that could still overtake the answer, and the
        terms (a bit mask) that some of them were not seen in yet.
        """
        acc, docs, groups = self.acc, self.candidates, self.candidate_groups
        seen = acc.seen[docs]
        lower = np.where((seen & self.required) == self.required, acc.score[docs], -np.inf)
        chosen = self._best(docs, groups, lower)
        self.hits = [Ranked(int(docs[i]), int(groups[i]), float(lower[i])) for i in chosen]
        # Upper bounds after the phrase checks: a rejected message scores -inf from now on.
        upper = self._upper(docs, seen, acc.score[docs])
        threshold = self.threshold
        margin = _margin(threshold)
        # A message overtakes a chosen group's best, or, outside the chosen groups, the last one chosen.
        # The margin absorbs rounding in the sums, so equal scores never count as overtaking.
        beaten = np.full(len(docs), threshold + margin)
        for position, hit in zip(chosen, self.hits):
            beaten[groups == hit.group] = hit.score + _margin(hit.score)
            beaten[position] = np.inf
        # Only a message that lacks a term with postings left can still change.
        open_terms = self.all_terms & ~self._exhausted()
        threatening = (upper > beaten) & ((~seen & open_terms) != 0)
        keep = (upper > -np.inf) & (upper >= threshold - margin)
        keep[chosen] = True
        acc.candidate[docs[~keep]] = False
        self.candidates, self.candidate_groups = docs[keep], groups[keep]
        threats = docs[threatening]
        missing = np.bitwise_or.reduce(~seen[threatening]) if len(threats) else np.uint32(0)
        return threats, np.uint32(missing & open_terms)

    def _cheaper_to_resolve(self, threats: np.ndarray, missing: np.uint32) -> bool:
        if self.random_access is None:
            return False
        left = sum(int(self.left[t]) for t in range(len(self.terms)) if missing >> t & 1)
        if len(threats) * self.random_access.least > left:
            return False
        return float(np.sum(self.random_access.costs(threats))) <= left

    def _resolve(self, docs: np.ndarray) -> None:
        self.acc.score[docs] = self.random_access.scores(docs)
        self.acc.seen[docs] = self.all_terms

    def _refine(self, missing: np.uint32, budget: int) -> None:
        """Read about ``budget`` postings of the terms in ``missing``, highest bound first, for the candidates only."""
        acc, spent = self.acc, 0
        wanted = [t for t in range(len(self.terms)) if missing >> t & 1]
        while spent < budget:
            open_terms = [t for t in wanted if self.bounds[t] > 0.0]
            if not open_terms:
                return
            term = max(open_terms, key=lambda t: self.bounds[t])
            queue, cursor = self.queues[term], self.cursors[term]
            count, size = 0, 0
            while cursor + count < len(queue) and (count == 0 or spent + size + queue[cursor + count].size <= budget):
                size += queue[cursor + count].size
                count += 1
            spent += size
            bit = np.uint32(1 << term)
            for docs, payload in self._next(term, count):
                member = acc.candidate[docs]
                if not member.any():
                    continue
                docs, payload = docs[member], payload[member]
                seen = acc.seen[docs]
                fresh = (seen & bit) == 0  # a resolved message has its exact score already
                docs, payload = docs[fresh], payload[fresh]
                acc.score[docs] += self.terms[term].weigh(docs, payload)
                acc.seen[docs] = seen[fresh] | bit

    # ---------------------------------------------------------------- choosing

    def _best(self, docs: np.ndarray, groups: np.ndarray, lower: np.ndarray) -> list[int]:
        """Positions of the best message of each of the ``limit`` best groups, best first.

        Looks at a window of the best lower bounds first, widening it while it
        holds too few groups. A message the phrase check rejects gets -inf
        here and in the accumulators.
        """
        window = min(len(docs), max(64, 16 * self.limit))
        while True:
            top = np.argpartition(-lower, window - 1)[:window] if window < len(docs) else np.arange(len(docs))
            top = top[np.argsort(-lower[top], kind="stable")]
            # Whether the window reaches past the last possible hit (before rejections change ``lower``).
            complete = window >= len(docs) or lower[top[-1]] == -np.inf
            chosen = self._leading_groups(docs, groups, lower, top[lower[top] > -np.inf])
            if len(chosen) == self.limit or complete:
                return chosen
            window = min(len(docs), window * 4)

    def _leading_groups(self, docs: np.ndarray, groups: np.ndarray, lower: np.ndarray, top: np.ndarray
                        ) -> list[int]:
        """The first position of each of the first ``limit`` groups in ``top``, skipping rejected messages.

        The phrase check runs on a growing prefix of ``top``, a batch at a
        time; the batch doubles whenever it fell short, for the rest of the
        search, so a query whose candidates mostly fail the check asks about
        them in few large batches.
        """
        checked = 0
        while True:
            end = len(top) if self.accept is None else min(len(top), checked + self._accept_batch)
            if self.accept is not None:
                self._check_phrases(docs, top[checked:end], lower)
            prefix = top[:end]
            prefix = prefix[lower[prefix] > -np.inf]
            by_group = np.argsort(groups[prefix], kind="stable")
            first = np.sort(by_group[_first_of_runs(groups[prefix][by_group])])
            chosen = prefix[first[:self.limit]].tolist()
            if len(chosen) == self.limit or end == len(top):
                return chosen
            checked, self._accept_batch = end, 2 * self._accept_batch

    def _check_phrases(self, docs: np.ndarray, positions: np.ndarray, lower: np.ndarray) -> None:
        """Ask ``accept`` about the messages at ``positions`` not asked yet; a rejected one scores -inf from now on."""
        positions = positions[lower[positions] > -np.inf]
        acc, chosen = self.acc, docs[positions]
        unknown = chosen[acc.verdict[chosen] == 0]
        if len(unknown):
            accepted = np.asarray(self.accept(unknown), bool)
            acc.verdict[unknown] = np.where(accepted, 1, -1)
            acc.score[unknown[~accepted]] = -np.inf
        lower[positions[acc.verdict[chosen] < 0]] = -np.inf


def _first_of_runs(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array (``np.unique`` without its imports)."""
    return np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) else np.zeros(0, np.int64)


def _margin(score: float) -> float:
    """Rounding slack for comparing sums of the same contributions added in different orders."""
    return 1e-9 * max(1.0, abs(score)) if np.isfinite(score) else 0.0
