"""Persist the event stream in the lab database without making the agent wait.

``handle()`` only snapshots an event onto an in-memory queue. One background
thread turns queued events into rows and writes them in a single transaction per
flush: when a turn finishes, when a session starts or ends, and on ``flush()`` /
``close()``. A flush holds the file for a few milliseconds and then lets go, so
other processes can write and read the same file in between. An automatic flush
stops at the event that triggered it, so a transaction never ends in the middle
of a turn, and takes every turn finished by then, so a writer that falls behind
back-to-back turns catches up in fewer, larger transactions.

A commit costs ~15-25 ms on a quiet machine (attaching the file, one statement
per table, the checkpoint when it is detached), longer than a scripted turn, so
a new turn does not wait for the turns that just ended: it waits only for those
that ended more than ``max_commit_lag`` before it started. A killed process
loses the turn in flight and at most the turns that ended within that window
before it started (and only if their commit had not finished yet).

This module owns the queue and the thread; the rows come from
``hermeslab.store.rows`` and each flush is one ``hermeslab.store.transaction``.
"""

from __future__ import annotations

import atexit
import collections
import copy
import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

from hermeslab.core.events import (
    CompressionEvent,
    Event,
    EventBus,
    MessageAdded,
    SessionEnded,
    SessionStarted,
    TextDelta,
    TurnFinished,
    TurnStarted,
)
from hermeslab.store.batch import Batch
from hermeslab.store.rows import Redactor, RowBuilder
from hermeslab.store.schema import StoreError, ensure_schema, open_lab_file
from hermeslab.store.transaction import write_batch

log = logging.getLogger(__name__)

#: Events after which everything queued so far is written.
FLUSH_TRIGGERS = (TurnFinished, SessionStarted, SessionEnded)
#: How many of the latest commit timings a writer keeps.
TIMINGS_KEPT = 10_000


class StoreWriteError(StoreError):
    """Rows could not be written; they are still queued in the writer."""


class StoreWriter:
    """Subscribe to an EventBus and keep the lab database up to date, off the agent's thread.

    ``redact`` (e.g. ``hermeslab.context.redact.redact``) is applied, in the
    background thread, to every stored text that can carry secrets: message
    content, tool-call arguments and results, turn texts, error messages,
    the system prompt, and the text fields of event payloads.
    """

    def __init__(self, path: str | Path, *, redact: Redactor | None = None, lock_timeout: float = 30.0,
                 durable_turns: bool = True, max_commit_lag: float = 0.5):
        if not isinstance(path, (str, Path)) or not str(path):
            raise TypeError(f"path must be a non-empty str or Path, got {path!r}")
        if not lock_timeout > 0:
            raise ValueError(f"lock_timeout must be a positive number of seconds, got {lock_timeout!r}")
        if not max_commit_lag >= 0:
            raise ValueError(f"max_commit_lag must be a number of seconds >= 0, got {max_commit_lag!r}")
        if redact is not None and not callable(redact):
            raise TypeError(f"redact must be a callable str -> str, got {type(redact).__name__}")
        self.path = Path(path).expanduser().absolute()  # a later chdir must not move the lab
        self.lock_timeout = float(lock_timeout)
        #: A new turn first waits until the turns that ended more than ``max_commit_lag`` seconds
        #: ago are committed, so a killed process loses the turn in flight and at most the turns
        #: that ended within that window. A live turn starts long after the previous commit
        #: (~25 ms) is done; back-to-back turns go on while it runs. 0 waits for every earlier
        #: turn. Bulk replays may turn the wait off.
        self.durable_turns = durable_turns
        self.max_commit_lag = float(max_commit_lag)
        self._triggers = 0  # automatic flushes asked for (one per trigger event)
        self._triggers_done = 0  # automatic flushes the thread has finished
        #: (trigger number, monotonic time it was handled) of triggers not yet done, oldest first.
        self._pending_triggers: collections.deque[tuple[int, float]] = collections.deque()
        self._commit_ms: collections.deque[float] = collections.deque(maxlen=TIMINGS_KEPT)
        self._lag_ms: collections.deque[float] = collections.deque(maxlen=TIMINGS_KEPT)
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
                due = self._due_trigger()
                self._cond.wait_for(lambda: self._triggers_done >= due, timeout=self.lock_timeout)
            self._queue.append(item)
            if isinstance(event, FLUSH_TRIGGERS):
                self._triggers += 1
                self._pending_triggers.append((self._triggers, time.monotonic()))
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
    def commit_latencies_ms(self) -> list[float]:
        """How long each successful flush took to write, oldest first (the latest `TIMINGS_KEPT`).

        From asking for the file to letting it go: waiting for other processes,
        attaching, inserting, committing, and the checkpoint when it is detached.
        """
        with self._cond:
            return list(self._commit_ms)

    @property
    def commit_lags_ms(self) -> list[float]:
        """For each turn end (or session start or end) that its flush wrote: milliseconds from
        handle() to the commit, the time a kill would have lost it in; oldest first."""
        with self._cond:
            return list(self._lag_ms)

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

    def _due_trigger(self) -> int:
        """The newest trigger still waiting for its flush that was handled over ``max_commit_lag`` ago (0: none)."""
        cutoff = time.monotonic() - self.max_commit_lag
        due = 0
        for number, handled in self._pending_triggers:
            if handled > cutoff:
                break
            due = number
        return due

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
                done = time.monotonic()
                while self._pending_triggers and self._pending_triggers[0][0] <= triggers:
                    handled = self._pending_triggers.popleft()[1]
                    if error is None:
                        self._lag_ms.append((done - handled) * 1000)
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
        started = time.perf_counter()
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
        elapsed_ms = (time.perf_counter() - started) * 1000
        with self._cond:
            self._commit_ms.append(elapsed_ms)
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
