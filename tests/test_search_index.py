"""The search index file: incremental adds, merges, rebuilds, lineage, exclusion, snippets, CJK, processes."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.search import MessageDoc, SearchIndex, SearchIndexError, SessionInfo, parse_query
from hermeslab.search import delta, merge, postings, storage
from hermeslab.search.snippets import CLOSE, OPEN

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def message(number: int, session: str, text: str, seq: int | None = None) -> MessageDoc:
    return MessageDoc(f"m{number}", session, number if seq is None else seq, "assistant", 1.7e9 + number, text)


def corpus(n: int = 400) -> list[MessageDoc]:
    """Deterministic texts with common, medium and rare words, spread over 20 sessions."""
    docs = []
    for i in range(n):
        words = [WORDS[(i * 7 + k * k) % len(WORDS)] for k in range(3 + i % 9)]
        words += ["common"] * (1 + i % 3) + [f"rare{i % 97}", "get_user_name" if i % 11 == 0 else "plain"]
        docs.append(message(i, f"s{i % 20}", " ".join(words), seq=i // 20))
    return docs


SESSIONS = [SessionInfo(f"s{i}", parent_id=f"s{i - 1}" if i % 4 else None, title=f"title {i}", started_at=1.7e9 + i)
            for i in range(20)]
QUERIES = ["common", "alpha", "rare5 common", "user name", "get_user_name", "zulu yankee xray", '"bravo charlie"',
           "quebec rare13", "nothing-like-this", "delta"]


def results(index: SearchIndex, limit: int = 5):
    """Per query: the scores in order, and the conversation of each score no other hit shares (ties may swap)."""
    out = {}
    for query in QUERIES:
        hits = index.search(query, limit=limit + 1).hits
        scores = [round(hit.score, 9) for hit in hits]
        unique = [hit.root_session_id for hit, score in zip(hits, scores) if scores.count(score) == 1]
        out[query] = (scores[:limit], unique[:limit] if len(hits) <= limit or scores[-1] != scores[-2] else None)
    return out


@pytest.fixture
def small_blocks(monkeypatch):
    """Tiny blocks, so a few hundred messages exercise extra blocks and re-cuts."""
    monkeypatch.setattr(postings, "BLOCK_POSTINGS", 8)
    monkeypatch.setattr(postings, "SPLIT_POSTINGS", 16)
    monkeypatch.setattr(postings, "EXTRA_BLOCKS", 2)


def test_rebuild_equals_incremental_adds_with_merges(tmp_path, small_blocks):
    docs = corpus()
    incremental = SearchIndex(tmp_path / "incremental.sqlite", merge_docs=10_000)
    for start in range(0, len(docs) - 5, 7):
        incremental.add(docs[start:min(start + 7, len(docs) - 5)], SESSIONS if start == 0 else ())
        if start % 35 == 0:  # merges in this process, so they cut the small blocks
            assert results(incremental)
            incremental.merge()
    incremental.add(docs[-5:])
    rebuilt = SearchIndex(tmp_path / "rebuilt.sqlite")
    rebuilt.rebuild(docs, SESSIONS)
    assert incremental.stats()["unmerged_messages"] > 0  # some answers come from the in-memory delta
    assert results(incremental) == results(rebuilt)
    incremental.merge()
    assert incremental.stats()["unmerged_messages"] == 0
    assert results(incremental) == results(rebuilt)
    assert {k: v for k, v in incremental.stats().items() if k not in ("bytes", "unmerged_messages")} == {
        k: v for k, v in rebuilt.stats().items() if k not in ("bytes", "unmerged_messages")}


def test_small_block_ranking_is_exact_against_a_single_block_index(tmp_path, monkeypatch):
    docs = corpus()
    reference = SearchIndex(tmp_path / "reference.sqlite")
    reference.rebuild(docs, SESSIONS)
    expected = results(reference)
    monkeypatch.setattr(postings, "BLOCK_POSTINGS", 4)
    blocked = SearchIndex(tmp_path / "blocked.sqlite")
    blocked.rebuild(docs, SESSIONS)
    assert results(blocked) == expected


def test_a_committed_message_is_found_at_once_by_this_and_another_handle(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.rebuild(corpus(50), SESSIONS)
    assert index.add([message(1000, "s3", "the quokka escaped")]) == 1
    assert index.add([message(1000, "s3", "the quokka escaped")]) == 0  # same id: nothing new
    assert [hit.message_id for hit in index.search("quokka").hits] == ["m1000"]
    other = SearchIndex(tmp_path / "s.sqlite")
    assert [hit.message_id for hit in other.search("quokka").hits] == ["m1000"]
    other.add([message(1001, "s4", "a second quokka")])
    assert {hit.message_id for hit in index.search("quokka", limit=5).hits} == {"m1000", "m1001"}


def test_another_process_writing_the_same_index_is_seen(tmp_path):
    path = tmp_path / "s.sqlite"
    index = SearchIndex(path)
    index.add([message(1, "s1", "local words")])
    script = textwrap.dedent(f"""
        from hermeslab.search import MessageDoc, SearchIndex
        SearchIndex({str(path)!r}).add([MessageDoc("m2", "s2", 0, "user", 1.0, "remote wombat words")])
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert [hit.session_id for hit in index.search("wombat").hits] == ["s2"]


def test_hits_are_deduplicated_by_lineage_root_and_the_current_lineage_is_left_out(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "root", "kiwi planning notes"), message(2, "child", "kiwi kiwi follow up"),
               message(3, "grandchild", "kiwi again"), message(4, "other", "a kiwi elsewhere")],
              [SessionInfo("root", title="Kiwi project", started_at=1.7e9), SessionInfo("child", parent_id="root"),
               SessionInfo("grandchild", parent_id="child"), SessionInfo("other", title="Other")])
    hits = index.search("kiwi", limit=5).hits
    assert [hit.root_session_id for hit in hits] == ["root", "other"]
    assert hits[0].session_id == "child"  # the best message of the lineage, reported under its root
    assert hits[0].title == "Kiwi project" and hits[0].started_at.year == 2023
    assert [hit.root_session_id for hit in index.search("kiwi", exclude_session="grandchild").hits] == ["other"]
    assert len(index.search("kiwi", exclude_session="unknown-session").hits) == 2


def test_a_cycle_in_the_lineage_still_deduplicates(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "a", "loop topic"), message(2, "b", "loop topic too"), message(3, "c", "loop")],
              [SessionInfo("a", parent_id="b"), SessionInfo("b", parent_id="a"), SessionInfo("c", parent_id="b")])
    hits = index.search("loop", limit=5).hits
    assert [hit.root_session_id for hit in hits] == ["a"]
    assert index.search("loop", exclude_session="c").hits == []


def test_a_parent_set_later_regroups_the_hits(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "x", "lemur"), message(2, "y", "lemur")])
    assert len(index.search("lemur", limit=5).hits) == 2
    index.add([], [SessionInfo("y", parent_id="x")])
    assert [hit.root_session_id for hit in index.search("lemur", limit=5).hits] == ["x"]


def test_snippets_carry_the_neighbouring_messages(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "s", "first question about llamas", seq=0),
               message(2, "s", "the answer mentions the ocelot twice: ocelot", seq=1),
               message(3, "s", "thanks", seq=2), message(4, "t", "unrelated", seq=0)])
    (hit,) = index.search("ocelot").hits
    assert f"{OPEN}ocelot{CLOSE}" in hit.snippet
    assert hit.before.text == "first question about llamas" and hit.before.role == "assistant"
    assert hit.after.text == "thanks"
    (edge,) = index.search("llamas").hits
    assert edge.before is None and edge.after.text.startswith("the answer")


def test_phrases_are_required_in_order(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "a", "the red panda sleeps"), message(2, "b", "panda and red pens"),
               message(3, "c", "red red red panda panda")])
    assert {hit.session_id for hit in index.search('"red panda"', limit=5).hits} == {"a", "c"}
    assert [hit.session_id for hit in index.search('"panda red"', limit=5).hits] == []
    assert index.search('"missingword panda"').hits == []


def test_cjk_queries_use_bigrams_and_a_lone_character_scans(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "a", "我们明天去大别山项目现场"), message(2, "b", "别山大的字序不同"),
               message(3, "c", "我家的猫很可爱"), message(4, "d", "plain english")])
    assert [hit.session_id for hit in index.search("大别山").hits] == ["a"]
    assert f"{OPEN}大别山{CLOSE}" in index.search("大别山").hits[0].snippet
    lone = index.search("猫")
    assert [hit.session_id for hit in lone.hits] == ["c"] and lone.exact
    assert index.search("狗").hits == []


def test_hostile_queries_never_break_the_index(tmp_path):
    from test_search_text import HOSTILE

    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "a", "drop table docs near foo"), message(2, "b", "select * from docs")])
    for query in HOSTILE:
        index.search(query, limit=3)
    assert index.search("'; DROP TABLE docs; --", limit=3).hits
    assert index.stats()["messages"] == 2


def test_bad_arguments_get_specific_errors(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    with pytest.raises(ValueError, match="limit"):
        index.search("x", limit=0)
    with pytest.raises(TypeError, match="query"):
        index.search(42)
    with pytest.raises(TypeError, match="MessageDoc"):
        index.add(["not a doc"])
    with pytest.raises(ValueError, match="message_id"):
        MessageDoc("", "s", 0, "user", 0.0, "x")
    (tmp_path / "junk.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SearchIndexError, match="rebuild"):
        SearchIndex(tmp_path / "junk.sqlite")


def test_an_empty_index_and_empty_queries_answer_nothing(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    assert index.search("anything").hits == []
    index.add([message(1, "a", "words")])
    assert index.search("   ").hits == [] and index.search("***").hits == []


def test_a_rebuild_by_another_handle_is_picked_up(tmp_path):
    first = SearchIndex(tmp_path / "s.sqlite")
    first.add([message(1, "a", "old capybara")])
    SearchIndex(tmp_path / "s.sqlite").rebuild([message(7, "z", "new capybara")])
    assert [hit.message_id for hit in first.search("capybara").hits] == ["m7"]


def test_scores_count_unmerged_messages_in_document_frequencies(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite", merge_docs=1000)
    index.rebuild([message(i, f"s{i}", "tapir" if i < 2 else "other") for i in range(10)])
    index.add([message(20, "s20", "tapir")])
    hits = index.search("tapir", limit=5).hits
    assert len(hits) == 3
    # N = 11, df = 3, every message has length 1 → factor 1
    assert all(math.isclose(hit.score, math.log(1 + (11 - 3 + 0.5) / 3.5)) for hit in hits)


def test_merges_run_in_the_background_and_leave_the_same_answers(tmp_path):
    docs = corpus(200)
    index = SearchIndex(tmp_path / "s.sqlite", merge_docs=50)
    for start in range(0, len(docs), 10):
        index.add(docs[start:start + 10], SESSIONS if start == 0 else ())
    assert index.wait_for_merge(timeout=60) and not index.merging
    assert index.stats()["unmerged_messages"] < 50
    rebuilt = SearchIndex(tmp_path / "rebuilt.sqlite")
    rebuilt.rebuild(docs, SESSIONS)
    assert results(index) == results(rebuilt)


def test_a_merge_overtaken_by_another_is_dropped(tmp_path, small_blocks, monkeypatch):
    docs = corpus(120)
    index = SearchIndex(tmp_path / "s.sqlite", merge_docs=10_000)
    index.add(docs, SESSIONS)
    first, second = (storage.connect(index.path, timeout=5.0) for _ in range(2))
    overtaken = []
    merge_term = merge._merge_term

    def meanwhile(*args, **kwargs):  # another process merges while this one is computing
        if not overtaken:
            overtaken.append(0)
            overtaken[0] = merge.merge_pending(second)
        merge_term(*args, **kwargs)

    monkeypatch.setattr(merge, "_merge_term", meanwhile)
    assert merge.merge_pending(first) == 0
    assert overtaken[0] > 0 and index.stats()["unmerged_messages"] == 0
    assert merge.merge_pending(first) == 0  # nothing left to do
    rebuilt = SearchIndex(tmp_path / "rebuilt.sqlite")
    rebuilt.rebuild(docs, SESSIONS)
    assert results(index) == results(rebuilt)


def test_a_new_handle_loads_unmerged_postings_without_tokenising(tmp_path, monkeypatch):
    docs = corpus(100)
    SearchIndex(tmp_path / "s.sqlite", merge_docs=10_000).add(docs, SESSIONS)
    expected = results(SearchIndex(tmp_path / "s.sqlite"))

    def no_tokenising(text):
        raise AssertionError("unmerged messages were tokenised again")

    monkeypatch.setattr(delta, "analysed", no_tokenising)
    assert results(SearchIndex(tmp_path / "s.sqlite")) == expected
    monkeypatch.undo()
    # Messages written without their postings (by an older version) are tokenised from their text.
    con = storage.connect(tmp_path / "s.sqlite", timeout=5.0)
    con.execute("DELETE FROM pending WHERE first > 0")
    assert results(SearchIndex(tmp_path / "s.sqlite")) == expected


def test_closing_stops_a_background_merge(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite", merge_docs=20)
    index.add(corpus(100), SESSIONS)
    index.close()
    assert not index.merging
    reopened = SearchIndex(tmp_path / "s.sqlite")
    assert len(reopened.search("common", limit=5).hits) == 5


_PHRASE_WORDS = ["data", "used", "lost", "the", "Data", "data_used", "used.", "\n", "大别", "山"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(_PHRASE_WORDS), max_size=12), min_size=1, max_size=25),
       st.lists(st.sampled_from(_PHRASE_WORDS), min_size=2, max_size=3), st.booleans())
def test_phrase_hits_are_exactly_the_messages_holding_the_phrase(tmp_path_factory, texts, words, bulk):
    """The successor masks only ever turn away messages without the phrase."""
    docs = [message(i, f"s{i}", " ".join(text)) for i, text in enumerate(texts)]
    index = SearchIndex(tmp_path_factory.mktemp("phrases") / "s.sqlite", merge_docs=10_000)
    if bulk:
        index.rebuild(docs)
    else:
        index.add(docs)
    query = parse_query('"' + " ".join(words) + '"')
    if not query.phrases:
        return
    found = {hit.message_id for hit in index.search(query, limit=50).hits}
    assert found == {doc.message_id for doc in docs if query.matches(doc.text)}


def test_blocks_stored_without_successor_masks_still_answer_phrases(tmp_path):
    docs = corpus(120)
    index = SearchIndex(tmp_path / "s.sqlite")
    index.rebuild(docs, SESSIONS)
    expected = results(index)
    con = storage.connect(tmp_path / "s.sqlite", timeout=5.0)
    con.execute("UPDATE blocks SET nexts = NULL")  # as an older version writes them
    assert results(SearchIndex(tmp_path / "s.sqlite")) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 3), max_size=4), min_size=1, max_size=30),
       st.lists(st.integers(1, 6), min_size=1, max_size=30), st.integers(0, 35))
def test_the_delta_holds_exactly_the_postings_above_the_merge_mark(messages, batches, mark):
    """Segments appended in batches, folded together and cut at a merge mark keep every posting once."""
    from collections import Counter

    held, position = delta.Delta(0), 0
    for size in batches:
        if position >= len(messages):
            break
        part = messages[position:position + size]
        segment = delta.Segment.from_counts(position, [Counter(found) for found in part],
                                            [{term: tf for term, tf in found.items()} for found in part])
        held.append(delta.Segment.decode(position, position + len(part), *segment.encode()))
        position += len(part)
    held.drop_below(mark)
    for term in "abcdef":
        expected = [(doc, found[term]) for doc, found in enumerate(messages[:position])
                    if term in found and doc >= mark]
        docs, tfs, nexts = held.postings(term)
        assert list(zip(docs.tolist(), tfs.tolist())) == expected
        assert nexts.tolist() == [tf for _, tf in expected]  # the masks travel with their postings
        assert held.df(term) == len(expected)
    # Each segment is more than twice the size of the next, so there are few of them.
    assert held.upto == max(position, mark) and len(held.segments) <= position.bit_length() + 1


def test_phrases_and_words_are_found_across_underscores(tmp_path):
    index = SearchIndex(tmp_path / "s.sqlite")
    index.add([message(1, "a", "    self.fetch_command(subcommand).run_from_argv(self.argv)"),
               message(2, "b", '{"first_name": "James", "last_name": "Lee"}'),
               message(3, "c", "`__rdiv__` (if Python 2)"), message(4, "d", "the data used today"),
               message(5, "e", "run the argv parser from here")])
    assert [hit.session_id for hit in index.search('"run from"').hits] == ["a"]
    assert [hit.session_id for hit in index.search('"name James"').hits] == ["b"]
    assert [hit.session_id for hit in index.search("rdiv").hits] == ["c"]
    assert [hit.session_id for hit in index.search('"data_used"').hits] == ["d"]


def test_empty_successor_masks_leave_phrases_to_the_text_check(tmp_path):
    """Indexes written before ``_`` separated units hold no masks for the pieces of ``snake_case`` words."""
    docs = corpus(120)
    index = SearchIndex(tmp_path / "s.sqlite")
    index.rebuild(docs, SESSIONS)
    expected = {hit.message_id for hit in index.search('"get_user_name"', limit=50).hits}
    assert len(expected) > 1
    con = storage.connect(tmp_path / "s.sqlite", timeout=5.0)
    con.execute("UPDATE blocks SET nexts = zeroblob(length(nexts))")
    con.close()
    reopened = SearchIndex(tmp_path / "s.sqlite")
    assert {hit.message_id for hit in reopened.search('"get_user_name"', limit=50).hits} == expected
