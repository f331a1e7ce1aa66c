"""The C repr-length counter behind the chars/4 estimate: exactly ``len(repr(text))`` and the newlines."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.core import rough
from hermeslab.core._reprlen import ascii_repr_length

#: Every character a str repr treats specially, and plain ones around them.
ASCII = st.text(alphabet=st.sampled_from([chr(c) for c in range(128)]), max_size=300)


@settings(max_examples=2_000, deadline=None)
@given(ASCII)
def test_an_ascii_text_gives_its_repr_length_and_newlines(text):
    assert ascii_repr_length(text) == (len(repr(text)), text.count("\n"))


@pytest.mark.parametrize("text", ["", "'", '"', "'\"", "it's", 'say "hi"', "\x7f\x00\\\t\r\n", "a" * 100_003])
def test_quote_choice_and_escapes(text):
    assert ascii_repr_length(text) == (len(repr(text)), text.count("\n"))


@given(st.text(min_size=1).filter(lambda text: not text.isascii()))
def test_any_other_text_is_left_to_repr(text):
    assert ascii_repr_length(text) is None


def test_a_non_string_is_refused_clearly():
    with pytest.raises(TypeError, match="needs a str, got bytes"):
        ascii_repr_length(b"abc")


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=3_000) | ASCII)
def test_the_estimate_measures_long_texts_as_repr_does(text):
    assert rough.str_repr_length(text) == len(repr(text))


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=3_000) | ASCII)
def test_the_fallback_without_a_compiler_measures_as_repr_does(text):
    size, newlines = rough._repr_length_and_newlines_in_python(text)
    assert size == len(repr(text)) and newlines in (None, text.count("\n"))
