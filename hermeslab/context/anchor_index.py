"""The anchor index: exact identifiers harvested from summarised messages by pattern, never by a model.

A summary written by a model may paraphrase a commit hash, an issue number or
an error line, and a paraphrased identifier can no longer be searched for.
Hermes's lean compaction therefore appends to every summary a list of the
identifiers the summarised messages contained, found by regular expressions:
issue and pull-request numbers, commit hashes, branch names, file paths, error
lines, @-handles and URLs. Each category keeps its most frequent values first
(the most recently seen first among equals), up to a per-category cap, and the
categories stop being added once the index would pass a character budget.

The rules and numbers are Hermes's (``docs/presets.md`` cites them); the
heading and the closing note are hermeslab's own wording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

#: Characters the category lines of one index may take together.
INDEX_BUDGET_CHARS = 7_000
HEADING = "## Exact identifiers from the summarised turns"
CLOSING_NOTE = ("(Found by pattern in the summarised turns, not rewritten: quote them as they are, and search "
                "the session with them to get their context back.)")
#: Values never indexed: Hermes leaves out the handle of the owner of its own sessions.
NOISE = frozenset({"@teknium", "@teknium1"})


@dataclass(frozen=True)
class Category:
    """One kind of identifier: its label, its pattern, and how many distinct values it may list."""

    label: str
    pattern: re.Pattern[str]
    cap: int


CATEGORIES: tuple[Category, ...] = (
    Category("PRs/issues", re.compile(r"#[0-9]{3,6}\b"), 120),
    Category("commits", re.compile(r"\b[0-9a-f]{9,40}\b"), 40),
    Category("branches", re.compile(r"\b(?:fix|feat|docs|refactor|chore|salvage|ent)/[-A-Za-z0-9._/]{3,60}"), 40),
    Category("files", re.compile(r"\b[-\w./]+/[-\w.]+\.(?:py|ts|tsx|js|rs|md|yaml|yml|json|toml|sh)\b"), 80),
    Category("errors", re.compile(r"\b(?:[A-Z][a-zA-Z]*Error|Exception|ENOSPC|EACCES|SIGKILL|Traceback)\b[^\n]{0,90}"),
             40),
    Category("handles", re.compile(r"@[-A-Za-z0-9]{3,30}\b"), 40),
    Category("urls", re.compile(r"https?://[^\s)\"']{10,110}"), 30),
)


def _text_of(turns: Sequence[dict[str, Any]]) -> str:
    """The string contents of ``turns`` joined by newlines (list contents and tool arguments are not read)."""
    return "\n".join(content for content in (turn.get("content") for turn in turns)
                     if isinstance(content, str) and content)


def ranked_values(category: Category, text: str) -> list[tuple[str, int]]:
    """(value, count) of ``category`` in ``text``: most frequent first, then the most recently seen first."""
    counts: dict[str, int] = {}
    last_seen: dict[str, int] = {}
    for order, match in enumerate(category.pattern.finditer(text)):
        value = match.group(0).strip().rstrip(".,;:")
        if value.lower() in NOISE:
            continue
        counts[value] = counts.get(value, 0) + 1
        last_seen[value] = order
    ranked = sorted(counts, key=lambda value: (-counts[value], -last_seen[value]))
    return [(value, counts[value]) for value in ranked[:category.cap]]


def category_line(label: str, values: Iterable[tuple[str, int]]) -> str:
    """``label: a(x3), b`` — a count is written only for a value seen more than once."""
    return f"{label}: " + ", ".join(f"{value}(x{count})" if count > 1 else value for value, count in values)


def index_lines(turns: Sequence[dict[str, Any]], budget_chars: int = INDEX_BUDGET_CHARS) -> list[str]:
    """The category lines of the index, in category order, stopping at the first that would pass the budget."""
    text = _text_of(turns)
    if not text:
        return []
    lines: list[str] = []
    used = 0
    for category in CATEGORIES:
        values = ranked_values(category, text)
        if not values:
            continue
        line = category_line(category.label, values)
        if used + len(line) > budget_chars:
            break
        lines.append(line)
        used += len(line)
    return lines


def anchor_index(turns: Sequence[dict[str, Any]], budget_chars: int = INDEX_BUDGET_CHARS) -> str:
    """The index as a summary section (a leading blank line included), or "" when nothing matched."""
    lines = index_lines(turns, budget_chars)
    if not lines:
        return ""
    return "\n\n" + HEADING + "\n" + "\n".join(lines) + "\n" + CLOSING_NOTE
