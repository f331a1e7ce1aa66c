"""The lab database file: its versioned schema and the one safe way to open it.

DuckDB lets only one process at a time open a file for writing, and while it is
open no other process can read it either. So nothing in hermeslab keeps the file
open: every use attaches it to a process-wide in-memory DuckDB engine for one
short transaction and detaches it again, retrying with jittered backoff while
another process holds the lock. Attaching costs a few milliseconds, whereas
creating a DuckDB instance per use costs tens (it rebuilds the function catalog),
which is why the engine itself stays alive for the life of the process.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb


class StoreError(RuntimeError):
    """Anything that keeps the lab database from being read or written."""


class LabLockedError(StoreError):
    """Another process (or thread) held the lab file for longer than we were willing to wait."""


class SchemaError(StoreError):
    """The file's schema cannot be used by this version of hermeslab."""


@dataclass(frozen=True)
class Migration:
    """One step of the schema's history. Released migrations are never edited, only appended."""

    version: int
    description: str
    statements: tuple[str, ...]


_V1_TABLES = (
    """
    CREATE TABLE sessions (
        id VARCHAR PRIMARY KEY,
        parent_session_id VARCHAR,
        source VARCHAR,
        model VARCHAR,
        config_hash VARCHAR,
        context_length INTEGER,
        started_at TIMESTAMP,
        ended_at TIMESTAMP,
        end_reason VARCHAR,
        title VARCHAR,
        system_prompt VARCHAR,
        reason VARCHAR,
        api_call_count BIGINT NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cache_read_tokens BIGINT NOT NULL DEFAULT 0,
        cache_write_tokens BIGINT NOT NULL DEFAULT 0,
        reasoning_tokens BIGINT NOT NULL DEFAULT 0,
        message_count BIGINT NOT NULL DEFAULT 0,
        tool_call_count BIGINT NOT NULL DEFAULT 0,
        estimated_cost_usd DOUBLE,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE messages (
        id VARCHAR PRIMARY KEY,
        session_id VARCHAR NOT NULL,
        seq INTEGER,
        turn INTEGER,
        trace_id VARCHAR,
        parent_id VARCHAR,
        role VARCHAR,
        content VARCHAR,
        tool_calls JSON,
        tool_call_id VARCHAR,
        tool_name VARCHAR,
        tokens INTEGER,
        created_at TIMESTAMP,
        active BOOLEAN NOT NULL DEFAULT true,
        compacted BOOLEAN NOT NULL DEFAULT false,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE turns (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        user_text VARCHAR,
        status VARCHAR,
        final_text VARCHAR,
        api_calls INTEGER,
        prompt_tokens BIGINT,
        completion_tokens BIGINT,
        error VARCHAR,
        started_at TIMESTAMP,
        ended_at TIMESTAMP,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE api_calls (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        call_index INTEGER,
        attempt INTEGER,
        model VARCHAR,
        estimated_prompt_tokens BIGINT,
        prompt_tokens BIGINT,
        completion_tokens BIGINT,
        cache_read_tokens BIGINT,
        cache_write_tokens BIGINT,
        reasoning_tokens BIGINT,
        usage_estimated BOOLEAN,
        latency_ms DOUBLE,
        finish_reason VARCHAR,
        error_class VARCHAR,
        error_message VARCHAR,
        status_code INTEGER,
        created_at TIMESTAMP,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE tool_calls (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        tool_call_id VARCHAR,
        name VARCHAR,
        arguments VARCHAR,
        result VARCHAR,
        is_error BOOLEAN,
        duration_ms DOUBLE,
        attempts INTEGER,
        created_at TIMESTAMP,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE compressions (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        trigger VARCHAR,
        strategy VARCHAR,
        tokens_before BIGINT,
        tokens_after BIGINT,
        messages_before INTEGER,
        messages_after INTEGER,
        compress_start INTEGER,
        compress_end INTEGER,
        summary_tokens BIGINT,
        duration_ms DOUBLE,
        effective BOOLEAN,
        fallback_used BOOLEAN,
        details JSON,
        created_at TIMESTAMP,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE recoveries (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        fault_class VARCHAR,
        action VARCHAR,
        attempt INTEGER,
        delay_s DOUBLE,
        outcome VARCHAR,
        created_at TIMESTAMP,
        run_id VARCHAR
    )
    """,
    """
    CREATE TABLE errors (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        error_class VARCHAR,
        message VARCHAR,
        status_code INTEGER,
        fatal BOOLEAN,
        created_at TIMESTAMP,
        run_id VARCHAR
    )
    """,
    # event_seq is the arrival order at the writer: events stamped within the
    # same microsecond still sort in the order they happened.
    """
    CREATE TABLE events (
        session_id VARCHAR NOT NULL,
        turn INTEGER,
        trace_id VARCHAR,
        kind VARCHAR NOT NULL,
        ts TIMESTAMP,
        event_seq BIGINT,
        payload JSON,
        run_id VARCHAR
    )
    """,
    # Per-session lookups are the common query; the busy tables get an index on it.
    "CREATE INDEX messages_session ON messages (session_id)",
    "CREATE INDEX turns_session ON turns (session_id)",
    "CREATE INDEX api_calls_session ON api_calls (session_id)",
    "CREATE INDEX tool_calls_session ON tool_calls (session_id)",
    "CREATE INDEX events_session ON events (session_id)",
)

_V2_COMPRESSION_MODE = (
    "ALTER TABLE compressions ADD COLUMN mode VARCHAR",
    "ALTER TABLE compressions ADD COLUMN new_session_id VARCHAR",
    "ALTER TABLE compressions ADD COLUMN archived_before_seq BIGINT",
)

# Older labs learn from their own api_calls which turns and sessions counted an estimate; a call logged
# before purposes existed was a turn's call.
_V3_ESTIMATES_AND_PURPOSE = (
    "ALTER TABLE api_calls ADD COLUMN purpose VARCHAR DEFAULT 'turn'",
    "ALTER TABLE turns ADD COLUMN estimated_calls INTEGER DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN estimated_calls BIGINT DEFAULT 0",
    "ALTER TABLE compressions ADD COLUMN prompt_tokens_before BIGINT",
    "ALTER TABLE compressions ADD COLUMN prompt_tokens_after BIGINT",
    "ALTER TABLE compressions ADD COLUMN messages_dropped INTEGER DEFAULT 0",
    "ALTER TABLE api_calls ADD COLUMN partial_text VARCHAR",
    # Where a call's counts came from; an older lab's calls were reported or our estimate.
    "ALTER TABLE api_calls ADD COLUMN usage_source VARCHAR",
    """
    UPDATE api_calls SET usage_source = CASE WHEN usage_estimated THEN 'estimate'
                                             WHEN prompt_tokens IS NOT NULL THEN 'reported' END
    """,
    """
    UPDATE turns SET estimated_calls = (
        SELECT count(*) FROM api_calls AS a
        WHERE a.session_id = turns.session_id AND a.turn = turns.turn AND a.run_id IS NOT DISTINCT FROM turns.run_id
          AND a.usage_estimated)
    """,
    """
    UPDATE sessions SET estimated_calls = (
        SELECT count(*) FROM api_calls AS a
        WHERE a.session_id = sessions.id AND a.usage_estimated)
    """,
)

# Session totals over every call of every purpose beside the turn-only ones; the model asked for and the model
# the server named, apart; cut-off answers marked. An older lab's totals are rebuilt from its api_calls; its
# `model` column mixed both names.
_V4_ALL_CALLS_AND_SERVER_MODEL = (
    "ALTER TABLE api_calls ADD COLUMN server_model VARCHAR",
    # An answer cut off before it finished: stopped by the user, or what had streamed when the call failed.
    "ALTER TABLE messages ADD COLUMN interrupted BOOLEAN DEFAULT false",
    "ALTER TABLE sessions ADD COLUMN all_api_call_count BIGINT DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN all_input_tokens BIGINT DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN all_output_tokens BIGINT DEFAULT 0",
    """
    UPDATE sessions SET all_api_call_count = a.calls, all_input_tokens = a.prompt, all_output_tokens = a.completion
    FROM (SELECT session_id, count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt,
                 coalesce(sum(completion_tokens), 0) AS completion
          FROM api_calls GROUP BY session_id) AS a
    WHERE sessions.id = a.session_id
    """,
)

# The probe exam's answers and judgements (and model-written question lists), each under the content hash of
# what decided it, so a rerun or another config that leaves the same context asks nothing again.
_V5_EXAM_CACHE = (
    """
    CREATE TABLE exam_cache (
        key VARCHAR PRIMARY KEY,
        kind VARCHAR NOT NULL,
        identity VARCHAR NOT NULL,
        question VARCHAR,
        value VARCHAR NOT NULL,
        prompt_tokens DOUBLE,
        server_cached_tokens DOUBLE,
        created_at TIMESTAMP
    )
    """,
    "CREATE INDEX exam_cache_identity ON exam_cache (kind, identity)",
)

# What a compaction did to each message (by message id) and the summary it inserted, so its before and after
# can be shown; an older lab's compressions have neither.
_V6_COMPACTION_FATES = (
    "ALTER TABLE compressions ADD COLUMN summary_text VARCHAR",
    "ALTER TABLE compressions ADD COLUMN message_fates JSON",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "sessions, messages, turns, api and tool calls, compressions, recoveries, errors, events", _V1_TABLES),
    Migration(2, "how a compression was applied: rotation to a child session or in-place archiving",
              _V2_COMPRESSION_MODE),
    Migration(3, "which token counts are estimates, why each call was made, compressed sizes as sent, "
              "messages dropped unsummarised, text received before a call failed, "
              "where each call's counts came from",
              _V3_ESTIMATES_AND_PURPOSE),
    Migration(4, "session totals over calls of every purpose; the server's model name beside the configured one; "
              "answers cut off before they finished",
              _V4_ALL_CALLS_AND_SERVER_MODEL),
    Migration(5, "the probe exam's cached answers, judgements and question lists", _V5_EXAM_CACHE),
    Migration(6, "each compaction's summary text and what became of every message it saw", _V6_COMPACTION_FATES),
)

SCHEMA_VERSION = MIGRATIONS[-1].version

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    description VARCHAR,
    applied_at TIMESTAMP
)
"""


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """The highest migration applied to the connection's current database (0 for a fresh file)."""
    (has_table,) = con.execute(
        "SELECT count(*) FROM duckdb_tables() "
        "WHERE database_name = current_database() AND table_name = 'schema_version'"
    ).fetchone()
    if not has_table:
        return 0
    (version,) = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(version)


def ensure_schema(con: duckdb.DuckDBPyConnection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply the migrations the current database lacks, all in one transaction; return the version.

    Must be called outside a transaction. A file written by a newer hermeslab is
    refused rather than guessed at.
    """
    _check_order(migrations)
    known = migrations[-1].version if migrations else 0
    current = schema_version(con)
    if current > known:
        raise SchemaError(
            f"the lab file has schema version {current}, newer than the {known} this hermeslab knows; upgrade hermeslab"
        )
    missing = [m for m in migrations if m.version > current]
    if not missing:
        return current
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_VERSION_TABLE)
        for migration in missing:
            for statement in migration.statements:
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                [migration.version, migration.description, _utc_now()],
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return known


def _utc_now() -> datetime:
    """Now as a naive UTC datetime: every TIMESTAMP in the lab file is UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _check_order(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise SchemaError(f"migrations must be numbered 1, 2, 3, ... without gaps; got {versions}")


# ---------------------------------------------------------------- opening the file


class _Engine:
    """An in-memory DuckDB instance that lab files are attached to, created lazily per process."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._guard = threading.Lock()
        self._pid: int | None = None
        self._con: duckdb.DuckDBPyConnection | None = None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._guard:
            # A forked child must not reuse its parent's DuckDB instance.
            if self._con is None or self._pid != os.getpid():
                self._con = duckdb.connect(":memory:", config=self._config)
                self._pid = os.getpid()
            return self._con.cursor()


class _FileLocks:
    """One lock per lab file, so this process's own threads take turns instead of racing DuckDB."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._pid: int | None = None
        self._locks: dict[str, threading.Lock] = {}

    def __call__(self, key: str) -> threading.Lock:
        with self._guard:
            if self._pid != os.getpid():
                self._locks = {}
                self._pid = os.getpid()
            return self._locks.setdefault(key, threading.Lock())


# Writes are a handful of tiny statements, where DuckDB's worker threads cost more
# than they give; reads may scan whole tables and keep the default parallelism.
_WRITE_ENGINE = _Engine({"threads": 1})
_READ_ENGINE = _Engine({})
_FILE_LOCKS = _FileLocks()

_FIRST_DELAY_S = 0.005
_MAX_DELAY_S = 0.1


@contextmanager
def open_lab_file(path: Path, *, read_only: bool, timeout: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """Hold the lab file for one short use and yield a connection whose current database is it.

    Waits up to ``timeout`` seconds for other processes and threads, then raises
    LabLockedError. The file is detached on exit, which releases DuckDB's lock.
    """
    key = str(path.expanduser().resolve())
    alias = "lab_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    deadline = time.monotonic() + timeout
    file_lock = _FILE_LOCKS(key)
    if not file_lock.acquire(timeout=timeout):
        raise LabLockedError(f"{key} stayed in use by another thread of this process for {timeout:g} s")
    try:
        if not read_only and not os.path.exists(key):
            _create_whole(key)
        with closing((_READ_ENGINE if read_only else _WRITE_ENGINE).cursor()) as control:
            _attach(control, key, alias, read_only, deadline, timeout)
            with _attached(control, alias) as con:
                yield con
    finally:
        file_lock.release()


def _create_whole(key: str) -> None:
    """Make a new lab file appear whole: written under a temporary name with its schema, then linked into
    place, so a reader polling for it never opens a file DuckDB is still writing (which DuckDB refuses
    as "not a valid DuckDB database file").

    When another process links its file first, that one is used. Where the
    temporary file cannot be made or linked (no hard links on the filesystem,
    a directory that cannot be written), the attach that follows makes the
    file in place as DuckDB does, or says why it cannot.
    """
    directory, name = os.path.split(key)
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.new")
    alias = "new_lab_" + os.urandom(6).hex()
    try:
        with closing(_WRITE_ENGINE.cursor()) as control:
            quoted = temporary.replace("'", "''")
            control.execute(f"ATTACH '{quoted}' AS {alias}")
            with _attached(control, alias) as con:
                ensure_schema(con)
        os.link(temporary, key)
    except (OSError, duckdb.Error):  # FileExistsError among them: another process was first
        pass
    finally:
        for leftover in (temporary, temporary + ".wal"):
            if os.path.exists(leftover):
                os.unlink(leftover)


@contextmanager
def _attached(control: duckdb.DuckDBPyConnection, alias: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor whose current database is the attached ``alias``; detaches it afterwards."""
    try:
        with closing(control.cursor()) as con:
            con.execute(f"USE {alias}")
            yield con
    finally:
        control.execute(f"DETACH {alias}")


@contextmanager
def open_empty_lab() -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a throwaway in-memory database with the current schema (what a missing lab file reads as)."""
    alias = "empty_lab_" + os.urandom(6).hex()
    with closing(_READ_ENGINE.cursor()) as control:
        control.execute(f"ATTACH ':memory:' AS {alias}")
        with _attached(control, alias) as con:
            ensure_schema(con)
            yield con


def _attach(
    con: duckdb.DuckDBPyConnection, key: str, alias: str, read_only: bool, deadline: float, timeout: float
) -> None:
    quoted = key.replace("'", "''")
    statement = f"ATTACH '{quoted}' AS {alias}" + (" (READ_ONLY)" if read_only else "")
    delay = _FIRST_DELAY_S
    while True:
        try:
            con.execute(statement)
            return
        except duckdb.Error as exc:
            if not _is_lock_conflict(exc):
                raise StoreError(f"cannot open lab file {key}: {exc}") from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LabLockedError(
                    f"{key} stayed locked by another DuckDB connection for {timeout:g} s; last error: {exc}"
                ) from exc
            time.sleep(min(remaining, delay * random.uniform(0.5, 1.5)))
            delay = min(delay * 2, _MAX_DELAY_S)


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    """True for the errors that mean "someone else has the file right now" (worth retrying)."""
    if isinstance(exc, duckdb.ResourceInUseException):
        return True
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()
