"""Run the tool calls of one assistant message and pair every call with a result.

Nothing a call does (bad JSON, an unknown tool, a crashing handler) escapes as
an exception: each failure becomes an error result the model can read, so the
agent loop always gets exactly one result per call, in call order.

Scheduling: a run of consecutive read-only calls executes concurrently; any
other call waits for everything before it and runs alone, so ``write a`` then
``read a`` keeps its order.
"""

from __future__ import annotations

import json
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hermeslab.core.events import ToolCallFinished, ToolCallStarted
from hermeslab.core.messages import parse_tool_arguments
from hermeslab.tools.registry import Tool, ToolError, ToolRegistry, TransientToolError
from hermeslab.tools.schema_check import validate

INTERRUPTED_TEXT = "interrupted before running"


@dataclass
class ToolResult:
    tool_call_id: str
    name: str
    #: The raw JSON arguments string as the model sent it.
    arguments: str
    content: str
    is_error: bool
    duration_ms: float
    #: Handler invocations; 0 when the call never reached its handler.
    attempts: int

    def message(self) -> dict[str, Any]:
        """The ``tool`` message that answers the call in the conversation."""
        return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.content}


@dataclass(frozen=True)
class _Call:
    index: int
    raw: Any
    id: str
    name: str
    arguments: str
    #: The arguments already parsed (or why they do not parse); None parses ``arguments`` when the call runs.
    parsed: dict[str, Any] | ValueError | None = None


def tool_events(emit: Callable[..., None]) -> tuple[Callable[[Any], None], Callable[[ToolResult], None]]:
    """``on_start`` and ``on_finish`` callbacks that publish each call's start and result through ``emit``."""
    def started(call: Any) -> None:
        function = (call.get("function") if isinstance(call, dict) else None) or {}
        emit(ToolCallStarted, tool_call_id=call.get("id", "") if isinstance(call, dict) else "",
             name=function.get("name", ""), arguments=function.get("arguments", ""))

    def finished(outcome: ToolResult) -> None:
        emit(ToolCallFinished, tool_call_id=outcome.tool_call_id, name=outcome.name, arguments=outcome.arguments,
             result=outcome.content, is_error=outcome.is_error, duration_ms=outcome.duration_ms,
             attempts=outcome.attempts)

    return started, finished


def execute_tool_calls(
    calls: list[dict[str, Any]],
    registry: ToolRegistry,
    *,
    on_start: Callable[[Any], None] | None = None,
    on_finish: Callable[[ToolResult], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    idempotent_retries: int = 2,
    max_workers: int = 4,
    retry_backoff: float = 0.25,
    parsed_arguments: Sequence[dict[str, Any] | ValueError] | None = None,
) -> list[ToolResult]:
    """Execute ``calls`` (an assistant message's ``tool_calls``); results come back in call order.

    ``should_stop`` is asked before each call starts; once it answers True the
    calls not yet started get an "interrupted before running" result.
    ``on_start`` receives the call dict of each call that starts and
    ``on_finish`` every result; both run on the calling thread.
    ``retry_backoff`` is the pause in seconds before retrying a transient failure.
    ``parsed_arguments`` are the calls' arguments as the caller already parsed
    them (``recovery.repair.read_tool_arguments``), so they are not parsed again.
    """
    if max_workers < 1:
        raise ValueError(f"max_workers must be at least 1, got {max_workers}")
    if idempotent_retries < 0:
        raise ValueError(f"idempotent_retries must be 0 or more, got {idempotent_retries}")
    if parsed_arguments is not None and len(parsed_arguments) != len(calls):
        raise ValueError(f"parsed_arguments holds {len(parsed_arguments)} entries for {len(calls)} calls")
    parsed = [_read_call(index, call, None if parsed_arguments is None else parsed_arguments[index])
              for index, call in enumerate(calls)]
    results: dict[int, ToolResult] = {}
    stopped = False

    def run(call: _Call) -> ToolResult:
        return _run_call(call, registry, idempotent_retries, retry_backoff)

    def start(call: _Call) -> bool:
        nonlocal stopped
        stopped = stopped or (should_stop is not None and should_stop())
        if stopped:
            finish(call, _error_result(call, INTERRUPTED_TEXT, 0.0, 0))
            return False
        if on_start is not None:
            on_start(call.raw)
        return True

    def finish(call: _Call, result: ToolResult) -> None:
        results[call.index] = result
        if on_finish is not None:
            on_finish(result)

    for batch in _batches(parsed, registry):
        if len(batch) == 1:
            if start(batch[0]):
                finish(batch[0], run(batch[0]))
        else:
            _run_concurrently(batch, run, start, finish, max_workers)
    return [results[index] for index in range(len(parsed))]


def _read_call(index: int, call: Any, parsed: dict[str, Any] | ValueError | None) -> _Call:
    """Pull id, name and arguments out of a call dict without trusting its shape."""
    if not isinstance(call, dict):
        return _Call(index, call, "", "", "", parsed)
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments = function.get("arguments")
    if arguments is None:
        arguments = ""
    elif isinstance(arguments, dict):  # some servers send the object itself instead of its JSON text
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        arguments = str(arguments)
    return _Call(index, call, str(call.get("id") or ""), str(function.get("name") or ""), arguments, parsed)


def _batches(calls: list[_Call], registry: ToolRegistry) -> list[list[_Call]]:
    """Group consecutive read-only calls; every other call is a batch of its own.

    Calls to unknown tools touch nothing, so they may join a read-only group.
    """
    batches: list[list[_Call]] = []
    group: list[_Call] = []
    for call in calls:
        tool = registry.get(call.name)
        if tool is None or tool.read_only:
            group.append(call)
            continue
        if group:
            batches.append(group)
            group = []
        batches.append([call])
    if group:
        batches.append(group)
    return batches


def _run_concurrently(
    batch: list[_Call],
    run: Callable[[_Call], ToolResult],
    start: Callable[[_Call], bool],
    finish: Callable[[_Call, ToolResult], None],
    max_workers: int,
) -> None:
    """Keep up to ``max_workers`` calls in flight, starting the next as one completes."""
    waiting = deque(batch)
    running: dict[Future[ToolResult], _Call] = {}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(batch)), thread_name_prefix="tool") as pool:
        while waiting or running:
            while waiting and len(running) < max_workers:
                call = waiting.popleft()
                if start(call):
                    running[pool.submit(run, call)] = call
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                finish(running.pop(future), future.result())


def _run_call(call: _Call, registry: ToolRegistry, retries: int, backoff: float) -> ToolResult:
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000.0

    tool = registry.get(call.name)
    if tool is None:
        available = ", ".join(registry.names()) or "none"
        text = f"unknown tool {call.name!r}; available tools: {available}"
        return _error_result(call, text, elapsed(), 0)
    try:
        arguments = _validated_arguments(tool, call.arguments if call.parsed is None else call.parsed)
    except ValueError as exc:
        return _error_result(call, f"invalid arguments for {tool.name}: {exc}", elapsed(), 0)

    attempts = 0
    while True:
        attempts += 1
        try:
            content = tool.handler(dict(arguments))
            if not isinstance(content, str):
                raise TypeError(f"tool {tool.name} returned {type(content).__name__}, expected str")
        except TransientToolError as exc:
            if tool.idempotent and attempts <= retries:
                time.sleep(backoff)
                continue
            return _error_result(call, _text_of(exc), elapsed(), attempts)
        except ToolError as exc:
            return _error_result(call, _text_of(exc), elapsed(), attempts)
        except Exception as exc:  # a broken handler must not end the turn
            return _error_result(call, f"{type(exc).__name__}: {exc}", elapsed(), attempts)
        return ToolResult(call.id, call.name, call.arguments, content, False, elapsed(), attempts)


def _validated_arguments(tool: Tool, given: str | dict[str, Any] | ValueError) -> dict[str, Any]:
    """Parse (unless ``given`` is the parse already) and schema-check arguments; ValueError names the first problem."""
    if isinstance(given, ValueError):
        raise given
    arguments = parse_tool_arguments(given) if isinstance(given, str) else given
    validate(arguments, tool.parameters)
    return arguments


def _text_of(exc: ToolError) -> str:
    return str(exc) or type(exc).__name__


def _error_result(call: _Call, text: str, duration_ms: float, attempts: int) -> ToolResult:
    return ToolResult(call.id, call.name, call.arguments, text, True, duration_ms, attempts)
