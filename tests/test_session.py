"""Session titles and the compression record of SessionManager."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.compactor import Compaction
from hermeslab.core.events import CompressionEvent, Event
from hermeslab.core.tokens import default_counter
from hermeslab.session import Session, SessionManager, next_title, title_from


def whole_text_title(text: str | None, limit: int = 60) -> str:
    """The title as computed from the whole text collapsed: what ``title_from`` must return."""
    words = " ".join((text or "").split())
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


_SPACES = st.sampled_from([" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2003", "\x1c", " " * 300])
_WORDS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
_PIECES = st.lists(st.one_of(_WORDS, _SPACES, st.text(max_size=400)), max_size=40)


@settings(max_examples=400, deadline=None)
@given(pieces=_PIECES, limit=st.integers(min_value=-3, max_value=120))
def test_title_is_that_of_the_whole_text(pieces: list[str], limit: int) -> None:
    text = "".join(pieces)
    assert title_from(text, limit) == whole_text_title(text, limit)


@settings(max_examples=50, deadline=None)
@given(word=st.text(alphabet="ab ", min_size=1, max_size=5), repeat=st.integers(min_value=1, max_value=5000),
       lead=st.integers(min_value=0, max_value=1000), limit=st.integers(min_value=1, max_value=80))
def test_title_of_long_and_whitespace_heavy_texts(word: str, repeat: int, lead: int, limit: int) -> None:
    for text in (" " * lead + word * repeat, "\n" * (4 * limit) + word * repeat, word * repeat + " " * lead):
        assert title_from(text, limit) == whole_text_title(text, limit)


def test_title_of_no_text() -> None:
    assert title_from(None) == title_from("") == ""
    assert title_from("  fix   the\nbug  ") == "fix the bug"
    assert title_from("x" * 61) == "x" * 59 + "…"


class _Watched(str):
    """A text that records being split whole."""

    splits = 0

    def split(self, *args: Any, **kwargs: Any) -> list[str]:
        _Watched.splits += 1
        return super().split(*args, **kwargs)


def test_a_long_task_text_is_not_split_whole() -> None:
    _Watched.splits = 0
    assert title_from(_Watched("solve this issue " * 10_000)) == ("solve this issue " * 4)[:59].rstrip() + "…"
    assert _Watched.splits == 0


def _manager(wanted: bool, sized: list[int]) -> tuple[SessionManager, list[tuple[type[Event], dict[str, Any]]]]:
    emitted: list[tuple[type[Event], dict[str, Any]]] = []

    def size(messages: list[dict[str, Any]]) -> int:
        sized.append(len(messages))
        return 10 * len(messages)

    manager = SessionManager(
        Session(system_prompt="be brief"), emit=lambda kind, **fields: emitted.append((kind, fields)),
        wants=lambda kind: wanted and kind is CompressionEvent, counter=default_counter,
        started_fields=dict, prompt_size=size)
    return manager, emitted


def _compaction(messages: list[dict[str, Any]]) -> Compaction:
    result = SimpleNamespace(aborted=False, condensed=2, plan=None, summary_text="what happened",
                             tokens_before=900, tokens_after=300, fallback_used=False,
                             record={"dropped_indices": [1, 2]})
    return Compaction(trigger="threshold", messages=messages, result=result, verdict={}, duration_ms=1.0,
                      window=1000)


def test_compression_is_measured_for_the_log_only_when_someone_listens() -> None:
    for wanted in (True, False):
        sized: list[int] = []
        manager, emitted = _manager(wanted, sized)
        for text in ("one", "two", "three"):
            manager.session.append({"role": "user", "content": text})
        compacted = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "summary"}]
        assert manager.apply(_compaction(compacted), strategy="summary", in_place=True) == "in_place"
        assert manager.session.messages == compacted
        records = [fields for kind, fields in emitted if kind is CompressionEvent]
        if wanted:
            assert sized == [4, 2]
            assert len(records) == 1 and records[0]["prompt_tokens_before"] == 40
            assert records[0]["messages_dropped"] == 2 and records[0]["mode"] == "in_place"
        else:
            assert sized == [] and records == []


def test_rotation_without_listeners_still_moves_to_the_child() -> None:
    sized: list[int] = []
    manager, _ = _manager(False, sized)
    manager.session.append({"role": "user", "content": "fix   the bug"})
    parent = manager.session.id
    compacted = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "summary"}]
    assert manager.apply(_compaction(compacted), strategy="summary", in_place=False) == "rotation"
    assert manager.session.parent_session_id == parent
    assert manager.session.title == "fix the bug #2" and manager.session.messages == compacted
    assert sized == []
    assert manager.apply(_compaction(compacted), strategy="summary", in_place=False) == "rotation"
    assert manager.session.title == "fix the bug #3"


@pytest.mark.parametrize("title, continued", [
    ("my project", "my project #2"),
    ("my project #2", "my project #3"),
    ("my project #9", "my project #10"),
    ("release #2 notes", "release #2 notes #2"),  # a number inside the name is part of the name
    ("v2 #1", "v2 #2"),
    ("issue #12 #4", "issue #12 #5"),
    ("my project (2)", "my project (2) #2"),  # parentheses are not Hermes's numbering
])
def test_continued_sessions_are_numbered_as_hermes_numbers_them(title, continued) -> None:
    assert next_title(title, "unused") == continued


def test_a_session_without_a_title_is_named_after_its_first_ask() -> None:
    assert next_title(None, "fix the bug") == next_title("", "fix the bug") == "fix the bug #2"
    assert next_title(None, "   ") == "session #2"
