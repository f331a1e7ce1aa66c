"""Search every message of every session: BM25 with early termination, one hit per conversation.

``SearchIndex`` is the index file (SQLite, beside the lab); ``LabSearch`` ties
it to a lab: it indexes each committed turn and catches up on whatever other
processes wrote. The ``session_search`` tool (``hermeslab.tools.session_search``)
is the agent's way in.
"""

from __future__ import annotations

from hermeslab.search.documents import MessageDoc, SessionInfo, message_text
from hermeslab.search.index import SearchIndex
from hermeslab.search.query import Query, parse_query
from hermeslab.search.results import Neighbour, SearchHit, SearchResult
from hermeslab.search.storage import SearchIndexError

__all__ = [
    "MessageDoc",
    "Neighbour",
    "Query",
    "SearchHit",
    "SearchIndex",
    "SearchIndexError",
    "SearchResult",
    "SessionInfo",
    "message_text",
    "parse_query",
]
