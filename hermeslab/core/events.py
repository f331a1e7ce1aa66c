"""Typed events and the bus they travel on.

The agent loop only emits events; the DuckDB writer, the notebook widgets and
the evaluation harness subscribe. Every event carries the session, the turn
number and the turn's ``trace_id`` so any consumer can rebuild a turn.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Event:
    kind: ClassVar[str] = "event"
    session_id: str
    turn: int = 0
    trace_id: str = ""
    ts: float = field(default_factory=time.time)
    #: Set by replays and A/B runs so their rows can be told apart from live ones.
    run_id: str | None = None

    def payload(self) -> dict[str, Any]:
        """The event's own fields (without the common envelope) as plain data."""
        common = {"session_id", "turn", "trace_id", "ts", "run_id"}
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in common}


# ---------------------------------------------------------------- sessions


@dataclass(kw_only=True)
class SessionStarted(Event):
    kind: ClassVar[str] = "session_started"
    parent_session_id: str | None = None
    source: str = "cli"
    model: str = ""
    title: str | None = None
    system_prompt: str = ""
    config_hash: str = ""
    context_length: int = 0
    #: Why this session exists: ``new``, ``compression``, ``branch``, ``resume``.
    reason: str = "new"


@dataclass(kw_only=True)
class SessionEnded(Event):
    kind: ClassVar[str] = "session_ended"
    end_reason: str = ""


# ---------------------------------------------------------------- turns


@dataclass(kw_only=True)
class TurnStarted(Event):
    kind: ClassVar[str] = "turn_started"
    user_text: str = ""


@dataclass(kw_only=True)
class TurnFinished(Event):
    kind: ClassVar[str] = "turn_finished"
    #: ``completed``, ``interrupted``, ``max_iterations`` or ``failed``.
    status: str = "completed"
    final_text: str = ""
    api_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


@dataclass(kw_only=True)
class MessageAdded(Event):
    """A message became part of the session's history (what DuckDB persists)."""

    kind: ClassVar[str] = "message_added"
    message_id: str
    parent_id: str | None
    seq: int
    message: dict[str, Any]
    tokens: int = 0


@dataclass(kw_only=True)
class TextDelta(Event):
    """A streamed fragment of assistant text (for live displays; not persisted)."""

    kind: ClassVar[str] = "text_delta"
    text: str
    reasoning: bool = False


# ---------------------------------------------------------------- model calls


@dataclass(kw_only=True)
class ApiCallStarted(Event):
    kind: ClassVar[str] = "api_call_started"
    call_index: int
    attempt: int
    estimated_prompt_tokens: int
    message_count: int


#: Why hermeslab called the model (``ApiCallFinished.purpose``): the user's turn, a compression's summary, the
#: background memory review, or an exam's question, answer or judgement (the probe exam's, in a session of its own).
CALL_PURPOSES = ("turn", "summary", "review", "exam")


@dataclass(kw_only=True)
class ApiCallFinished(Event):
    kind: ClassVar[str] = "api_call_finished"
    call_index: int
    attempt: int
    #: The model name hermeslab asked for (the configured one).
    model: str = ""
    #: The model the server said answered (a path, an alias, a dated snapshot); None when it named none.
    server_model: str | None = None
    estimated_prompt_tokens: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    #: True when the provider reported no usage and the counts are our estimate.
    usage_estimated: bool = False
    #: Where the counts came from: ``reported``, ``server_template`` or ``server_tokenizer`` (the server's
    #: tokenizer counted them after an answer without usage), ``estimate``; "" for a call with no counts.
    usage_source: str = ""
    #: Why the call was made: one of ``CALL_PURPOSES``.
    purpose: str = "turn"
    latency_ms: float = 0.0
    finish_reason: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    status_code: int | None = None
    #: Text a failed call streamed before it broke off (its finish reason is then ``partial``).
    partial_text: str | None = None


# ---------------------------------------------------------------- tools


@dataclass(kw_only=True)
class MessagesWithdrawn(Event):
    """Messages left the live history without a compression (a failed turn took its unanswered input back).

    They stay in the log, no longer active: a resumed session does not send them again.
    """

    kind: ClassVar[str] = "messages_withdrawn"
    message_ids: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ToolCallStarted(Event):
    kind: ClassVar[str] = "tool_call_started"
    tool_call_id: str
    name: str
    arguments: str


@dataclass(kw_only=True)
class ToolCallFinished(Event):
    kind: ClassVar[str] = "tool_call_finished"
    tool_call_id: str
    name: str
    arguments: str
    result: str
    is_error: bool = False
    duration_ms: float = 0.0
    attempts: int = 1


# ---------------------------------------------------------------- context and recovery


@dataclass(kw_only=True)
class CompressionEvent(Event):
    kind: ClassVar[str] = "compression"
    trigger: str
    strategy: str = "summary"
    #: The compressor's own count of the messages, in the unit its thresholds use (no tool schemas).
    tokens_before: int = 0
    tokens_after: int = 0
    #: The prompt as it is sent (messages, tool schemas and reply priming), counted locally and corrected
    #: by the provider's readings so far: the figure to set beside the logged prompt tokens. None when unknown.
    prompt_tokens_before: int | None = None
    prompt_tokens_after: int | None = None
    messages_before: int = 0
    messages_after: int = 0
    #: Messages that left the context without a summary (``dropped_oldest``, ``fit_window``).
    messages_dropped: int = 0
    compress_start: int | None = None
    compress_end: int | None = None
    summary_tokens: int = 0
    duration_ms: float = 0.0
    #: The context changed and the attempt was not judged ineffective (a no-op attempt is logged too).
    effective: bool = True
    fallback_used: bool = False
    #: ``rotation`` (the history continues in ``new_session_id``), ``in_place`` (rows before
    #: ``archived_before_seq`` are archived) or ``none`` (nothing was applied).
    mode: str = "none"
    new_session_id: str | None = None
    archived_before_seq: int | None = None
    #: The phases' decision records (pruned indices, budgets, reasons).
    details: dict[str, Any] = field(default_factory=dict)
    #: The summary as inserted (None when none was written), for showing what replaced the removed messages.
    summary_text: str | None = None
    #: By message id, in history order, what became of each message of the history compressed: ``kept``,
    #: ``pruned``, ``summarised`` or ``dropped`` (``hermeslab.context.fates``); all kept when nothing was applied.
    message_fates: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class ErrorEvent(Event):
    kind: ClassVar[str] = "error"
    error_class: str
    message: str
    status_code: int | None = None
    fatal: bool = False


@dataclass(kw_only=True)
class RecoveryEvent(Event):
    kind: ClassVar[str] = "recovery"
    fault_class: str
    action: str
    attempt: int = 1
    delay_s: float = 0.0
    outcome: str = ""


@dataclass(kw_only=True)
class Notice(Event):
    """Anything a person should see that has no table of its own (warnings, memory updates)."""

    kind: ClassVar[str] = "notice"
    level: str = "info"
    text: str = ""


@dataclass(kw_only=True)
class MemoryUpdated(Event):
    """The background review changed the memory files or the skills (what it did, not the saved text)."""

    kind: ClassVar[str] = "memory_updated"
    #: One line per successful write, e.g. ``user add`` or ``skill create deploy-docs``.
    changes: list[str] = field(default_factory=list)
    text: str = ""


Handler = Callable[[Event], None]


class EventBus:
    """Synchronous fan-out. A failing subscriber is logged and never breaks the loop.

    A subscriber may name the event types it wants, or the ones it never
    wants; ``wants`` then lets an emitter skip building events nobody would
    receive (a replay that only counts tool results builds no other event).
    """

    def __init__(self) -> None:
        #: Replaced, never changed in place, so ``publish`` can read it without the lock.
        self._handlers: tuple[tuple[Handler, tuple[type[Event], ...] | None, tuple[type[Event], ...]], ...] = ()
        self._lock = threading.Lock()
        self._everything = False
        self._verdicts: dict[type[Event], bool] = {}

    def subscribe(self, handler: Handler, kinds: Iterable[type[Event]] | None = None, *,
                  skip: Iterable[type[Event]] = ()) -> Callable[[], None]:
        """Call ``handler`` with every event, or only with events of the types in ``kinds``, never with
        events of the types in ``skip`` (a consumer that keeps all but the streamed fragments names them
        there, so a loop nobody watches live builds no fragment events)."""
        entry = (handler, None if kinds is None else tuple(kinds), tuple(skip))
        with self._lock:
            self._handlers = (*self._handlers, entry)
            self._refresh()

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._handlers:
                    index = self._handlers.index(entry)
                    self._handlers = self._handlers[:index] + self._handlers[index + 1:]
                    self._refresh()

        return unsubscribe

    def wants(self, event_type: type[Event]) -> bool:
        """Whether any subscriber would receive an event of ``event_type``."""
        if self._everything:
            return True
        verdicts = self._verdicts
        verdict = verdicts.get(event_type)
        if verdict is None:
            verdict = verdicts[event_type] = any(
                (kinds is None or issubclass(event_type, kinds)) and not issubclass(event_type, skip)
                for _, kinds, skip in self._handlers)
        return verdict

    def publish(self, event: Event) -> None:
        for handler, kinds, skip in self._handlers:  # the tuple of the moment: (un)subscribing makes a new one
            if (kinds is not None and not isinstance(event, kinds)) or (skip and isinstance(event, skip)):
                continue
            try:
                handler(event)
            except Exception:  # a display or logging failure must not stop the agent
                log.exception("event handler %r failed on %s", handler, event.kind)

    def _refresh(self) -> None:
        """Recompute what the subscribers want (the caller holds the lock)."""
        self._everything = any(kinds is None and not skip for _, kinds, skip in self._handlers)
        self._verdicts = {}
