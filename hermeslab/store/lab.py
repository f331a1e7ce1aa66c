"""Read the lab database into pandas without getting in a running agent's way.

Every query holds the file only for its own duration (read-only, retrying while
a writer has it), so a notebook can watch one or several running agents and
never block them for longer than one query.

A path that does not exist yet reads as an empty lab: queries run against an
in-memory database with the same schema and return empty frames with the right
columns. Nothing is created on disk until a writer writes. Timestamps are UTC.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import duckdb
import pandas as pd

from hermeslab.home import default_lab_path
from hermeslab.store.schema import (
    SCHEMA_VERSION,
    SchemaError,
    StoreError,
    ensure_schema,
    open_empty_lab,
    open_lab_file,
    schema_version,
)

Params = Sequence[Any] | Mapping[str, Any] | None


_TURN_USAGE = """
WITH calls AS (
    SELECT turn,
           count(*) AS api_calls,
           arg_max(prompt_tokens, (call_index, attempt, created_at))
               FILTER (WHERE prompt_tokens IS NOT NULL) AS last_prompt_tokens,
           CAST(coalesce(sum(prompt_tokens), 0) AS BIGINT) AS prompt_tokens,
           CAST(coalesce(sum(completion_tokens), 0) AS BIGINT) AS completion_tokens,
           count(*) FILTER (WHERE usage_estimated) AS estimated_calls
    FROM api_calls WHERE session_id = $session_id AND coalesce(purpose, 'turn') = 'turn' GROUP BY turn
),
tools AS (SELECT turn, count(*) AS tool_calls FROM tool_calls WHERE session_id = $session_id GROUP BY turn),
finished AS (SELECT turn, any_value(status) AS status FROM turns WHERE session_id = $session_id GROUP BY turn),
all_turns AS (SELECT turn FROM calls UNION SELECT turn FROM tools UNION SELECT turn FROM finished),
-- A compression in mid-turn rotates the session: the turn ends in a child session, and here reads 'continued'.
continued AS (
    SELECT DISTINCT work.turn FROM sessions AS child
    JOIN (SELECT session_id, turn FROM api_calls UNION ALL SELECT session_id, turn FROM turns) AS work
        ON work.session_id = child.id
    WHERE child.parent_session_id = $session_id
)
SELECT all_turns.turn,
       coalesce(finished.status, CASE WHEN continued.turn IS NOT NULL THEN 'continued' END) AS status,
       coalesce(calls.api_calls, 0) AS api_calls,
       coalesce(tools.tool_calls, 0) AS tool_calls,
       calls.last_prompt_tokens,
       coalesce(calls.prompt_tokens, 0) AS prompt_tokens,
       coalesce(calls.completion_tokens, 0) AS completion_tokens,
       coalesce(calls.estimated_calls, 0) AS estimated_calls
FROM all_turns
LEFT JOIN calls USING (turn)
LEFT JOIN tools USING (turn)
LEFT JOIN finished USING (turn)
LEFT JOIN continued USING (turn)
ORDER BY all_turns.turn
"""

# The path of visited ids stops the walk on a cycle; a missing parent ends it.
_LINEAGE = """
WITH RECURSIVE chain(id, parent_session_id, depth, visited) AS (
    SELECT id, parent_session_id, 0, [id] FROM sessions WHERE id = $session_id
    UNION ALL
    SELECT s.id, s.parent_session_id, chain.depth + 1, list_append(chain.visited, s.id)
    FROM chain JOIN sessions AS s ON s.id = chain.parent_session_id
    WHERE NOT list_contains(chain.visited, s.id)
)
SELECT id FROM chain ORDER BY depth DESC
"""


class Lab:
    """Pandas views of one lab file: sessions, messages, calls, turns, compressions, events."""

    def __init__(self, path: str | Path | None = None, *, lock_timeout: float = 30.0):
        if path is not None and (not isinstance(path, (str, Path)) or not str(path)):
            raise TypeError(f"path must be a non-empty str or Path, got {path!r}")
        if not lock_timeout > 0:
            raise ValueError(f"lock_timeout must be a positive number of seconds, got {lock_timeout!r}")
        self.path = default_lab_path() if path is None else Path(path).expanduser().absolute()
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory; a lab is a DuckDB file such as {self.path / 'lab.duckdb'}")
        self.lock_timeout = float(lock_timeout)
        self._schema_checked = False

    def __repr__(self) -> str:
        return f"Lab({str(self.path)!r})"

    # ---------------------------------------------------------------- tables

    def sessions(self, run_id: str | None = None) -> pd.DataFrame:
        """Every session, or only those of one replay or A/B run (``run_id``)."""
        if run_id is None:
            return self.sql("SELECT * FROM sessions ORDER BY started_at, id")
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
        return self.sql("SELECT * FROM sessions WHERE run_id = ? ORDER BY started_at, id", [run_id])

    def messages(self, session_id: str) -> pd.DataFrame:
        """The session's messages in history order (``seq``), archived ones included."""
        return self.sql(
            "SELECT * FROM messages WHERE session_id = ? ORDER BY seq, created_at", [_session_id(session_id)]
        )

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """The session's active history as chat messages, ready to resume from (archived rows left out)."""
        rows = self.sql(
            "SELECT role, content, tool_calls, tool_call_id FROM messages "
            "WHERE session_id = ? AND active ORDER BY seq", [_session_id(session_id)]
        )
        return [_chat_message(row) for row in rows.itertuples(index=False)]

    def continuation(self, session_id: str, max_hops: int = 100) -> str:
        """Follow compression rotations forward: the newest session that continues ``session_id``."""
        current, seen = _session_id(session_id), set()
        for _ in range(max_hops):
            seen.add(current)
            children = self.sql(
                "SELECT id FROM sessions WHERE parent_session_id = ? AND reason = 'compression' "
                "ORDER BY started_at DESC LIMIT 1", [current])
            if children.empty or children["id"].iloc[0] in seen:
                return current
            current = str(children["id"].iloc[0])
        return current

    def api_calls(self, session_id: str | None = None) -> pd.DataFrame:
        return self._rows("api_calls", session_id, "created_at, turn, call_index, attempt")

    def tool_calls(self, session_id: str | None = None) -> pd.DataFrame:
        return self._rows("tool_calls", session_id, "created_at, turn")

    def turns(self, session_id: str | None = None) -> pd.DataFrame:
        return self._rows("turns", session_id, "ended_at, session_id, turn")

    def compressions(self, session_id: str | None = None) -> pd.DataFrame:
        return self._rows("compressions", session_id, "created_at")

    def recoveries(self, session_id: str | None = None) -> pd.DataFrame:
        return self._rows("recoveries", session_id, "created_at")

    def errors(self, session_id: str | None = None) -> pd.DataFrame:
        return self._rows("errors", session_id, "created_at")

    def events(self, session_id: str | None = None, kind: str | None = None) -> pd.DataFrame:
        """The raw event stream in the order it happened; ``kind`` as in ``Event.kind``."""
        where, params = [], []
        if session_id is not None:
            where.append("session_id = ?")
            params.append(_session_id(session_id))
        if kind is not None:
            if not isinstance(kind, str) or not kind:
                raise ValueError(f"kind must be an event kind such as 'turn_finished', got {kind!r}")
            where.append("kind = ?")
            params.append(kind)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        return self.sql(f"SELECT * FROM events {clause}ORDER BY ts, event_seq", params)

    # ---------------------------------------------------------------- derived views

    def turn_usage(self, session_id: str) -> pd.DataFrame:
        """One row per turn: status, API and tool calls, the last call's prompt tokens, summed tokens.

        ``last_prompt_tokens`` is how full the context was at the end of the turn
        (the last call that reported usage); ``prompt_tokens`` is what the turn was billed. A turn that a
        compression moved to a child session part-way reads ``continued`` here and ends in the child.
        ``estimated_calls`` counts calls whose figures are a local estimate (the provider reported no
        usage): above zero, the row's tokens are not all measured. The background review's calls
        (``purpose = 'review'`` in ``api_calls``) count in no turn.
        """
        return self.sql(_TURN_USAGE, {"session_id": _session_id(session_id)})

    def lineage(self, session_id: str) -> list[str]:
        """Session ids from the root of the chain of ``parent_session_id`` links to ``session_id`` itself.

        Empty when the session is unknown; a missing parent or a cycle in the links ends the walk.
        """
        return [str(row) for row in self.sql(_LINEAGE, {"session_id": _session_id(session_id)})["id"]]

    def compression_count(self, session_id: str) -> int:
        """Compressions that changed the context over the lineage ending at ``session_id``.

        A resumed conversation's compactor starts counting afresh; this is the count over its whole history.
        """
        lineage = self.lineage(session_id) or [_session_id(session_id)]
        found = self.sql("SELECT count(*) AS n FROM compressions WHERE list_contains(?, session_id) "
                         "AND mode IS DISTINCT FROM 'none'", [lineage])
        return int(found["n"].iloc[0])

    def sql(self, query: str, params: Params = None) -> pd.DataFrame:
        """Run any read-only SQL against the lab and return the result as a DataFrame."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty SQL string")
        with self._connection() as con:
            cursor = con.execute(query) if params is None else con.execute(query, params)
            return cursor.df()

    # ---------------------------------------------------------------- plumbing

    def _rows(self, table: str, session_id: str | None, order: str) -> pd.DataFrame:
        if session_id is None:
            return self.sql(f"SELECT * FROM {table} ORDER BY {order}")
        return self.sql(f"SELECT * FROM {table} WHERE session_id = ? ORDER BY {order}", [_session_id(session_id)])

    @contextmanager
    def _connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.path.exists():
            with open_empty_lab() as con:
                yield con
            return
        if not self._schema_checked:
            self._bring_schema_up_to_date()
        with open_lab_file(self.path, read_only=True, timeout=self.lock_timeout) as con:
            yield con

    def _bring_schema_up_to_date(self) -> None:
        """Once per Lab: refuse a newer file, migrate an older one (a short write), accept a current one."""
        with open_lab_file(self.path, read_only=True, timeout=self.lock_timeout) as con:
            version = schema_version(con)
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"{self.path} has schema version {version}, newer than the {SCHEMA_VERSION} "
                "this hermeslab knows; upgrade hermeslab"
            )
        if version < SCHEMA_VERSION:
            with open_lab_file(self.path, read_only=False, timeout=self.lock_timeout) as con:
                ensure_schema(con)
        self._schema_checked = True


def _chat_message(row: Any) -> dict[str, Any]:
    """A messages row back as an OpenAI chat message (list content and tool calls were stored as JSON)."""
    message: dict[str, Any] = {"role": row.role}
    content = None if pd.isna(row.content) else row.content
    if isinstance(content, str) and content.startswith("[") and content.endswith("]"):
        try:
            parsed = json.loads(content)
            if isinstance(parsed, list) and all(isinstance(p, dict) and "type" in p for p in parsed):
                content = parsed
        except json.JSONDecodeError:
            pass
    message["content"] = content if content is not None else ""
    if not pd.isna(row.tool_calls) and row.tool_calls:
        message["tool_calls"] = json.loads(row.tool_calls)
    if not pd.isna(row.tool_call_id) and row.tool_call_id:
        message["tool_call_id"] = row.tool_call_id
    return message


def _session_id(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    return session_id
