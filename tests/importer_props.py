"""Malformed versions of real samples, and the check every importer must pass on them.

A real sample is broken the ways files break: a value somewhere replaced by
another JSON value of any kind, a key dropped, or the file cut off part-way.
Whatever comes in, an importer answers with recordings the format accepts or
one-line skips, and never raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from hermeslab.eval.importers import ImportOptions, SourceFormat
from hermeslab.recordings import Recording, validate_recording

JUNK = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=6)


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``value`` (the root included)."""
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _places(inner, path + (key,))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _places(inner, path + (index,))
    return found


def _replaced(value: Any, path: tuple, new: Any, drop: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if not rest and drop:
        del copy[head]
        return copy
    copy[head] = _replaced(value[head], rest, new, drop)
    return copy


@st.composite
def broken_json(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one place replaced by junk or dropped."""
    path = draw(st.sampled_from(_places(value)))
    return _replaced(value, path, draw(JUNK), drop=bool(path) and draw(st.booleans()))


@st.composite
def broken_jsonl(draw: st.DrawFn, lines: list[Any]) -> bytes:
    """JSON Lines with one line broken, or the whole text cut off part-way."""
    if draw(st.booleans()):
        index = draw(st.integers(0, len(lines) - 1))
        lines = lines[:index] + [draw(broken_json(lines[index]))] + lines[index + 1:]
        return "".join(json.dumps(line) + "\n" for line in lines).encode()
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return text[:draw(st.integers(0, len(text)))]


def read_all(source_format: SourceFormat, path: Path) -> list:
    """The outcomes of reading ``path``, checked: recordings are valid, skips are one line with a place."""
    outcomes = list(source_format.read(path, ImportOptions()))
    for outcome in outcomes:
        if isinstance(outcome, Recording):
            assert validate_recording(outcome.to_dict()) == []
        else:
            assert outcome.where and outcome.reason and "\n" not in outcome.reason
    return outcomes
