"""The search index file: incremental adds, merges, rebuilds, lineage, exclusion, snippets, CJK, processes."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

from hermeslab.search import MessageDoc, SearchIndex, SearchIndexError, SessionInfo
from hermeslab.search import postings
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
    incremental = SearchIndex(tmp_path / "incremental.sqlite", merge_docs=37)
    for start in range(0, len(docs), 7):
        incremental.add(docs[start:start + 7], SESSIONS if start == 0 else ())
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
