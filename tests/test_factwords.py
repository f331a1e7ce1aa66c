"""The retention metric's candidate facts: the words of a text without the plain ones, which are never facts.

The C pass must find exactly the words the Python definition finds
(``metrics._words``: separators, three clause-end passes, the trailing strip,
``str.split``), on any text; the plain words it skips must never be facts.
"""

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.eval import metrics

from c_helpers import c_helper

_factwords, needs_c = c_helper("hermeslab.eval._factwords")

#: The characters the definition treats specially, whitespace that only ``str.split`` breaks at, and word
#: characters of every width (Latin-1, two-byte, four-byte).
SPECIAL = list("\"'`()[]{}<>;=|!?*\\\n\r\t .,:") + ["\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2003",
                                                    "\u3000", "\u2028"]
WORDY = list("aZz09_-/@#$") + ["é", "ß", "ẞ", "中", "😀", "\x00", "\x7f"]
TEXTS = st.text(alphabet=st.sampled_from(SPECIAL + WORDY), max_size=200) | st.text(max_size=200)


def by_definition(text: str) -> frozenset[str]:
    return frozenset(word for word in metrics._words(text) if metrics._PLAIN_WORD.fullmatch(word) is None)


@needs_c
@settings(max_examples=3_000, deadline=None)
@given(TEXTS)
def test_the_c_pass_finds_the_words_the_definition_finds(text):
    assert _factwords.candidate_words(text) == by_definition(text)


@pytest.fixture(params=[pytest.param("c", marks=needs_c), "python"])
def candidate_words(request, monkeypatch):
    """``metrics.candidate_words`` through the C pass, and through the fallback an install without a compiler uses."""
    if request.param == "python":
        monkeypatch.setattr(metrics, "_candidate_words", None)
    else:
        monkeypatch.setattr(metrics, "_candidate_words", _factwords.candidate_words)
    return metrics.candidate_words


@pytest.mark.parametrize("text, words", [
    ("", set()),
    ("see /hubs/leeds.csv.", {"/hubs/leeds.csv"}),
    ("Parcel P-4711, depot D-0815: held at 10:40.", {"P-4711", "D-0815", "10:40"}),
    ("foo., bar", {"foo."}),  # "., " loses only the comma: the passes run in the order . , :
    (":,. x9", {"x9"}),
    ("v2.3.1:\x0b.,", {"v2.3.1:"}),  # a vertical tab breaks words but is no space to a clause end
    ("Value value VALUE ENOENT parseArgs", {"VALUE", "ENOENT", "parseArgs"}),
    ("café Über 中文 x", {"café", "Über", "中文"}),
    ("Check P-4711 at /hubs/leeds.csv, then order_4711: done.", {"P-4711", "/hubs/leeds.csv", "order_4711"}),
])
def test_examples(candidate_words, text, words):
    assert candidate_words(text) == words == by_definition(text)


#: ``[A-Za-z][a-z]{0,40}``, built from its two parts (a third of the CPU time of ``st.from_regex``).
PLAIN_WORDS = st.builds(str.__add__, st.sampled_from(string.ascii_letters),
                        st.text(alphabet=string.ascii_lowercase, max_size=40))


@settings(max_examples=2_000, deadline=None)
@given(PLAIN_WORDS)
def test_a_plain_word_is_never_a_fact(word):
    assert not metrics.is_fact(word)


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_every_fact_among_a_texts_words_is_a_candidate(text):
    facts = {word for word in metrics.word_set(text) if metrics.is_fact(word)}
    assert facts <= metrics.candidate_words(text)


@needs_c
def test_a_non_string_is_refused_clearly():
    with pytest.raises(TypeError, match="needs a str, got bytes"):
        _factwords.candidate_words(b"abc")
