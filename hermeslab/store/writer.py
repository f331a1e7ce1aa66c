"""Persist the event stream in the lab database without making the agent wait.

``handle()`` only snapshots an event onto an in-memory queue. One background
thread turns queued events into rows and writes them in a single transaction per
flush: when a turn finishes, when a session starts or ends, and on ``flush()`` /
``close()``. A flush holds the file for a few milliseconds and then lets go, so
other processes can write and read the same file in between. An automatic flush
stops at the event that triggered it, so a transaction never ends in the middle
of a turn: a killed process loses at most the turn in flight.
"""

from __future__ import annotations

import atexit
import copy
import dataclasses
import functools
import json
import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import duckdb

from hermeslab.core.events import (
    ApiCallFinished,
    CompressionEvent,
    ErrorEvent,
    Event,
    EventBus,
    MessageAdded,
    RecoveryEvent,
    SessionEnded,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    TurnFinished,
    TurnStarted,
)
from hermeslab.core.messages import strip_surrogates
from hermeslab.store.schema import StoreError, ensure_schema, open_lab_file

log = logging.getLogger(__name__)

Redactor = Callable[[str], str]
Row = dict[str, Any]

#: Events after which everything queued so far is written.
FLUSH_TRIGGERS = (TurnFinished, SessionStarted, SessionEnded)

#: Session counters that events add to.
SESSION_COUNTERS = (
    "api_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "message_count",
    "tool_call_count",
)

REDACTION_FAILED = "[not stored: redaction failed]"


class StoreWriteError(StoreError):
    """Rows could not be written; they are still queued in the writer."""


# ---------------------------------------------------------------- rows


@dataclass
class Batch:
    """What one transaction writes, in the order the events arrived."""

    rows: dict[str, list[Row]] = field(default_factory=dict)
    #: ``("start", session row)`` and ``("end", {"id", "ended_at", "end_reason"})`` in event order.
    lifecycle: list[tuple[str, Row]] = field(default_factory=list)
    #: Per session, how much each counter of SESSION_COUNTERS grows.
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Sessions met for the first time, with the time of their first event, so that a
    #: session whose SessionStarted was never seen still gets a row to count into.
    first_seen: dict[str, float] = field(default_factory=dict)
    #: In-place compressions: (session_id, seq) — active messages below seq become archived.
    archives: list[tuple[str, int]] = field(default_factory=list)

    def add(self, table: str, row: Row) -> None:
        self.rows.setdefault(table, []).append(row)

    def count(self, session_id: str, counter: str, amount: int) -> None:
        counters = self.totals.setdefault(session_id, {})
        counters[counter] = counters.get(counter, 0) + amount

    def touch(self, session_id: str, ts: float) -> None:
        self.first_seen.setdefault(session_id, ts)

    def extend(self, other: "Batch") -> None:
        for table, rows in other.rows.items():
            self.rows.setdefault(table, []).extend(rows)
        self.lifecycle.extend(other.lifecycle)
        for session_id, counters in other.totals.items():
            for counter, amount in counters.items():
                self.count(session_id, counter, amount)
        for session_id, ts in other.first_seen.items():
            self.touch(session_id, ts)
        self.archives.extend(other.archives)

    def row_count(self) -> int:
        return sum(len(rows) for rows in self.rows.values()) + len(self.lifecycle) + len(self.archives)

    def is_empty(self) -> bool:
        return self.row_count() == 0


class RowBuilder:
    """Turns events into rows, cleaned for storage (redacted, valid UTF-8, JSON-encoded).

    It remembers what later rows need from earlier events: the names of tool
    calls (a tool result carries only the call id), when each open turn
    started, and which sessions already have a row. It is used by one thread only.
    """

    def __init__(self, redact: Redactor | None = None):
        self._redact = redact
        self._tool_names: dict[str, dict[str, str]] = {}
        self._open_turns: dict[tuple[str, int, str | None], tuple[float, str]] = {}
        self._event_seq = 0
        self._sessions: set[str] = set()

    def add(self, event: Event, batch: Batch) -> None:
        """Append the event's rows to ``batch``: all of them, or none if the event cannot be stored."""
        part = Batch()
        if event.session_id not in self._sessions:
            part.touch(event.session_id, event.ts)
        convert = getattr(self, "_on_" + event.kind, None)
        if convert is not None:
            convert(event, part)
        part.add("events", self._event_row(event))
        batch.extend(part)
        self._sessions.add(event.session_id)

    # ---------------------------------------------------------------- per event kind

    def _on_session_started(self, event: SessionStarted, part: Batch) -> None:
        part.lifecycle.append(
            (
                "start",
                {
                    "id": event.session_id,
                    "parent_session_id": _opt_str(event.parent_session_id),
                    "source": _opt_str(event.source),
                    "model": _opt_str(event.model),
                    "config_hash": _opt_str(event.config_hash),
                    "context_length": _opt_int(event.context_length),
                    "started_at": _utc(event.ts),
                    "title": self._private(event.title),
                    "system_prompt": self._private(event.system_prompt),
                    "reason": _opt_str(event.reason),
                    "run_id": _opt_str(event.run_id),
                },
            )
        )

    def _on_session_ended(self, event: SessionEnded, part: Batch) -> None:
        part.lifecycle.append(
            ("end", {"id": event.session_id, "ended_at": _utc(event.ts), "end_reason": _opt_str(event.end_reason)})
        )
        self._tool_names.pop(event.session_id, None)
        for key in [key for key in self._open_turns if key[0] == event.session_id]:
            del self._open_turns[key]

    def _on_turn_started(self, event: TurnStarted, part: Batch) -> None:
        self._open_turns[(event.session_id, event.turn, event.run_id)] = (float(event.ts), event.user_text)

    def _on_turn_finished(self, event: TurnFinished, part: Batch) -> None:
        started_at, user_text = self._open_turns.pop((event.session_id, event.turn, event.run_id), (None, None))
        part.add(
            "turns",
            {
                **_envelope(event),
                "user_text": self._private(user_text),
                "status": _opt_str(event.status),
                "final_text": self._private(event.final_text),
                "api_calls": _opt_int(event.api_calls),
                "prompt_tokens": _opt_int(event.prompt_tokens),
                "completion_tokens": _opt_int(event.completion_tokens),
                "error": self._private(event.error),
                "started_at": _utc(started_at),
                "ended_at": _utc(event.ts),
            },
        )

    def _on_message_added(self, event: MessageAdded, part: Batch) -> None:
        message = event.message
        role = _opt_str(message.get("role"))
        calls = message.get("tool_calls") or None
        if calls:
            names = self._tool_names.setdefault(event.session_id, {})
            for call in calls:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    names[str(call.get("id"))] = str(call["function"].get("name"))
        tool_call_id = _opt_str(message.get("tool_call_id"))
        tool_name = _opt_str(message.get("name"))
        if tool_name is None and role == "tool" and tool_call_id is not None:
            tool_name = self._tool_names.get(event.session_id, {}).get(tool_call_id)
        part.add(
            "messages",
            {
                "id": event.message_id,
                "session_id": event.session_id,
                "seq": _opt_int(event.seq),
                "turn": _opt_int(event.turn),
                "trace_id": _opt_str(event.trace_id),
                "parent_id": _opt_str(event.parent_id),
                "role": role,
                "content": self._content(message.get("content")),
                "tool_calls": _json(self._redacted_calls(calls)) if calls else None,
                "tool_call_id": tool_call_id,
                "tool_name": tool_name,
                "tokens": _opt_int(event.tokens),
                "created_at": _utc(event.ts),
                "run_id": _opt_str(event.run_id),
            },
        )
        part.count(event.session_id, "message_count", 1)

    def _on_api_call_finished(self, event: ApiCallFinished, part: Batch) -> None:
        prompt, completion = _opt_int(event.prompt_tokens), _opt_int(event.completion_tokens)
        cache_read, cache_write = _opt_int(event.cache_read_tokens), _opt_int(event.cache_write_tokens)
        reasoning = _opt_int(event.reasoning_tokens)
        part.add(
            "api_calls",
            {
                **_envelope(event),
                "call_index": _opt_int(event.call_index),
                "attempt": _opt_int(event.attempt),
                "model": _opt_str(event.model),
                "estimated_prompt_tokens": _opt_int(event.estimated_prompt_tokens),
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "cache_read_tokens": cache_read,
                "cache_write_tokens": cache_write,
                "reasoning_tokens": reasoning,
                "usage_estimated": bool(event.usage_estimated),
                "latency_ms": _opt_float(event.latency_ms),
                "finish_reason": _opt_str(event.finish_reason),
                "error_class": _opt_str(event.error_class),
                "error_message": self._private(event.error_message),
                "status_code": _opt_int(event.status_code),
                "created_at": _utc(event.ts),
            },
        )
        for counter, amount in (
            ("api_call_count", 1),
            ("input_tokens", prompt),
            ("output_tokens", completion),
            ("cache_read_tokens", cache_read),
            ("cache_write_tokens", cache_write),
            ("reasoning_tokens", reasoning),
        ):
            part.count(event.session_id, counter, amount or 0)

    def _on_tool_call_finished(self, event: ToolCallFinished, part: Batch) -> None:
        part.add(
            "tool_calls",
            {
                **_envelope(event),
                "tool_call_id": _opt_str(event.tool_call_id),
                "name": _opt_str(event.name),
                "arguments": self._private(event.arguments),
                "result": self._private(event.result),
                "is_error": bool(event.is_error),
                "duration_ms": _opt_float(event.duration_ms),
                "attempts": _opt_int(event.attempts),
                "created_at": _utc(event.ts),
            },
        )
        part.count(event.session_id, "tool_call_count", 1)

    def _on_compression(self, event: CompressionEvent, part: Batch) -> None:
        part.add(
            "compressions",
            {
                **_envelope(event),
                "trigger": _opt_str(event.trigger),
                "strategy": _opt_str(event.strategy),
                "tokens_before": _opt_int(event.tokens_before),
                "tokens_after": _opt_int(event.tokens_after),
                "messages_before": _opt_int(event.messages_before),
                "messages_after": _opt_int(event.messages_after),
                "compress_start": _opt_int(event.compress_start),
                "compress_end": _opt_int(event.compress_end),
                "summary_tokens": _opt_int(event.summary_tokens),
                "duration_ms": _opt_float(event.duration_ms),
                "effective": bool(event.effective),
                "fallback_used": bool(event.fallback_used),
                "mode": _opt_str(event.mode),
                "new_session_id": _opt_str(event.new_session_id),
                "archived_before_seq": _opt_int(event.archived_before_seq),
                "details": _json(event.details),
                "created_at": _utc(event.ts),
            },
        )
        if event.mode == "in_place" and event.archived_before_seq is not None:
            part.archives.append((event.session_id, int(event.archived_before_seq)))

    def _on_recovery(self, event: RecoveryEvent, part: Batch) -> None:
        part.add(
            "recoveries",
            {
                **_envelope(event),
                "fault_class": _opt_str(event.fault_class),
                "action": _opt_str(event.action),
                "attempt": _opt_int(event.attempt),
                "delay_s": _opt_float(event.delay_s),
                "outcome": _opt_str(event.outcome),
                "created_at": _utc(event.ts),
            },
        )

    def _on_error(self, event: ErrorEvent, part: Batch) -> None:
        part.add(
            "errors",
            {
                **_envelope(event),
                "error_class": _opt_str(event.error_class),
                "message": self._private(event.message),
                "status_code": _opt_int(event.status_code),
                "fatal": bool(event.fatal),
                "created_at": _utc(event.ts),
            },
        )

    def _event_row(self, event: Event) -> Row:
        payload = {}
        for name in _payload_fields(type(event)):
            value = getattr(event, name)
            payload[name] = self._private(value) if isinstance(value, str) else value
        if isinstance(event, MessageAdded):
            # The message body is stored once, in `messages`, under the same message_id.
            payload["role"] = event.message.get("role")
        self._event_seq += 1
        return {
            **_envelope(event),
            "kind": event.kind,
            "ts": _utc(event.ts),
            "event_seq": self._event_seq,
            "payload": _json(payload),
        }

    # ---------------------------------------------------------------- cleaning text

    def _private(self, text: Any) -> str | None:
        """Text that may carry secrets: redacted (when a redactor is set) and made storable."""
        if text is None:
            return None
        text = str(text)
        if self._redact is not None:
            try:
                text = self._redact(text)
            except Exception:  # never store unredacted text because the redactor broke
                log.exception("redaction failed; the text is replaced by a marker")
                text = REDACTION_FAILED
        return strip_surrogates(text)

    def _content(self, content: Any) -> str | None:
        if content is None:
            return None
        if isinstance(content, list):
            parts = [
                {**part, "text": self._private(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
            return _json(parts)
        return self._private(content)

    def _redacted_calls(self, calls: list[Any]) -> list[Any]:
        redacted = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                call = {**call, "function": {**function, "arguments": self._private(function["arguments"])}}
            redacted.append(call)
        return redacted


@functools.cache
def _payload_fields(event_type: type[Event]) -> tuple[str, ...]:
    """The event's own fields, as in ``Event.payload()``, minus a message body stored elsewhere."""
    envelope = {f.name for f in dataclasses.fields(Event)}
    skip = {"message"} if issubclass(event_type, MessageAdded) else set()
    return tuple(f.name for f in dataclasses.fields(event_type) if f.name not in envelope | skip)


def _envelope(event: Event) -> Row:
    return {
        "session_id": event.session_id,
        "turn": _opt_int(event.turn),
        "trace_id": _opt_str(event.trace_id),
        "run_id": _opt_str(event.run_id),
    }


def _opt_str(value: Any) -> str | None:
    return None if value is None else strip_surrogates(str(value))


def _opt_int(value: Any) -> int | None:
    # int() raises on junk here, where it drops one event, instead of failing a whole transaction.
    return None if value is None else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _utc(ts: float | None) -> datetime | None:
    """Event time (Unix seconds) as the naive UTC datetime stored in TIMESTAMP columns."""
    return None if ts is None else datetime.fromtimestamp(float(ts), timezone.utc).replace(tzinfo=None)


def _json(value: Any) -> str:
    return strip_surrogates(json.dumps(value, ensure_ascii=False, default=str))


# ---------------------------------------------------------------- writing a batch

_START_SESSION = """
INSERT INTO sessions (id, parent_session_id, source, model, config_hash, context_length,
                      started_at, title, system_prompt, reason, run_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    parent_session_id = coalesce(parent_session_id, excluded.parent_session_id),
    source = coalesce(source, excluded.source),
    model = coalesce(model, excluded.model),
    config_hash = coalesce(config_hash, excluded.config_hash),
    context_length = coalesce(context_length, excluded.context_length),
    started_at = least(started_at, excluded.started_at),
    title = coalesce(title, excluded.title),
    system_prompt = coalesce(system_prompt, excluded.system_prompt),
    reason = coalesce(reason, excluded.reason),
    run_id = coalesce(run_id, excluded.run_id),
    ended_at = NULL,
    end_reason = NULL
"""
_START_COLUMNS = (
    "id",
    "parent_session_id",
    "source",
    "model",
    "config_hash",
    "context_length",
    "started_at",
    "title",
    "system_prompt",
    "reason",
    "run_id",
)

# A session keeps the first reason it ended with; a restart clears it (see _START_SESSION).
_END_SESSION = "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL"

_ADD_TOTALS = (
    "UPDATE sessions SET "
    + ", ".join(f"{c} = sessions.{c} + d.{c}" for c in SESSION_COUNTERS)
    + " FROM (SELECT unnest(?) AS id, "
    + ", ".join(f"unnest(?) AS {c}" for c in SESSION_COUNTERS)
    + ") AS d WHERE sessions.id = d.id"
)

# In-place compression: the rows it replaced stay searchable but leave the active history.
_ARCHIVE = "UPDATE messages SET active = false, compacted = true WHERE session_id = ? AND seq < ? AND active"

#: Re-delivering a message (same message_id) is a no-op rather than an error that would block the queue.
_ON_CONFLICT = {"messages": "ON CONFLICT (id) DO NOTHING"}


def write_batch(con: duckdb.DuckDBPyConnection, batch: Batch) -> None:
    """Write a batch in one transaction on a connection whose current database is the lab."""
    con.execute("BEGIN TRANSACTION")
    try:
        started = {row["id"] for op, row in batch.lifecycle if op == "start"}
        unseen = [
            {"id": sid, "started_at": _utc(ts)} for sid, ts in batch.first_seen.items() if sid not in started
        ]
        if unseen:
            _insert(con, "sessions", unseen, "ON CONFLICT (id) DO NOTHING")
        for op, row in batch.lifecycle:
            if op == "start":
                con.execute(_START_SESSION, [row[c] for c in _START_COLUMNS])
            else:
                con.execute(_END_SESSION, [row["ended_at"], row["end_reason"], row["id"]])
        for table, rows in batch.rows.items():
            if rows:
                _insert(con, table, rows, _ON_CONFLICT.get(table, ""))
        for session_id, before_seq in batch.archives:
            con.execute(_ARCHIVE, [session_id, before_seq])
        if batch.totals:
            ids = list(batch.totals)
            con.execute(_ADD_TOTALS, [ids, *([batch.totals[s].get(c, 0) for s in ids] for c in SESSION_COUNTERS)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[Row], suffix: str = "") -> None:
    """One INSERT for all rows: each column travels as one list parameter and is unnested.

    Measured against a pandas-frame scan and a multi-row VALUES insert, this is
    the fastest both for a 10-row turn and for imports of many thousand rows.
    Row values are already of their column's Python type (str, int, float,
    bool, datetime), so DuckDB's own inference types the lists; explicit casts
    would only add binding time.
    """
    columns = list(rows[0])
    unnested = ", ".join(f"unnest(?) AS {column}" for column in columns)
    con.execute(
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM (SELECT {unnested}) {suffix}",
        [[row[column] for row in rows] for column in columns],
    )


# ---------------------------------------------------------------- the writer


class StoreWriter:
    """Subscribe to an EventBus and keep the lab database up to date, off the agent's thread.

    ``redact`` (e.g. ``hermeslab.context.redact.redact``) is applied, in the
    background thread, to every stored text that can carry secrets: message
    content, tool-call arguments and results, turn texts, error messages,
    the system prompt, and the text fields of event payloads.
    """

    def __init__(self, path: str | Path, *, redact: Redactor | None = None, lock_timeout: float = 30.0,
                 durable_turns: bool = True):
        if not isinstance(path, (str, Path)) or not str(path):
            raise TypeError(f"path must be a non-empty str or Path, got {path!r}")
        if not lock_timeout > 0:
            raise ValueError(f"lock_timeout must be a positive number of seconds, got {lock_timeout!r}")
        if redact is not None and not callable(redact):
            raise TypeError(f"redact must be a callable str -> str, got {type(redact).__name__}")
        self.path = Path(path).expanduser().absolute()  # a later chdir must not move the lab
        self.lock_timeout = float(lock_timeout)
        #: A new turn first waits until the previous turn's rows are committed (normally long done),
        #: so a killed process loses at most the turn in flight. Bulk replays may turn it off.
        self.durable_turns = durable_turns
        self._triggers = 0  # automatic flushes asked for (one per trigger event)
        self._triggers_done = 0  # automatic flushes the thread has finished
        self._builder = RowBuilder(redact)
        self._cond = threading.Condition()
        self._queue: list[Event] = []
        self._ready = 0  # how many queued events the thread should write now
        self._requested = 0  # flush requests issued (flush(), close())
        self._served = 0  # requests whose events the thread has tried to write
        self._durable = 0  # the latest request after which nothing was left unwritten
        self._last_error: Exception | None = None
        self._closing = False
        self._retained: Batch | None = None  # rows of failed flushes; owned by the thread
        self._schema_ready = False  # checked once per writer, again after a failed write
        self._unsubscribers: list[Callable[[], None]] = []
        self._commit_hooks: list[Callable[[Batch], None]] = []
        self._thread = threading.Thread(target=self._run, name=f"hermeslab-store:{self.path.name}", daemon=True)
        self._thread.start()
        # A script that never calls close() still gets its last rows written at a normal exit.
        atexit.register(self._close_at_exit)

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def attach(self, bus: EventBus) -> None:
        """Receive every event published on ``bus`` from now on."""
        self._unsubscribers.append(bus.subscribe(self.handle))

    def on_commit(self, hook: Callable[[Batch], None]) -> None:
        """Call ``hook(batch)`` on the writer thread right after each batch is committed.

        For derived data that must follow the lab (the search index); a failing
        hook is logged and never blocks the writer.
        """
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        self._commit_hooks.append(hook)

    def handle(self, event: Event) -> None:
        """Queue an event for storage. Never touches the database; returns in microseconds."""
        if isinstance(event, TextDelta):
            return
        item = _snapshot(event)
        with self._cond:
            if self._closing:
                raise StoreError(f"the writer for {self.path} is closed; {event.kind} event not stored")
            if self.durable_turns and isinstance(event, TurnStarted):
                self._cond.wait_for(lambda: self._triggers_done >= self._triggers, timeout=self.lock_timeout)
            self._queue.append(item)
            if isinstance(event, FLUSH_TRIGGERS):
                self._triggers += 1
                self._ready = len(self._queue)
                self._cond.notify_all()

    def flush(self) -> None:
        """Block until every event handled so far is in the database.

        Raises StoreWriteError if it could not be written; the rows then stay
        queued and the next flush tries again. Once close() has begun, close()
        answers for the data and flush() returns at once.
        """
        with self._cond:
            if self._closing:
                return
            ticket = self._request()
            self._cond.wait_for(lambda: self._served >= ticket)
            if self._durable < ticket:
                raise StoreWriteError(
                    f"could not write to {self.path}: {self._last_error}; the rows stay queued"
                ) from self._last_error

    def close(self) -> None:
        """Write what is queued, stop the thread and unsubscribe; retry a failed write once more.

        Raises StoreWriteError when rows could not be written even then.
        """
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._request()
        atexit.unregister(self._close_at_exit)
        self._thread.join()
        for unsubscribe in self._unsubscribers:
            unsubscribe()
        self._unsubscribers.clear()
        retained = self._retained
        if retained is not None:
            try:
                self._write(retained)
            except Exception as exc:
                raise StoreWriteError(
                    f"{retained.row_count()} rows could not be written to {self.path} and are lost: {exc}"
                ) from exc
            self._retained = None
    @property
    def pending(self) -> int:
        """Events queued but not yet taken by the writer thread (rows of failed flushes not included)."""
        with self._cond:
            return len(self._queue)

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except StoreError:
            log.exception("the lab database missed the last rows at exit")

    # ---------------------------------------------------------------- background thread

    def _request(self) -> int:
        """Ask the thread to write everything queued; the caller holds the condition."""
        self._ready = len(self._queue)
        self._requested += 1
        self._cond.notify_all()
        return self._requested

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._ready or self._requested > self._served or self._closing)
                events = self._queue[: self._ready]
                del self._queue[: self._ready]
                self._ready = 0
                ticket = self._requested
                triggers = self._triggers
                stop = self._closing
            error = self._flush_events(events)
            with self._cond:
                self._served = ticket
                self._triggers_done = triggers
                if error is None:
                    self._durable = ticket
                self._last_error = error
                self._cond.notify_all()
            if stop:
                return

    def _flush_events(self, events: list[Event]) -> Exception | None:
        batch = self._retained or Batch()
        for event in events:
            try:
                self._builder.add(event, batch)
            except Exception:
                log.exception("%s event of session %s cannot be stored; skipped", event.kind, event.session_id)
        if batch.is_empty():
            self._retained = None
            return None
        try:
            self._write(batch)
        except Exception as exc:
            log.error("writing %d rows to %s failed; they stay queued: %s", batch.row_count(), self.path, exc)
            self._retained = batch
            return exc
        self._retained = None
        return None

    def _write(self, batch: Batch) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        committed = False
        try:
            with open_lab_file(self.path, read_only=False, timeout=self.lock_timeout) as con:
                if not self._schema_ready:
                    ensure_schema(con)
                    self._schema_ready = True
                write_batch(con, batch)
                committed = True
        except Exception:
            if not committed:
                self._schema_ready = False  # the file may have been replaced; check it again next time
                raise
            # Writing the batch again would count its totals twice.
            log.warning("%s was written but not released cleanly", self.path, exc_info=True)
        for hook in self._commit_hooks:
            try:
                hook(batch)
            except Exception:
                log.exception("a commit hook failed on %d rows written to %s", batch.row_count(), self.path)


def _snapshot(event: Event) -> Event:
    """A copy safe to read later from another thread, even if the caller reuses its dicts."""
    if not isinstance(event, Event):
        raise TypeError(f"StoreWriter.handle expects a hermeslab Event, got {type(event).__name__}")
    if not isinstance(event.session_id, str) or not event.session_id:
        raise ValueError(f"{event.kind} event without a session_id cannot be stored")
    if isinstance(event, MessageAdded):
        if not isinstance(event.message_id, str) or not event.message_id:
            raise ValueError(f"MessageAdded needs a non-empty message_id, got {event.message_id!r}")
        if not isinstance(event.message, dict):
            raise TypeError(f"MessageAdded.message must be a dict, got {type(event.message).__name__}")
        return dataclasses.replace(event, message=_copy_message(event.message))
    if isinstance(event, CompressionEvent):
        return dataclasses.replace(event, details=copy.deepcopy(event.details))
    return event


def _copy_message(message: dict[str, Any]) -> dict[str, Any]:
    copied = dict(message)
    content = copied.get("content")
    if isinstance(content, list):
        copied["content"] = [dict(part) if isinstance(part, dict) else part for part in content]
    calls = copied.get("tool_calls")
    if isinstance(calls, list):
        copied["tool_calls"] = [
            {**call, "function": dict(call["function"])}
            if isinstance(call, dict) and isinstance(call.get("function"), dict)
            else call
            for call in calls
        ]
    return copied
