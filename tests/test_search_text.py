"""Search text handling: the tokenizer, query sanitising (hostile input), snippets, message text."""

from __future__ import annotations

import json
import zlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.search.documents import message_text
from hermeslab.search.query import MAX_QUERY_CHARS, MAX_TERMS, parse_query
from hermeslab.search.snippets import CLOSE, OPEN, preview, snippet
from hermeslab.search.tokens import (MAX_TERM_CHARS, analysed, bigrams, counts_of, successor_bit, successors, terms,
                                     unit_key)


def test_words_are_lower_cased_and_identifiers_also_give_their_parts():
    assert sorted(terms("getUserName")) == ["get", "getusername", "name", "user"]
    assert sorted(terms("get_user_name")) == ["get", "get_user_name", "name", "user"]
    assert sorted(terms("HTTPServer")) == ["http", "httpserver", "server"]
    assert terms("Hello WORLD") == ["hello", "world"]  # capitalised or upper-case words have no parts
    # the pieces between underscores are parts too, beside their camel-case and digit pieces
    assert sorted(terms("__init__ test_v2")) == ["2", "__init__", "init", "test", "test_v2", "v", "v2"]


def test_paths_and_dotted_or_hyphenated_names_are_indexed_whole_and_in_pieces():
    found = set(terms("edit src/hermeslab/agent.py and os.path.join for chat-send v1.2.3"))
    assert {"src", "hermeslab", "agent.py", "agent", "py", "os.path.join", "os", "path", "join",
            "chat-send", "chat", "send", "v1.2.3", "v1"} <= found
    assert "src/hermeslab/agent.py" not in found


def test_term_frequencies_and_length_count_repeats():
    counts, length, _ = analysed("the cat and the hat, the end")
    assert counts["the"] == 3 and counts["cat"] == 1
    assert length == 7


def test_unsegmented_scripts_become_bigrams():
    assert bigrams("大别山") == ["大别", "别山"]
    assert bigrams("猫") == []
    found = terms("大别山项目 hello世界 ภาษา")
    assert {"大别", "别山", "山项", "项目", "hello", "世界", "ภา", "าษ", "ษา"} <= set(found)
    assert "hello世界" not in found


def test_long_tokens_are_cut_on_both_sides():
    blob = "a" * 300
    assert all(len(term) <= MAX_TERM_CHARS for term in terms(blob))
    assert set(terms(blob)) & set(parse_query(blob).terms)


def test_unit_key_makes_phrases_substring_checks():
    assert " exact phrase " in unit_key("An EXACT, phrase!")
    assert " 大 别 山 " in unit_key("在大别山里")


HOSTILE = [
    '"', '""', '"unbalanced', 'a"b"c"d', "NEAR(a b)", "a NEAR/3 b", "*", "***", "foo*", "-foo", "- -",
    "(", ")", "((a)", "a AND", "OR b", "NOT", "a:b", "col:term", "^x", "{a}", "+a", "\x00", "a\x00b",
    "'; DROP TABLE docs; --", "% _ \\", "\\", "'", "a'b", "\u201csmart quotes\u201d", "\u00ab\u00bb",
    "x" * 10_000, "word " * 5_000, '"' * 9_999, "\ud800", "🙂", "\n\t\r",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_queries_parse_to_plain_terms(text):
    query = parse_query(text)
    assert len(query.text) <= MAX_QUERY_CHARS
    assert "\x00" not in query.text
    assert len(query.terms) <= MAX_TERMS
    assert all(term for term in query.terms)


def test_query_words_are_optional_and_quoted_phrases_required():
    query = parse_query('docker "compose file" AND')
    assert query.terms[:2] == ("compose", "file")
    assert set(query.terms) == {"compose", "file", "docker", "and"}
    assert query.required == {"compose", "file"}
    assert query.phrases == (" compose file ",)
    assert query.matches("The Compose-file was wrong")
    assert not query.matches("the file for compose")


# Cased, caseless, joined, unsegmented (with a combining mark), and letters whose lower case is special.
_ALPHABET = "aAbBzZ_19 .-,\n\t大别山猫กข\u0e31İıſΣσςK"
_TEXTS = st.text(alphabet=_ALPHABET, max_size=60)


@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXTS, max_size=4), st.lists(_TEXTS, min_size=1, max_size=2))
def test_a_phrase_matches_exactly_when_its_key_is_in_the_texts_key(texts, phrases):
    query = parse_query(" ".join(f'"{phrase}"' for phrase in phrases))
    expected = [all(phrase_key in unit_key(text) for phrase_key in query.phrases) for text in texts]
    assert [query.matches(text) for text in texts] == expected
    assert query.matching(texts) == expected  # all texts searched at once


@settings(max_examples=400, deadline=None)
@given(_TEXTS, st.lists(_TEXTS, max_size=3))
def test_counting_chosen_terms_equals_counting_all_of_them(text, sources):
    wanted = {term for source in sources + [text[:8]] for term in terms(source)}
    everything = Counter(terms(text))
    assert counts_of(text, wanted) == {term: everything[term] for term in wanted if everything[term]}


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_indexing_a_text_gives_its_terms_and_what_follows_each_unit(text):
    counts, length, masks = analysed(text)
    assert counts == Counter(terms(text)) and length == len(terms(text))
    assert masks == successors(text)
    found = unit_key(text).split()
    assert set(masks) == set(found)
    for unit, after in zip(found, found[1:]):
        assert masks[unit] & successor_bit(after)


def test_successor_masks_are_the_same_in_every_process():
    assert successor_bit("used") == 1 << (zlib.crc32(b"used") & 15)
    assert successors("data used, data lost.")["data"] == successor_bit("used") | successor_bit("lost")
    assert successors("data used, data lost.")["lost"] == 0


def test_unbalanced_quotes_are_ignored_and_operators_are_words():
    assert parse_query('"unbalanced words').phrases == ()
    assert parse_query("NEAR(a b)").terms == ("near", "a", "b")
    assert parse_query("-foo *").terms == ("foo",)


def test_cjk_runs_are_required_phrases_and_a_lone_character_has_no_term():
    query = parse_query("大别山")
    assert query.terms == ("大别", "别山") and query.required == {"大别", "别山"}
    assert query.matches("去大别山玩") and not query.matches("别大山 大别")
    lone = parse_query("猫")
    assert lone.terms == () and lone.phrases == (" 猫 ",) and not lone.empty


def test_a_non_string_query_is_a_type_error():
    with pytest.raises(TypeError, match="string"):
        parse_query(None)


def test_snippet_marks_matches_in_the_densest_window():
    text = "filler words here. " * 40 + "The docker daemon lost its network bridge. " + "tail. " * 40
    excerpt = snippet(text, parse_query("docker network"))
    assert f"{OPEN}docker{CLOSE}" in excerpt and f"{OPEN}network{CLOSE}" in excerpt
    assert excerpt.startswith("…") and excerpt.endswith("…")
    assert len(excerpt) < 320


def test_snippet_marks_whole_cjk_words_and_identifier_parts():
    assert f"{OPEN}大别山{CLOSE}" in snippet("我们去大别山项目", parse_query("大别山"))
    assert f"{OPEN}getUserName{CLOSE}" in snippet("call getUserName()", parse_query("user"))


def test_snippet_without_a_match_is_the_preview():
    assert snippet("nothing to see", parse_query("zebra")) == "nothing to see"
    assert preview("a\n\n b   c") == "a b c"
    assert preview("x" * 500).endswith("…") and len(preview("x" * 500)) == 201


def test_message_text_covers_content_tool_calls_and_tool_names():
    calls = json.dumps([{"id": "c1", "type": "function",
                         "function": {"name": "read_file", "arguments": json.dumps({"path": "a.py"})}}])
    assert message_text("assistant", "Reading it.", calls) == 'Reading it.\nread_file({"path": "a.py"})'
    assert message_text("tool", "file body", None, "read_file") == "[read_file]\nfile body"
    assert message_text("user", '[{"type": "text", "text": "hello"}]') == "hello"
    assert message_text("user", None) == ""


def test_underscores_separate_the_words_of_a_phrase_as_other_punctuation_does():
    assert unit_key("self.fetch(x).run_from_argv()") == " self fetch x run from argv "
    assert parse_query('"user name"').matches("call get_user_name() first")
    assert parse_query('"L1002 data"').matches('{"line_id": "L1002", "data_used_gb": "15.1"}')
    assert parse_query('"name james"').matches('{"first_name": "James"}')
    assert not parse_query('"user name"').matches("username")  # letters and digits still make one word


def test_a_phrase_requires_its_words_not_the_identifier_that_joins_them():
    query = parse_query('"data_used" "agent.py"')
    assert query.required == {"data", "used", "agent", "py"}
    assert {"data_used", "agent.py"} <= set(query.terms)  # still ranked
    assert query.matches("the data used by agent py")
