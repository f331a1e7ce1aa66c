"""Persist the event stream in the lab database without making the agent wait for DuckDB.

``handle()`` snapshots an event onto an in-memory queue. When a turn finishes,
when a session starts or ends, and on ``flush()`` / ``close()``, the events
queued so far become rows (redacted), which are appended to this writer's
pending file (``hermeslab.store.journal``) and handed to a background thread
that commits them to the lab: one transaction for everything handed over since
its last commit, so a lab that falls behind back-to-back turns catches up in
fewer, larger transactions. A commit holds the lab file for a few tens of
milliseconds and then lets go, so other processes can write and read it in
between. An automatic flush stops at the event that triggered it, so no batch
ends in the middle of a turn.

With ``durable_turns`` (the default) the thread that handles a turn's end
builds and appends its rows itself before ``handle()`` returns, a fraction of a
millisecond. A killed process therefore loses at most the turn in flight:
every turn it finished is in the lab or in its pending file, which the next
writer on the lab adopts and commits. A new turn waits for a commit only when
the lab has fallen over ``max_commit_lag`` (0.5 s) behind, so that readers in
other processes are never further behind than that; back-to-back turns go on
while the latest commit runs. Without ``durable_turns`` a second background
thread builds the rows, no pending file is written, and no turn waits.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import copy
import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import duckdb

from hermeslab.core.events import (
    CompressionEvent,
    Event,
    EventBus,
    MessageAdded,
    MessagesWithdrawn,
    SessionEnded,
    SessionStarted,
    TextDelta,
    TurnFinished,
    TurnStarted,
)
from hermeslab.store.batch import Batch
from hermeslab.store.journal import Journal, orphans
from hermeslab.store.rows import Redactor, RowBuilder
from hermeslab.store.schema import StoreError, ensure_schema, open_lab_file
from hermeslab.store.transaction import is_committed, write_batch

log = logging.getLogger(__name__)

#: Events after which everything queued so far is written.
FLUSH_TRIGGERS = (TurnFinished, SessionStarted, SessionEnded)
#: Events the lab does not keep: streamed fragments, for live displays only.
NOT_STORED = (TextDelta,)
#: How many of the latest commit timings a writer keeps.
TIMINGS_KEPT = 10_000


class StoreWriteError(StoreError):
    """Rows could not be written; they are still queued in the writer."""


@dataclasses.dataclass
class _Appended:
    """What the thread that built a batch hands to the committing thread."""

    batch: Batch | None  # None: nothing to write (the events made no rows)
    number: int  # the journal's batch number after it (for Journal.committed)
    ticket: int  # flush requests covered
    triggers: int  # automatic flushes covered
    stop: bool  # close() asked: the last piece of work


class StoreWriter:
    """Subscribe to an EventBus and keep the lab database up to date, off the agent's thread.

    ``redact`` (e.g. ``hermeslab.context.redact.redact``) is applied, while rows are
    built (at the end of each turn with ``durable_turns``, else in the background),
    to every stored text that can carry secrets: message
    content, tool-call arguments and results, turn texts, error messages,
    the system prompt, and the text fields of event payloads. Rows are
    redacted before they reach the pending file.
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
        #: A turn's end is handled only once its rows are in the pending file, so a killed
        #: process loses at most the turn in flight. Bulk replays, which can start again, may
        #: turn this off; their rows are then built in the background and go to the lab
        #: alone, with no pending file.
        self.durable_turns = durable_turns
        #: With ``durable_turns``, a new turn also waits for the commit of the turns that ended more
        #: than ``max_commit_lag`` seconds before it started: not for safety (the pending file sees to
        #: that) but so that the lab, which other processes read, never falls further behind a running
        #: agent. Back-to-back turns go on while the latest commit (tens of ms) runs; 0 waits for every
        #: earlier turn's commit.
        self.max_commit_lag = float(max_commit_lag)
        self._triggers = 0  # automatic flushes asked for (one per trigger event)
        self._triggers_appended = 0  # automatic flushes whose rows are in the pending file
        self._triggers_done = 0  # automatic flushes the committing thread has tried to write
        #: (trigger number, monotonic time it was handled) of triggers not yet committed, oldest first.
        self._pending_triggers: collections.deque[tuple[int, float]] = collections.deque()
        self._commit_ms: collections.deque[float] = collections.deque(maxlen=TIMINGS_KEPT)
        self._lag_ms: collections.deque[float] = collections.deque(maxlen=TIMINGS_KEPT)
        self._pending_lag_ms: collections.deque[float] = collections.deque(maxlen=TIMINGS_KEPT)
        self._builder = RowBuilder(redact)
        self._journal = Journal(self.path)
        guard = threading.RLock()
        self._cond = threading.Condition(guard)  # guards the state below; waited on for rows to build and flushes
        #: Same lock; notified only when batches are handed to the committing thread, so handing one
        #: over does not wake the building thread for nothing.
        self._handed = threading.Condition(guard)
        self._queue: list[Event] = []
        self._ready = 0  # how many queued events the appending thread should take now
        self._requested = 0  # flush requests issued (flush(), close())
        self._taken = 0  # requests the appending thread has taken
        self._appended: list[_Appended] = []  # handed to the committing thread
        self._append_lock = threading.Lock()  # one builder of rows at a time, so batches keep their order
        self._appended_last = False  # close()'s request has been handed on: the appending thread is done
        self._served = 0  # requests whose events the committing thread has tried to write
        self._durable = 0  # the latest request after which nothing was left unwritten
        self._last_error: Exception | None = None
        self._closing = False
        self._retained: Batch | None = None  # rows of failed commits; owned by the committing thread
        self._retained_number = 0  # the journal's batch number the retained rows reach
        self._schema_ready = False  # checked once per writer, again after a failed write
        self._unsubscribers: list[Callable[[], None]] = []
        self._commit_hooks: list[Callable[[Batch], None]] = []
        name = self.path.name
        self._appender = threading.Thread(target=self._append_loop, name=f"hermeslab-rows:{name}", daemon=True)
        self._committer = threading.Thread(target=self._commit_loop, name=f"hermeslab-store:{name}", daemon=True)
        self._appender.start()
        self._committer.start()
        # A script that never calls close() still gets its last rows written at a normal exit.
        atexit.register(self._close_at_exit)

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def attach(self, bus: EventBus) -> None:
        """Receive every event published on ``bus`` from now on, but the streamed fragments (not stored)."""
        self._unsubscribers.append(bus.subscribe(self.handle, skip=NOT_STORED))

    def on_commit(self, hook: Callable[[Batch], None]) -> None:
        """Call ``hook(batch)`` on the committing thread right after each batch is committed.

        For derived data that must follow the lab (the search index); a failing
        hook is logged and never blocks the writer.
        """
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        self._commit_hooks.append(hook)

    def handle(self, event: Event) -> None:
        """Queue an event for storage. Never touches the database and mostly returns in microseconds.

        With ``durable_turns``, the event that ends a turn (or starts or ends a
        session) returns only once the rows queued so far are in the pending
        file: this thread builds and appends them (a fraction of a millisecond
        for a turn's ~20 rows), so a turn is safe from a kill by the time the
        loop goes on. Without it, a background thread builds them. A
        ``TurnStarted`` may wait for commits that fell over ``max_commit_lag``
        behind (up to ``lock_timeout``).
        """
        if isinstance(event, NOT_STORED):
            return
        item = _snapshot(event)
        trigger = isinstance(event, FLUSH_TRIGGERS)
        durable = trigger and self.durable_turns
        with self._cond:
            if self._closing:
                raise StoreError(f"the writer for {self.path} is closed; {event.kind} event not stored")
            if self.durable_turns and isinstance(event, TurnStarted):
                due = self._due_trigger()
                if self._triggers_done < due:
                    self._cond.wait_for(lambda: self._triggers_done >= due, timeout=self.lock_timeout)
            self._queue.append(item)
            if trigger:
                self._triggers += 1
                self._pending_triggers.append((self._triggers, time.monotonic()))
                self._ready = len(self._queue)
                if not durable:
                    self._cond.notify_all()
        if durable:
            self._append_now()

    def flush(self) -> None:
        """Block until every event handled so far is in the database.

        Raises StoreWriteError if it could not be written; the rows then stay
        queued (and in the pending file) and the next flush tries again. Once
        close() has begun, close() answers for the data and flush() returns at once.
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
        """Write what is queued, stop the threads and unsubscribe; retry a failed write once more.

        Raises StoreWriteError when rows could not be written even then; they
        stay in the pending file, and the next writer on the lab commits them.
        """
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._request()
        atexit.unregister(self._close_at_exit)
        self._appender.join()
        self._committer.join()
        for unsubscribe in self._unsubscribers:
            unsubscribe()
        self._unsubscribers.clear()
        retained = self._retained
        if retained is not None:
            try:
                self._write(retained)
            except Exception as exc:
                kept = self._journal.close()
                where = f"; they stay in {kept[-1].parent} for the next writer" if kept else " and are lost"
                raise StoreWriteError(
                    f"{retained.row_count()} rows could not be written to {self.path}{where}: {exc}"
                ) from exc
            self._retained = None
            self._journal.committed(self._retained_number)
        self._journal.close()

    @property
    def commit_latencies_ms(self) -> list[float]:
        """How long each successful commit took, oldest first (the latest `TIMINGS_KEPT`).

        From asking for the file to letting it go: waiting for other processes,
        attaching, inserting, committing, and the checkpoint when it is detached.
        """
        with self._cond:
            return list(self._commit_ms)

    @property
    def commit_lags_ms(self) -> list[float]:
        """For each turn end (or session start or end) that a commit wrote: milliseconds from
        handle() to the commit, the time it spent only in the pending file; oldest first."""
        with self._cond:
            return list(self._lag_ms)

    @property
    def pending_lags_ms(self) -> list[float]:
        """For each turn end (or session start or end): milliseconds from handle() until its rows were in
        the pending file, safe from a kill of this process; oldest first."""
        with self._cond:
            return list(self._pending_lag_ms)

    @property
    def pending(self) -> int:
        """Events queued but not yet built into rows (rows of failed commits not included)."""
        with self._cond:
            return len(self._queue)

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except StoreError:
            log.exception("the lab database missed the last rows at exit")

    # ---------------------------------------------------------------- background threads

    def _due_trigger(self) -> int:
        """The newest trigger not yet committed that was handled over ``max_commit_lag`` ago (0: none)."""
        cutoff = time.monotonic() - self.max_commit_lag
        due = 0
        for number, handled in self._pending_triggers:
            if handled > cutoff:
                break
            due = number
        return due

    def _request(self) -> int:
        """Ask the threads to write everything queued; the caller holds the condition."""
        self._ready = len(self._queue)
        self._requested += 1
        self._cond.notify_all()
        return self._requested

    def _append_now(self) -> None:
        """Build and append the rows ready to be written on this thread, in turn with the background one."""
        if not self._append_lock.acquire(timeout=self.lock_timeout):
            log.warning("the rows of %s stayed unbuilt for %g s; the turn goes on without them in the pending file",
                        self.path, self.lock_timeout)
            return
        try:
            self._append_ready()
        finally:
            self._append_lock.release()

    def _append_loop(self) -> None:
        """Build rows from the events a flush covers and append them to the pending file."""
        while True:
            with self._cond:
                # With durable turns the thread that handled a turn's end builds its rows; this one takes
                # the rest (flush(), close(), and every turn without durable turns).
                self._cond.wait_for(lambda: (self._ready and not self.durable_turns)
                                    or self._requested > self._taken or self._appended_last)
                if self._appended_last:
                    return
            with self._append_lock:
                self._append_ready()

    def _append_ready(self) -> None:
        """Take the events ready to be written, append their rows and hand them to the committing thread.

        Runs under ``_append_lock``, on the background thread or on the agent's (see ``handle``),
        so batches reach the pending file and the lab in the order their events arrived.
        """
        with self._cond:
            if self._appended_last or not (self._ready or self._requested > self._taken):
                return
            events = self._queue[: self._ready]
            del self._queue[: self._ready]
            self._ready = 0
            ticket = self._taken = self._requested
            triggers = self._triggers
            stop = self._closing
        batch = self._build(events)
        number = 0
        if batch is not None and self.durable_turns:  # a bulk replay that can start again skips the file
            try:
                number = self._journal.append(batch)
            except Exception:  # the rows still go to the lab; only a kill before that would lose them
                log.exception("the pending file of %s cannot be written", self.path)
        with self._cond:
            self._appended.append(_Appended(batch, number, ticket, triggers, stop))
            appended = time.monotonic()
            for trigger, handled in self._pending_triggers:  # not committed yet, so still listed
                if self._triggers_appended < trigger <= triggers and (batch is None or number > 0):
                    self._pending_lag_ms.append((appended - handled) * 1000)
            self._triggers_appended = triggers
            self._appended_last = stop
            self._handed.notify()

    def _commit_loop(self) -> None:
        """Adopt what killed writers left, then commit each group of appended batches in one transaction."""
        try:
            self._adopt_orphans()
        except Exception:
            log.exception("pending rows left by a killed writer of %s could not be committed yet", self.path)
        while True:
            with self._cond:
                self._handed.wait_for(lambda: self._appended)
                work, self._appended = self._appended, []
            error = self._commit([item for item in work if item.batch is not None])
            with self._cond:
                last = work[-1]
                self._served = max(self._served, last.ticket)
                self._triggers_done = last.triggers
                done = time.monotonic()
                while self._pending_triggers and self._pending_triggers[0][0] <= last.triggers:
                    handled = self._pending_triggers.popleft()[1]
                    if error is None:
                        self._lag_ms.append((done - handled) * 1000)
                if error is None:
                    self._durable = last.ticket
                self._last_error = error
                self._cond.notify_all()
            if last.stop:
                return

    def _build(self, events: list[Event]) -> Batch | None:
        batch = Batch()
        for event in events:
            try:
                self._builder.add(event, batch)
            except Exception:
                log.exception("%s event of session %s cannot be stored; skipped", event.kind, event.session_id)
        return None if batch.is_empty() else batch

    def _commit(self, work: list[_Appended]) -> Exception | None:
        batch = self._retained or Batch()
        number = self._retained_number
        for item in work:
            batch.extend(item.batch)
            number = item.number or number
        if batch.is_empty():
            return None
        try:
            self._write(batch)
        except Exception as exc:
            log.error("writing %d rows to %s failed; they stay queued: %s", batch.row_count(), self.path, exc)
            self._retained, self._retained_number = batch, number
            return exc
        self._retained, self._retained_number = None, 0
        self._journal.committed(number)
        return None

    def _adopt_orphans(self) -> None:
        """Commit the batches of pending files whose writers died and that the lab does not have yet."""
        for orphan in orphans(self.path):
            try:
                missing = Batch()
                if orphan.batches:
                    with self._open() as con:
                        for batch in orphan.batches:
                            if not is_committed(con, batch):
                                missing.extend(batch)
                if not missing.is_empty():
                    self._write(missing)
                    log.warning("committed %d rows that a killed writer left in %s", missing.row_count(), orphan.path)
            except BaseException:
                orphan.release()
                raise
            orphan.discard()

    @contextlib.contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The lab, held for one short use, with its schema brought up to date once per writer."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open_lab_file(self.path, read_only=False, timeout=self.lock_timeout) as con:
            if not self._schema_ready:
                ensure_schema(con)
                self._schema_ready = True
            yield con

    def _write(self, batch: Batch) -> None:
        started = time.perf_counter()
        committed = False
        try:
            with self._open() as con:
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
        return dataclasses.replace(event, details=copy.deepcopy(event.details),
                                   message_fates=dict(event.message_fates))
    if isinstance(event, MessagesWithdrawn):
        return dataclasses.replace(event, message_ids=list(event.message_ids))
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
