"""``hermeslab mcp-server``: the lab's DuckDB log as read-only MCP tools.

Any MCP client — another agent, an IDE, hermeslab itself — can list the
logged sessions with their lineage (compression rotations and branches form
parent → child chains), read a session's messages, its per-turn token usage,
its compressions and its recoveries. The lab file is opened per query and
only for reading, like ``hermeslab.store.open``, so running agents keep
writing to it while the server answers.

Every tool answers with JSON text. Served over stdio by default, or over
streamable HTTP with ``--http PORT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from hermeslab import store

__all__ = ["build_server", "lineage", "serve"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

_SESSION_COLUMNS = ["id", "parent_session_id", "reason", "title", "source", "model", "started_at", "ended_at",
                    "end_reason", "message_count", "api_call_count", "tool_call_count", "input_tokens",
                    "output_tokens", "cache_read_tokens", "estimated_calls", "estimated_cost_usd"]
_MESSAGE_COLUMNS = ["seq", "turn", "role", "content", "tool_calls", "tool_call_id", "tool_name", "tokens", "active",
                    "created_at"]
_COMPRESSION_COLUMNS = ["session_id", "turn", "trigger", "strategy", "mode", "tokens_before", "tokens_after",
                        "prompt_tokens_before", "prompt_tokens_after", "messages_before", "messages_after",
                        "compress_start", "compress_end", "summary_tokens",
                        "duration_ms", "effective", "fallback_used", "new_session_id", "archived_before_seq",
                        "details", "created_at"]
_RECOVERY_COLUMNS = ["session_id", "turn", "fault_class", "action", "attempt", "delay_s", "outcome", "created_at"]

INSTRUCTIONS = (
    "Read-only access to a hermeslab lab: the DuckDB log of every agent session, turn, model call, "
    "tool call, compression and recovery. Start with list_sessions; the other tools take a session id from it."
)


def lineage(parents: dict[str, str | None], session_id: str) -> list[str]:
    """Session ids from the root of the parent chain down to ``session_id``; a cycle or missing parent ends it."""
    chain = [session_id]
    parent = parents.get(session_id)
    while parent is not None and parent not in chain:
        chain.append(parent)
        parent = parents.get(parent)
    return chain[::-1]


def build_server(lab_path: str | Path | None = None) -> MCPServer:
    """An MCP server over the lab at ``lab_path`` (default: ``hermeslab.home.default_lab_path()``)."""
    lab = store.open(lab_path)
    server = MCPServer("hermeslab", instructions=INSTRUCTIONS, log_level="WARNING")

    def known_session(session_id: str) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ToolError("session_id must be a session id from list_sessions")
        if lab.sql("SELECT count(*) AS n FROM sessions WHERE id = ?", [session_id])["n"].iloc[0] == 0:
            raise ToolError(f"no session {session_id!r} in {lab.path}; list_sessions shows the ids")

    @server.tool(annotations=_READ_ONLY, structured_output=False, description=(
        "List logged sessions, newest first, with their lineage: parent_session_id, the chain of ids from the "
        "root session (`lineage`) and the sessions that continue this one (`children`). A compression that "
        "rotates the session starts a child with reason 'compression'. Filter by `source` (cli, demo, notebook, "
        "...); page with `limit` and `offset`."))
    def list_sessions(limit: int = 50, offset: int = 0, source: str | None = None) -> str:
        _check_page(limit, offset)
        sessions = lab.sql(f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions")  # not the long system prompts
        parents = {row.id: (None if pd.isna(row.parent_session_id) else row.parent_session_id)
                   for row in sessions.itertuples(index=False)}
        children: dict[str, list[str]] = {}
        for child, parent in parents.items():
            if parent is not None:
                children.setdefault(parent, []).append(child)
        if source is not None:
            sessions = sessions[sessions["source"] == source]
        total = len(sessions)
        page = sessions.sort_values(["started_at", "id"], ascending=False).iloc[offset:offset + limit]
        rows = _records(page)
        for row in rows:
            row["lineage"] = lineage(parents, row["id"])
            row["children"] = children.get(row["id"], [])
        return _dump({"lab": str(lab.path), "total": total, "offset": offset, "sessions": rows})

    @server.tool(annotations=_READ_ONLY, structured_output=False, description=(
        "The messages of one session in history order (seq), with tool calls and the id of the call a tool "
        "result answers. Rows a compression archived have active=false; `active_only` leaves them out. Long "
        "contents are cut to `max_chars` (0: no limit). Page with `limit` and `offset`."))
    def session_messages(session_id: str, limit: int = 100, offset: int = 0, max_chars: int = 4000,
                         active_only: bool = False) -> str:
        _check_page(limit, offset)
        if max_chars < 0:
            raise ToolError(f"max_chars must be 0 (no limit) or positive, got {max_chars}")
        known_session(session_id)
        messages = lab.messages(session_id)
        if active_only:
            messages = messages[messages["active"]]
        page = messages.iloc[offset:offset + limit][_MESSAGE_COLUMNS]
        rows = _records(page, json_columns=("tool_calls",))
        for row in rows:
            row["content"] = _cut(row["content"], max_chars)
        return _dump({"session_id": session_id, "total": len(messages), "offset": offset, "messages": rows})

    @server.tool(annotations=_READ_ONLY, structured_output=False, description=(
        "Token usage per turn of one session: status, model calls, tool calls, the prompt tokens of the turn's "
        "last call (how full the context was), the prompt and completion tokens billed over the turn, and "
        "estimated_calls: how many of its calls the server reported no usage for (their figures are local "
        "estimates)."))
    def turn_usage(session_id: str) -> str:
        known_session(session_id)
        return _dump({"session_id": session_id, "turns": _records(lab.turn_usage(session_id))})

    @server.tool(annotations=_READ_ONLY, structured_output=False, description=(
        "Context compressions, oldest first: what triggered each, tokens and messages before and after, the "
        "compressed span, summary size, whether it was effective, and how it was applied (rotation to "
        "new_session_id, or in place). All sessions unless `session_id` is given."))
    def compressions(session_id: str | None = None, limit: int = 100) -> str:
        return _table(lab.compressions, session_id, limit, _COMPRESSION_COLUMNS, "compressions", ("details",))

    @server.tool(annotations=_READ_ONLY, structured_output=False, description=(
        "Recoveries from failed model calls, oldest first: the fault class, the action taken (retry, compress, "
        "fallback, ...), the attempt, the delay and the outcome. All sessions unless `session_id` is given."))
    def recoveries(session_id: str | None = None, limit: int = 100) -> str:
        return _table(lab.recoveries, session_id, limit, _RECOVERY_COLUMNS, "recoveries", ())

    def _table(query: Any, session_id: str | None, limit: int, columns: list[str], key: str,
               json_columns: tuple[str, ...]) -> str:
        _check_page(limit, 0)
        if session_id is not None:
            known_session(session_id)
        frame = query(session_id)
        rows = _records(frame.iloc[:limit][[c for c in columns if c in frame.columns]], json_columns=json_columns)
        return _dump({"session_id": session_id, "total": len(frame), key: rows})

    return server


def serve(lab_path: str | Path | None = None, *, http_port: int | None = None, host: str = "127.0.0.1") -> None:
    """Serve the lab over stdio, or over streamable HTTP at ``http://host:port/mcp``."""
    server = build_server(lab_path)
    if http_port is None:
        server.run("stdio")
    else:
        print(f"hermeslab lab server at http://{host}:{http_port}/mcp (Ctrl+C to stop)", flush=True)
        server.run("streamable-http", host=host, port=http_port)


def _check_page(limit: int, offset: int) -> None:
    if limit < 1:
        raise ToolError(f"limit must be at least 1, got {limit}")
    if offset < 0:
        raise ToolError(f"offset must be 0 or more, got {offset}")


def _records(frame: pd.DataFrame, json_columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: ISO timestamps, null for missing values, JSON columns parsed."""
    rows = json.loads(frame.to_json(orient="records", date_format="iso", date_unit="ms"))
    for row in rows:
        for column in json_columns:
            if isinstance(row.get(column), str):
                row[column] = json.loads(row[column])
    return rows


def _cut(text: Any, limit: int) -> Any:
    if not isinstance(text, str) or not limit or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
