"""Recall from past sessions in the lab database: a keyword match over other conversations.

The current conversation (its session, the sessions it continues and the
ones it rotated into) is already in the context, so only other lineages are
searched. A message scores one point per distinct keyword of the query it
contains; the best few are quoted around their first hit. Deliberately
simple: no index to build or keep fresh, one read-only query per turn.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from hermeslab.store import open as open_lab

from .provider import RECALL_OPEN, MemoryProvider

#: Words too common to say anything about what a message is about.
STOPWORDS = frozenset(
    "about above after again also been before being below between both could does doing down during each from "
    "further have having here into just more most once only other over please same should some such than that "
    "their them then there these they this those through under until very what when where which while whom "
    "will with would your yours tell show make want need know like thanks thank".split()
)
MIN_WORD_CHARS = 4
MAX_KEYWORDS = 8
#: Characters quoted from one recalled message.
SNIPPET_CHARS = 240


def keywords(text: str, limit: int = MAX_KEYWORDS) -> list[str]:
    """The query's distinct content words, lower-cased, longest (most specific) first."""
    words = []
    for word in re.findall(r"[\w][\w.-]*[\w]|\w", text.lower()):
        if len(word) >= MIN_WORD_CHARS and word not in STOPWORDS and not word.isdigit() and word not in words:
            words.append(word)
    return sorted(words, key=len, reverse=True)[:limit]


def snippet(content: str, words: list[str], limit: int = SNIPPET_CHARS) -> str:
    """``content`` on one line, cut to ``limit`` chars around the first keyword it contains."""
    flat = " ".join(content.split())
    if len(flat) <= limit:
        return flat
    lowered = flat.lower()
    hits = [lowered.find(word) for word in words if word in lowered]
    start = max(0, min(hits, default=0) - limit // 3)
    piece = flat[start:start + limit]
    return ("…" if start else "") + piece + ("…" if start + limit < len(flat) else "")


def _recall_sql(count: int) -> str:
    score = " + ".join(["CAST(contains(lower(m.content), ?) AS INTEGER)"] * count)
    return f"""
        SELECT m.session_id, s.title, m.role, m.content, m.created_at, {score} AS score
        FROM messages AS m LEFT JOIN sessions AS s ON s.id = m.session_id
        WHERE m.role IN ('user', 'assistant') AND m.content IS NOT NULL
          AND NOT list_contains(CAST(? AS VARCHAR[]), m.session_id)
          AND NOT starts_with(m.content, '{RECALL_OPEN}')
          AND ({score}) > 0
        ORDER BY score DESC, m.created_at DESC
        LIMIT ?
    """


class LabRecall(MemoryProvider):
    """Recalls messages of other conversations in one lab file that share words with the user's message."""

    name = "lab"

    def __init__(self, lab_path: str | Path, *, max_hits: int = 5, max_chars: int = 2_000):
        if max_hits < 1 or max_chars < 1:
            raise ValueError(f"max_hits and max_chars must be positive, got {max_hits} and {max_chars}")
        self.lab_path = Path(lab_path)
        self.max_hits = max_hits
        self.max_chars = max_chars
        #: Sessions of the current conversation, including ones not yet written to the lab.
        self._own: set[str] = set()

    def session_switched(self, old_id: str, new_id: str, reason: str) -> None:
        if reason in ("compression", "branch"):
            self._own.update((old_id, new_id))
        else:
            self._own = {new_id}

    def prefetch(self, query: str, session_id: str) -> str | None:
        words = keywords(query)
        if not words or not self.lab_path.exists():
            return None
        self._own.add(session_id)
        lab = open_lab(self.lab_path)
        own = set(self._own)
        for known in list(own):
            own.update(lab.lineage(known))
        rows = lab.sql(_recall_sql(len(words)), [*words, sorted(own), *words, self.max_hits])
        return self._format(rows.to_dict("records"), words)

    def _format(self, rows: list[dict[str, Any]], words: list[str]) -> str | None:
        lines: list[str] = []
        used = 0
        for row in rows:
            when = row["created_at"].strftime("%Y-%m-%d") if pd.notna(row.get("created_at")) else "?"
            title = row.get("title") if isinstance(row.get("title"), str) and row.get("title") else row["session_id"]
            line = f"- {when} · {title} · {row['role']}: {snippet(row['content'], words)}"
            if used + len(line) > self.max_chars:
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines) or None
