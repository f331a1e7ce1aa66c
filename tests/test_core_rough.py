"""Hermes's rough estimate at its edges: a text that is missing costs nothing, an empty one nothing either."""

from hypothesis import given
from hypothesis import strategies as st

from hermeslab.core.rough import rough_message_tokens, rough_tokens


def test_a_missing_text_costs_no_tokens():
    assert rough_tokens(None) == 0
    assert rough_tokens("") == 0


@given(st.text())
def test_a_text_costs_its_characters_over_four_rounded_up(text):
    assert rough_tokens(text) == -(-len(text) // 4)


def test_a_message_without_content_costs_only_its_framing():
    assert rough_message_tokens({"role": "assistant", "content": None}) == rough_message_tokens(
        {"role": "assistant", "content": ""})
