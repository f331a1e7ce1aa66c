"""BM25 numbers, the early-terminating top-k against brute force, lineage roots."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.search import MessageDoc, SearchIndex
from hermeslab.search.bm25 import factor, factor_bound, idf
from hermeslab.search.lineage import lineage_roots, roots_by_id
from hermeslab.search.topk import Accumulators, Block, RandomAccess, Term, top_groups


def index_of(tmp_path, texts, sessions=None):
    index = SearchIndex(tmp_path / "search.sqlite")
    index.add([MessageDoc(f"m{i}", (sessions or {}).get(i, f"s{i}"), 0, "user", 1.0e9 + i, text)
               for i, text in enumerate(texts)])
    return index


def test_scores_match_a_hand_computation(tmp_path):
    index = index_of(tmp_path, ["apple banana", "apple apple cherry", "cherry"])
    # N = 3, avgdl = (2 + 3 + 1) / 3 = 2, df(apple) = 2 → idf = ln(1 + 1.5 / 2.5) = ln 1.6
    # m0: tf 1, |d| 2 → 2.2 / (1 + 1.2) = 1.0;  m1: tf 2, |d| 3 → 4.4 / (2 + 1.2 · 1.375) = 4.4 / 3.65
    hits = index.search("apple", limit=5).hits
    assert [hit.message_id for hit in hits] == ["m1", "m0"]
    assert math.isclose(hits[0].score, math.log(1.6) * 4.4 / 3.65, rel_tol=1e-12)
    assert math.isclose(hits[1].score, math.log(1.6), rel_tol=1e-12)


def test_formulas():
    assert math.isclose(idf(3, 2), math.log(1.6))
    assert idf(1000, 1000) > 0  # the always-positive variant
    assert math.isclose(factor(1, 2, 2), 1.0)
    # a bound under one average stays a bound under another
    for tf in (1, 3, 20):
        for length in (1, 10, 500):
            for old, new in ((10, 40), (40, 10), (25, 25)):
                assert factor(tf, length, new) <= factor_bound(factor(tf, length, old), old, new) + 1e-12


def test_a_rare_term_outranks_a_common_one(tmp_path):
    texts = ["the the the the", "the zygote", *[f"the filler {i}" for i in range(20)]]
    hits = index_of(tmp_path, texts).search("the zygote", limit=3).hits
    assert hits[0].message_id == "m1"
    assert hits[1].message_id == "m0"


def test_more_query_words_rank_higher(tmp_path):
    hits = index_of(tmp_path, ["docker only here", "docker compose network", "network only", "unrelated"]
                    ).search("docker compose network", limit=3).hits
    assert hits[0].message_id == "m1"
    assert {hit.message_id for hit in hits} == {"m0", "m1", "m2"}


def best_per_group(postings, n_docs, groups, required):
    """Every group's true best score among messages that have all required terms."""
    scores = np.zeros(n_docs)
    present = np.zeros((len(postings), n_docs), bool)
    for t, term in enumerate(postings):
        for doc, contribution in term:
            scores[doc] += contribution
            present[t, doc] = True
    valid = present.any(axis=0)
    for t, flag in enumerate(required):
        if flag:
            valid &= present[t]
    best: dict[int, float] = {}
    for doc in np.flatnonzero(valid):
        group = groups[doc]
        if group >= 0:
            best[group] = max(best.get(group, -1.0), scores[doc])
    return best


@st.composite
def problems(draw):
    n_docs = draw(st.integers(1, 40))
    n_terms = draw(st.integers(1, 4))
    postings = []
    for _ in range(n_terms):
        docs = draw(st.lists(st.integers(0, n_docs - 1), unique=True, max_size=n_docs))
        postings.append([(doc, draw(st.floats(0.01, 5.0))) for doc in docs])
    groups = draw(st.lists(st.integers(-1, 8), min_size=n_docs, max_size=n_docs))
    required = draw(st.lists(st.booleans(), min_size=n_terms, max_size=n_terms))
    return n_docs, postings, groups, required, draw(st.integers(1, 4)), draw(st.integers(1, 5))


def as_term(postings, block_size, required=False):
    """A term over in-memory postings [(doc, contribution)], cut into impact-ordered blocks of ``block_size``."""
    ordered = sorted(postings, key=lambda item: -item[1])
    blocks = []
    for start in range(0, len(ordered), block_size):
        part = ordered[start:start + block_size]
        docs, values = np.array([d for d, _ in part], np.int64), np.array([v for _, v in part])
        blocks.append(Block(float(values.max()), len(part), (docs, values)))
    return Term(blocks, lambda chosen: [block.key for block in chosen], lambda docs, values: values, required)


def exact_scores(postings, required):
    """Random access for the brute-force problems: every message's full score (-inf without a required term)."""
    def scores(docs):
        out = []
        for doc in docs.tolist():
            found = [dict(term).get(doc) for term in postings]
            if any(flag and value is None for flag, value in zip(required, found)):
                out.append(-np.inf)
            else:
                out.append(sum(value for value in found if value is not None))
        return np.array(out)
    return scores


@settings(max_examples=300, deadline=None)
@given(problems(), st.integers(0, 2), st.sampled_from([0.0, 1.0, 1e9]), st.data())
def test_top_groups_equals_brute_force(problem, random_access, resolve_cost, data):
    n_docs, postings, groups, required, limit, block_size = problem
    rejected = set(data.draw(st.lists(st.integers(0, n_docs - 1), max_size=3))) if random_access == 2 else set()
    terms = [as_term(term, block_size, flag) for term, flag in zip(postings, required)]
    group_array = np.array(groups)
    access = RandomAccess(exact_scores(postings, required), lambda docs: np.full(len(docs), resolve_cost)) \
        if random_access else None
    result = top_groups(terms, n_docs=n_docs, group_of=lambda docs: group_array[docs], limit=limit,
                        accept=lambda docs: np.array([doc not in rejected for doc in docs.tolist()]),
                        random_access=access, accumulators=SHARED)
    assert result.exact
    best = best_per_group(postings, n_docs, [-1 if doc in rejected else g for doc, g in enumerate(groups)], required)
    expected = sorted(best.values(), reverse=True)[:limit]
    found = [hit.group for hit in result.hits]
    assert len(set(found)) == len(found) == len(expected)
    # The groups returned are a best set (ties may swap members) ...
    assert np.allclose(sorted((best[group] for group in found), reverse=True), expected)
    # ... and each hit's score is what was collected for it: never more than its true score.
    for hit in result.hits:
        assert hit.score <= best[hit.group] + 1e-9
        assert hit.doc not in rejected
    # The working arrays are left clean for the next query.
    assert not (SHARED.score.any() or SHARED.seen.any() or SHARED.candidate.any() or SHARED.verdict.any())


SHARED = Accumulators()


def test_top_groups_stops_early_on_a_single_term_and_honours_the_work_cap():
    postings = [(doc, 10.0 - doc // 10) for doc in range(1000)]
    result = top_groups([as_term(postings, 10)], n_docs=1000, group_of=lambda docs: docs, limit=3)
    assert result.exact and result.postings_read == 10
    capped = top_groups([as_term(postings, 10, True), as_term(postings, 10)], n_docs=1000,
                        group_of=lambda docs: docs % 2, limit=3, accept=lambda docs: np.zeros(len(docs), bool),
                        max_postings=50)
    assert not capped.exact and capped.postings_read <= 60


def test_rejected_messages_never_hide_later_hits():
    """More rejections than the first window of candidates holds: the search looks further down."""
    postings = [(doc, 1000.0 - doc) for doc in range(500)]
    result = top_groups([as_term(postings, 500)], n_docs=500, group_of=lambda docs: docs, limit=3,
                        accept=lambda docs: docs >= 200)
    assert [hit.doc for hit in result.hits] == [200, 201, 202] and result.exact


def test_random_access_replaces_reading_a_long_list_when_it_is_cheaper():
    """The rare term's messages sit at the tail of the common term's list: proving the answer takes the whole
    list, or scoring the few candidates directly."""
    rare = [(doc, 5.0 + (doc - 99_990) / 100) for doc in range(99_990, 100_000)]
    common = [(doc, 1.0 - doc / 200_000) for doc in range(100_000)]
    terms = [as_term(rare, 4), as_term(common, 1000)]
    plain = top_groups(terms, n_docs=100_000, group_of=lambda docs: docs, limit=3)
    assert [hit.doc for hit in plain.hits] == [99_999, 99_998, 99_997] and plain.exact
    assert plain.postings_read == 100_010
    exact = exact_scores([rare, common], [False, False])
    cheap = RandomAccess(exact, lambda docs: np.full(len(docs), 10.0))
    direct = top_groups(terms, n_docs=100_000, group_of=lambda docs: docs, limit=3, random_access=cheap)
    assert [hit.doc for hit in direct.hits] == [99_999, 99_998, 99_997] and direct.exact
    assert direct.postings_read == 10
    dear = RandomAccess(exact, lambda docs: np.full(len(docs), 1e6))
    assert top_groups(terms, n_docs=100_000, group_of=lambda docs: docs, limit=3,
                      random_access=dear).postings_read == 100_010


def test_lineage_roots_follow_parents_and_survive_cycles():
    assert lineage_roots([-1, 0, 1, -1]) == [0, 0, 0, 3]
    assert lineage_roots([1, 0, 0]) == [0, 0, 0]  # 0 ↔ 1 form a cycle; 2 hangs below it
    assert lineage_roots([2, 0, 1, 2]) == [0, 0, 0, 0]
    assert lineage_roots([0]) == [0]  # a session that is its own parent
    assert lineage_roots([5, -1]) == [0, 1]  # a parent outside the list ends the walk
    assert roots_by_id({"b": "a", "a": "b", "c": "b", "d": None, "e": "missing"}) == {
        "a": "a", "b": "a", "c": "a", "d": "d", "e": "e"}
