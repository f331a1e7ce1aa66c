"""What a search answers: one hit per conversation, with the match's surroundings.

These are the types the ``session_search`` tool and notebooks consume; they
carry no reference to the index, so a result stays valid after the index
moves on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hermeslab.search.query import Query

#: The most conversations one search may return.
MAX_LIMIT = 50


@dataclass(frozen=True)
class Neighbour:
    """The message just before or after a hit, as a short preview."""

    role: str | None
    text: str


@dataclass(frozen=True)
class SearchHit:
    """One conversation that matched: where, how well, and what it said around the match."""

    root_session_id: str
    #: The session holding the best match (a descendant of the root, or the root itself).
    session_id: str
    message_id: str
    role: str | None
    score: float
    created_at: datetime | None
    title: str | None
    #: When the conversation (its root session) started.
    started_at: datetime | None
    snippet: str
    before: Neighbour | None
    after: Neighbour | None


@dataclass(frozen=True)
class SearchResult:
    """The hits of one search, best first, and whether they are certainly the best."""

    query: Query
    hits: list[SearchHit]
    #: False when the work cap (or the scan window of a substring query) may have hidden a better hit.
    exact: bool
    postings_read: int
