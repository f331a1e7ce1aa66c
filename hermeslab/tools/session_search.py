"""The ``session_search`` tool: find earlier conversations in the lab by what was said in them.

One line per conversation (its lineage root): id, title, date, then the
matching message with the message before and after it, so the model can tell
from the answer alone whether it found the right conversation.
"""

from __future__ import annotations

from typing import Any, Callable

from hermeslab.search.labsync import LabSearch
from hermeslab.search.results import MAX_LIMIT, Neighbour, SearchResult
from hermeslab.search.storage import SearchIndexError
from hermeslab.tools.registry import Tool, ToolError

DEFAULT_LIMIT = 3


def format_result(result: SearchResult) -> str:
    """The tool's answer: a header, then one block per conversation."""
    if not result.hits:
        return f"No earlier conversation matches {result.query.text!r}."
    lines = [f"{len(result.hits)} earlier conversation(s) match {result.query.text!r}"
             + ("" if result.exact else " (search stopped at its work limit; more may exist)") + ":"]
    for number, hit in enumerate(result.hits, 1):
        date = hit.started_at.strftime("%Y-%m-%d %H:%M UTC") if hit.started_at else "date unknown"
        where = "" if hit.session_id == hit.root_session_id else f" (match in continuation {hit.session_id})"
        lines.append(f"{number}. session {hit.root_session_id} — {hit.title or 'untitled'} — {date}{where}")
        if hit.before is not None:
            lines.append(f"   before [{_role(hit.before)}]: {hit.before.text}")
        lines.append(f"   match [{hit.role or 'message'}]: {hit.snippet}")
        if hit.after is not None:
            lines.append(f"   after [{_role(hit.after)}]: {hit.after.text}")
    return "\n".join(lines)


def run_session_search(search: LabSearch, current_session: Callable[[], str | None], args: dict[str, Any]) -> str:
    query = args["query"]
    if not query.strip():
        raise ToolError("query must contain at least one word to search for")
    try:
        result = search.search(query, limit=args.get("limit", DEFAULT_LIMIT), exclude_session=current_session())
    except SearchIndexError as exc:
        raise ToolError(f"the session index cannot be read: {exc}") from None
    return format_result(result)


def session_search_tool(search: LabSearch, current_session: Callable[[], str | None]) -> Tool:
    """The tool over ``search``; ``current_session`` names the conversation to leave out of the results."""
    return Tool(
        name="session_search",
        description=(
            "Search all earlier conversations stored in the lab (messages, tool calls and tool results) and "
            "return the best-matching conversations, one per conversation, each with its id, title, date and "
            "the matching message between its neighbours. Words are ranked by relevance (BM25); put words in "
            "double quotes to require them as an exact phrase. Use it when the user refers to past work or "
            "when an earlier session may hold the answer. The current conversation is never returned; for "
            "files use search_files."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1,
                          "description": "Words to look for; \"quoted words\" must appear together."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                          "description": "How many conversations to return."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        handler=lambda args: run_session_search(search, current_session, args),
        read_only=True,
        idempotent=True,
    )


def _role(neighbour: Neighbour) -> str:
    return neighbour.role or "message"
