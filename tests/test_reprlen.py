"""The C repr-length counter behind the chars/4 estimate: exactly ``len(repr(text))`` and the newlines."""

from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.core import rough

from c_helpers import c_helper

_reprlen, needs_c = c_helper("hermeslab.core._reprlen")

#: Every character a str repr treats specially, and plain ones around them.
ASCII = st.text(alphabet=st.sampled_from([chr(c) for c in range(128)]), max_size=300)


@needs_c
@settings(max_examples=2_000, deadline=None)
@given(ASCII)
def test_an_ascii_text_gives_its_repr_length_and_newlines(text):
    assert _reprlen.ascii_repr_length(text) == (len(repr(text)), text.count("\n"))


@needs_c
@pytest.mark.parametrize("text", ["", "'", '"', "'\"", "it's", 'say "hi"', "\x7f\x00\\\t\r\n", "a" * 100_003])
def test_quote_choice_and_escapes(text):
    assert _reprlen.ascii_repr_length(text) == (len(repr(text)), text.count("\n"))


@needs_c
@given(st.text(min_size=1).filter(lambda text: not text.isascii()))
def test_any_other_text_is_left_to_repr(text):
    assert _reprlen.ascii_repr_length(text) is None


@needs_c
def test_a_non_string_is_refused_clearly():
    with pytest.raises(TypeError, match="needs a str, got bytes"):
        _reprlen.ascii_repr_length(b"abc")


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=3_000) | ASCII)
def test_the_estimate_measures_long_texts_as_repr_does(text):
    assert rough.str_repr_length(text) == len(repr(text))


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=3_000) | ASCII)
def test_the_fallback_without_a_compiler_measures_as_repr_does(text):
    size, newlines = rough._repr_length_and_newlines_in_python(text)
    assert size == len(repr(text)) and newlines in (None, text.count("\n"))


#: Values a message can hold, nested: texts of every kind, numbers, None, booleans, lists and dicts.
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40) | ASCII,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8) | st.integers(), children,
                                                                      max_size=5),
    max_leaves=30)


@needs_c
@settings(max_examples=2_000, deadline=None)
@given(VALUES)
def test_repr_length_is_the_length_of_the_repr(value):
    assert _reprlen.repr_length(value) == len(repr(value))


@needs_c
def test_containers_inside_themselves_and_other_types_are_measured_as_repr_writes_them():
    loop: list = [1]
    loop.append(loop)
    home: dict = {"a": "b"}
    home["self"] = home

    class Shout(str):
        def __repr__(self):
            return "SHOUT"

    for value in (loop, home, {"k": Shout("x")}, [OrderedDict(a=1)], {(1, 2): {3, 4}}, [b"bytes", 2.5e-300, -7]):
        assert _reprlen.repr_length(value) == len(repr(value))


@needs_c
def test_a_failing_repr_inside_a_message_is_raised_as_repr_raises_it():
    class Broken:
        def __repr__(self):
            raise ValueError("no repr here")

    with pytest.raises(ValueError, match="no repr here"):
        _reprlen.repr_length({"role": "user", "content": [Broken()]})
