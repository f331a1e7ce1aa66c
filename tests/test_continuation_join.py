"""Pieces of a cut answer meet with the space the cut took, and a model going round stops being continued."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hermeslab.core.provider import ChatResponse
from hermeslab.recovery.log import RecoveryLog
from hermeslab.recovery.truncation import complete_truncated, join_continuation


def test_pieces_that_meet_between_words_get_a_space():
    assert join_continuation("It doesn't", "The rest") == "It doesn't The rest"
    assert join_continuation("It ended.", "Then more") == "It ended. Then more"
    assert join_continuation("one,", "two") == "one, two"


def test_pieces_that_meet_inside_a_word_or_number_or_at_a_mark_are_joined_as_they_are():
    assert join_continuation("contin", "uation") == "continuation"
    assert join_continuation("pi is 3.", "14") == "pi is 3.14"
    assert join_continuation("doesn'", "t") == "doesn't"
    assert join_continuation("the end", ".") == "the end."
    assert join_continuation("spaced ", "out") == "spaced out"
    assert join_continuation("日本", "語です") == "日本語です"
    assert join_continuation("NASA", "Rocks") == "NASARocks"  # inside an all-capital word


@given(st.text(), st.text())
def test_a_join_only_ever_adds_one_space_between_the_pieces(written, more):
    joined = join_continuation(written, more)
    assert joined in (written + more, f"{written} {more}")
    assert joined.startswith(written) and joined.endswith(more)


def cut(text: str) -> ChatResponse:
    return ChatResponse(message={"role": "assistant", "content": text}, finish_reason="length")


def test_continuations_are_joined_and_a_repeating_model_is_not_asked_again():
    pieces = iter([cut("Yes"), cut("Yes")])
    asked = []

    def ask(extra, cap):
        asked.append(cap)
        return next(pieces)

    response, still_cut = complete_truncated(cut("The answer doesn't"), ask, RecoveryLog(lambda action, outcome: None), limit=3, cap=64)
    assert response.message["content"] == "The answer doesn't Yes"
    assert still_cut and len(asked) == 2  # the second piece only repeated the text: no third call
