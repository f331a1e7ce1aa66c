"""Turn events into lab rows, cleaned for storage: redacted, valid UTF-8, JSON-encoded.

One method per event kind says which rows the event becomes; the builder
remembers what later rows need from earlier events (tool-call names, when a
turn started, which sessions already have a row). Everything that can carry a
secret passes through the redactor here, so no other part of the store ever
sees unredacted text.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from datetime import datetime, timedelta
from typing import Any, Callable

from hermeslab.core.events import (
    ApiCallFinished,
    CompressionEvent,
    ErrorEvent,
    Event,
    MessageAdded,
    MessagesWithdrawn,
    RecoveryEvent,
    SessionEnded,
    SessionStarted,
    ToolCallFinished,
    TurnFinished,
    TurnStarted,
)
from hermeslab.core.messages import strip_surrogates
from hermeslab.store.batch import Batch, Row

log = logging.getLogger(__name__)

Redactor = Callable[[str], str]

#: Stored instead of a text the redactor failed on: never the unredacted text.
REDACTION_FAILED = "[not stored: redaction failed]"


class RowBuilder:
    """Turns events into rows, cleaned for storage (redacted, valid UTF-8, JSON-encoded).

    It remembers what later rows need from earlier events: the names of tool
    calls (a tool result carries only the call id), when each open turn
    started, and which sessions already have a row. It is used by one thread only.
    """

    def __init__(self, redact: Redactor | None = None):
        self._redact = redact
        self._tool_names: dict[str, dict[str, str]] = {}
        #: Open turns by ``_turn_key``: when each started, with what text, and in which session.
        self._open_turns: dict[tuple[str, int | str, str | None], tuple[float, str]] = {}
        #: Per open turn, how many of its answered calls carry our estimate instead of the provider's usage.
        self._estimated_calls: dict[tuple[str, int | str, str | None], int] = {}
        #: The session each open turn started in, so that a session's end forgets only its own turns.
        self._turn_sessions: dict[tuple[str, int | str, str | None], str] = {}
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
                    "started_at": utc(event.ts),
                    "title": self._private(event.title),
                    "system_prompt": self._private(event.system_prompt),
                    "reason": _opt_str(event.reason),
                    "run_id": _opt_str(event.run_id),
                },
            )
        )

    def _on_session_ended(self, event: SessionEnded, part: Batch) -> None:
        part.lifecycle.append(
            ("end", {"id": event.session_id, "ended_at": utc(event.ts), "end_reason": _opt_str(event.end_reason)})
        )
        self._tool_names.pop(event.session_id, None)
        if event.end_reason in _TURN_GOES_ON:  # a turn open here finishes in the session that continues it
            return
        for key in [key for key, sid in self._turn_sessions.items() if sid == event.session_id]:
            self._open_turns.pop(key, None)
            self._estimated_calls.pop(key, None)
            del self._turn_sessions[key]

    def _on_turn_started(self, event: TurnStarted, part: Batch) -> None:
        key = _turn_key(event)
        self._open_turns[key] = (float(event.ts), event.user_text)
        self._turn_sessions[key] = event.session_id

    def _on_turn_finished(self, event: TurnFinished, part: Batch) -> None:
        key = _turn_key(event)
        started_at, user_text = self._open_turns.pop(key, (None, None))
        estimated = self._estimated_calls.pop(key, 0)
        self._turn_sessions.pop(key, None)
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
                "estimated_calls": estimated,
                "error": self._private(event.error),
                "started_at": utc(started_at),
                "ended_at": utc(event.ts),
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
                "interrupted": bool(message.get("_interrupted")),
                "created_at": utc(event.ts),
                "run_id": _opt_str(event.run_id),
            },
        )
        part.count(event.session_id, "message_count", 1)

    def _on_messages_withdrawn(self, event: MessagesWithdrawn, part: Batch) -> None:
        part.withdrawn.extend(str(message_id) for message_id in event.message_ids)

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
                "server_model": _opt_str(event.server_model) or None,
                "estimated_prompt_tokens": _opt_int(event.estimated_prompt_tokens),
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "cache_read_tokens": cache_read,
                "cache_write_tokens": cache_write,
                "reasoning_tokens": reasoning,
                "usage_estimated": bool(event.usage_estimated),
                "usage_source": _opt_str(event.usage_source) or None,
                "purpose": _opt_str(event.purpose),
                "latency_ms": _opt_float(event.latency_ms),
                "finish_reason": _opt_str(event.finish_reason),
                "error_class": _opt_str(event.error_class),
                "error_message": self._private(event.error_message),
                "status_code": _opt_int(event.status_code),
                "partial_text": self._private(event.partial_text),
                "created_at": utc(event.ts),
            },
        )
        for counter, amount in (("all_api_call_count", 1), ("all_input_tokens", prompt),
                                ("all_output_tokens", completion)):
            part.count(event.session_id, counter, amount or 0)
        if event.purpose != "turn":  # every call counts in the all_ totals; the others are the user's turns'
            return
        estimated = int(bool(event.usage_estimated))  # a failed call's partial reply may carry an estimate too
        if estimated:
            key = _turn_key(event)
            self._estimated_calls[key] = self._estimated_calls.get(key, 0) + 1
        for counter, amount in (
            ("api_call_count", 1),
            ("estimated_calls", estimated),
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
                "created_at": utc(event.ts),
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
                "prompt_tokens_before": _opt_int(event.prompt_tokens_before),
                "prompt_tokens_after": _opt_int(event.prompt_tokens_after),
                "messages_before": _opt_int(event.messages_before),
                "messages_after": _opt_int(event.messages_after),
                "messages_dropped": _opt_int(event.messages_dropped),
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
                "summary_text": self._private(event.summary_text),
                "message_fates": _json(event.message_fates) if event.message_fates else None,
                "created_at": utc(event.ts),
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
                "created_at": utc(event.ts),
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
                "created_at": utc(event.ts),
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
            "ts": utc(event.ts),
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


#: Session end reasons after which the conversation, and the turn in flight, go on in a child session.
_TURN_GOES_ON = frozenset({"compression"})


def _turn_key(event: Event) -> tuple[str, int | str, str | None]:
    """What ties a turn's start to its end: its trace id, which a rotation in mid-turn keeps while the session
    id changes; (session, turn number) for events that carry no trace id."""
    if event.trace_id:
        return ("trace", event.trace_id, event.run_id)
    return (event.session_id, event.turn, event.run_id)


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


def utc(ts: float | None) -> datetime | None:
    """Event time (Unix seconds) as the naive UTC datetime stored in TIMESTAMP columns.

    Epoch plus a timedelta rounds to the microsecond as ``datetime.fromtimestamp`` does,
    at an eighth of its cost (a turn converts ~25 timestamps).
    """
    return None if ts is None else _EPOCH + timedelta(seconds=float(ts))


_EPOCH = datetime(1970, 1, 1)
#: Built once: ``json.dumps`` with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _json(value: Any) -> str:
    return strip_surrogates(_ENCODER.encode(value))

