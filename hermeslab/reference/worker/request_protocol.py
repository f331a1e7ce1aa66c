"""The worker's wire protocol: JSON-line requests checked, dispatched to the engine and answered.

One JSON object per line on stdin, ``{"id": <any>, "op": <name>, "args": {...}}``,
and exactly one JSON line per request on stdout: ``{"id", "ok": true, "result"}``
or ``{"id", "ok": false, "error", "traceback"}``. A bad request never stops the
worker; it answers with an error and reads the next line. The client side is
``hermeslab.reference.client.HermesReference``.
"""

from __future__ import annotations

import json
import os
import platform
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from typing import Any, TextIO

from reference_engine import ReferenceEngine

HERMES_DISTRIBUTION = "hermes-agent"


class RequestError(ValueError):
    """A request the worker cannot serve as asked; the message says what to fix."""


# ---------------------------------------------------------------- checking a request


def _messages(args: dict, key: str = "messages") -> list[dict]:
    value = args.get(key)
    if not isinstance(value, list):
        raise RequestError(f"'{key}' must be a list of message objects, got {type(value).__name__}")
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"'{key}'[{index}] must be an object with a string 'role'")
    return value


def _integer(args: dict, key: str, *, minimum: int, default: int | None = None) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'{key}' must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise RequestError(f"'{key}' must be at least {minimum}, got {value}")
    return value


def _sessions(args: dict) -> list[dict]:
    sessions = args.get("sessions")
    if not isinstance(sessions, list):
        raise RequestError(f"'sessions' must be a list, got {type(sessions).__name__}")
    for index, session in enumerate(sessions):
        if not isinstance(session, dict):
            raise RequestError(f"sessions[{index}] must be an object")
        _messages(session)
        tools = session.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise RequestError(f"sessions[{index}]['tools'] must be a list or null")
    return sessions


def _planned_sessions(args: dict) -> list[dict]:
    """Sessions planned by the client: system prompt, tools, turns (users, replies, stop_after), results."""
    sessions = args.get("sessions")
    if not isinstance(sessions, list):
        raise RequestError(f"'sessions' must be a list, got {type(sessions).__name__}")
    for index, session in enumerate(sessions):
        if not isinstance(session, dict) or not isinstance(session.get("turns"), list):
            raise RequestError(f"sessions[{index}] must be an object with a 'turns' list")
        if not isinstance(session.get("results", {}), dict):
            raise RequestError(f"sessions[{index}]['results'] must be an object")
        for turn in session["turns"]:
            if not isinstance(turn, dict):
                raise RequestError(f"sessions[{index}]: every turn must be an object")
            _messages(turn, "replies")
    return sessions


def _counter(args: dict) -> dict:
    counter = args.get("counter")
    if not isinstance(counter, dict) or not isinstance(counter.get("bindings_path"), str) \
            or not isinstance(counter.get("encoding"), str):
        raise RequestError("'counter' must be an object with string 'bindings_path' and 'encoding'")
    return counter


def _optional_text(args: dict, key: str) -> str | None:
    value = args.get(key)
    if value is not None and not isinstance(value, str):
        raise RequestError(f"'{key}' must be a string or null, got {type(value).__name__}")
    return value


def _flag(args: dict, key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise RequestError(f"'{key}' must be true or false, got {type(value).__name__}")
    return value


def build_handlers(engine: ReferenceEngine) -> dict[str, Callable[[dict], Any]]:
    """Map each operation name to a function of the request's ``args``."""
    started = time.time()
    return {
        "hello": lambda args: {
            "hermes_version": metadata.version(HERMES_DISTRIBUTION),
            "python": platform.python_version(),
            "pid": os.getpid(),
            "started_at": started,
        },
        "ping": lambda args: {},
        "usage": lambda args: {"cpu_seconds": time.process_time(), "pid": os.getpid()},
        "plan": lambda args: engine.plan(
            _messages(args),
            _integer(args, "context_length", minimum=1),
            _integer(args, "compression_count", minimum=0, default=0),
            _optional_text(args, "previous_summary"),
        ),
        "compress": lambda args: engine.compress(_messages(args), _integer(args, "context_length", minimum=1)),
        "time_compress": lambda args: engine.time_compress(
            _messages(args),
            _integer(args, "context_length", minimum=1),
            _integer(args, "repeats", minimum=1),
            _flag(args, "with_cpu"),
        ),
        "agent_replay_many": lambda args: engine.agent_replay_many(
            _planned_sessions(args), _integer(args, "context_length", minimum=1), _counter(args)),
        "replay_many": lambda args: engine.replay_many(_sessions(args), _integer(args, "context_length", minimum=1)),
        "replay_many_timed": lambda args: engine.replay_many_timed(
            _sessions(args), _integer(args, "context_length", minimum=1)),
    }


# ---------------------------------------------------------------- serving


def answer(line: str, handlers: dict[str, Callable[[dict], Any]]) -> dict:
    """The reply to one request line; never raises."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return {"id": None, "ok": False, "error": f"malformed request line (not JSON): {exc}", "traceback": ""}
    if not isinstance(request, dict):
        return {"id": None, "ok": False, "error": "a request must be a JSON object", "traceback": ""}
    request_id = request.get("id")
    op, args = request.get("op"), request.get("args", {})
    handler = handlers.get(op) if isinstance(op, str) else None
    if handler is None:
        known = ", ".join(sorted(handlers))
        return {"id": request_id, "ok": False, "error": f"unknown op {op!r}; known ops: {known}", "traceback": ""}
    if not isinstance(args, dict):
        return {"id": request_id, "ok": False, "error": "'args' must be a JSON object", "traceback": ""}
    try:
        return {"id": request_id, "ok": True, "result": handler(args)}
    except RequestError as exc:
        return {"id": request_id, "ok": False, "error": f"{op}: {exc}", "traceback": ""}
    except Exception as exc:
        return {
            "id": request_id,
            "ok": False,
            "error": f"{op} failed inside Hermes: {type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }


def encode(reply: dict) -> str:
    """One reply as a JSON line; a result that JSON cannot hold becomes an error reply."""
    try:
        return json.dumps(reply, ensure_ascii=True)
    except (TypeError, ValueError) as exc:
        return json.dumps({
            "id": reply.get("id"),
            "ok": False,
            "error": f"the result could not be encoded as JSON: {exc}",
            "traceback": traceback.format_exc(),
        })


def serve(requests: TextIO, replies: TextIO, handlers: dict[str, Callable[[dict], Any]]) -> None:
    """Answer every non-blank request line with one flushed reply line, until the input ends."""
    for line in requests:
        if not line.strip():
            continue
        replies.write(encode(answer(line, handlers)) + "\n")
        replies.flush()
