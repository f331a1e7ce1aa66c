"""Registry and executor: validation, error results, ordering, concurrency, retries, interruption."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from hermeslab.tools import Tool, ToolError, ToolRegistry, ToolResult, TransientToolError, execute_tool_calls
from hermeslab.tools.executor import INTERRUPTED_TEXT

OBJECT = {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False}


def make_tool(name: str, handler, *, read_only: bool = False, idempotent: bool = False, parameters=None) -> Tool:
    return Tool(
        name=name,
        description=f"{name}: a test tool; use it in tests only.",
        parameters=parameters or OBJECT,
        handler=handler,
        read_only=read_only,
        idempotent=idempotent,
    )


def call(call_id: str, name: str, arguments: Any = None) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def run(calls, registry, **kwargs) -> list[ToolResult]:
    kwargs.setdefault("retry_backoff", 0.0)
    return execute_tool_calls(calls, registry, **kwargs)


# ---------------------------------------------------------------- Tool and ToolRegistry


def test_schema_is_the_openai_function_entry():
    tool = make_tool("echo", lambda args: "ok")
    assert tool.schema() == {
        "type": "function",
        "function": {"name": "echo", "description": tool.description, "parameters": OBJECT},
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "has space"}, "1-64 characters"),
        ({"name": ""}, "1-64 characters"),
        ({"description": "  "}, "description must be non-empty"),
        ({"parameters": {"type": "array"}}, '"type": "object"'),
        ({"parameters": {"type": "object", "properties": {"x": {"type": "no-such-type"}}}}, "not a valid JSON schema"),
        ({"handler": "not callable"}, "handler must be callable"),
    ],
)
def test_bad_tool_definitions_are_refused(kwargs, message):
    fields = {"name": "ok", "description": "a tool", "parameters": OBJECT, "handler": lambda args: ""}
    fields.update(kwargs)
    with pytest.raises(ValueError, match=message):
        Tool(**fields)


def test_registry_keeps_order_and_refuses_duplicates():
    registry = ToolRegistry()
    registry.register(make_tool("b", lambda args: ""))
    registry.register(make_tool("a", lambda args: ""))
    assert registry.names() == ["b", "a"]
    assert [s["function"]["name"] for s in registry.schemas()] == ["b", "a"]
    assert "a" in registry and "zzz" not in registry
    assert len(registry) == 2
    with pytest.raises(ValueError, match="already registered"):
        registry.register(make_tool("a", lambda args: ""))
    registry.unregister("b")
    assert registry.names() == ["a"]
    assert registry.get("b") is None
    with pytest.raises(KeyError, match="no tool named 'b'"):
        registry.unregister("b")


# ---------------------------------------------------------------- argument problems become error results


def counting_registry(**flags) -> tuple[ToolRegistry, list[dict]]:
    seen: list[dict] = []

    def handler(args: dict) -> str:
        seen.append(args)
        return "ran"

    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["path"],
        "additionalProperties": False,
    }
    return ToolRegistry([make_tool("read_file", handler, parameters=parameters, **flags)]), seen


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": "a"', "invalid arguments for read_file: arguments are not valid JSON"),
        ("[1, 2]", "invalid arguments for read_file: arguments must be a JSON object, got list"),
        ("{}", "invalid arguments for read_file: 'path' is a required property"),
        ('{"path": 3}', "invalid arguments for read_file: path: 3 is not of type 'string'"),
        ('{"path": "a", "n": 0}', "invalid arguments for read_file: n: 0 is less than the minimum of 1"),
        ('{"path": "a", "extra": 1}', "invalid arguments for read_file: unexpected property 'extra'"),
    ],
)
def test_invalid_arguments_give_an_error_result_and_never_reach_the_handler(arguments, expected):
    registry, seen = counting_registry(read_only=True, idempotent=True)
    [result] = run([call("c1", "read_file", arguments)], registry)
    assert result.is_error
    assert result.content.startswith(expected)
    assert result.attempts == 0
    assert result.arguments == arguments
    assert seen == []


def test_arguments_parsed_by_the_caller_are_used_as_given():
    registry, seen = counting_registry()
    calls = [call("c1", "read_file", {"path": "a"}), call("c2", "read_file", "{broken")]
    results = run(calls, registry, parsed_arguments=[{"path": "b"}, ValueError("arguments are not valid JSON")])
    assert seen == [{"path": "b"}]
    assert results[1].is_error and results[1].content == "invalid arguments for read_file: arguments are not valid JSON"
    assert results[1].arguments == "{broken" and results[1].attempts == 0
    with pytest.raises(ValueError, match="parsed_arguments holds 1 entries for 2 calls"):
        run(calls, registry, parsed_arguments=[{}])


def test_valid_arguments_reach_the_handler_and_empty_arguments_mean_an_empty_object():
    registry, seen = counting_registry()
    results = run([call("c1", "read_file", {"path": "a", "n": 2})], registry)
    assert [r.content for r in results] == ["ran"] and not results[0].is_error
    assert seen == [{"path": "a", "n": 2}]
    registry.register(make_tool("noargs", lambda args: f"args={args}"))
    [result] = run([call("c2", "noargs", "")], registry)
    assert result.content == "args={}"


def test_unknown_tool_lists_the_available_ones():
    registry, _ = counting_registry()
    [result] = run([call("c1", "rm_rf", {})], registry)
    assert result.is_error
    assert result.content == "unknown tool 'rm_rf'; available tools: read_file"
    assert result.message() == {"role": "tool", "tool_call_id": "c1", "content": result.content}


def test_arguments_given_as_an_object_are_accepted():
    registry, seen = counting_registry()
    [result] = run([{"id": "c1", "function": {"name": "read_file", "arguments": {"path": "a"}}}], registry)
    assert not result.is_error and seen == [{"path": "a"}]
    assert result.arguments == '{"path": "a"}'


def test_malformed_call_dicts_still_get_a_result():
    registry, _ = counting_registry()
    results = run([{"id": "c1"}, "not a dict"], registry)
    assert [r.is_error for r in results] == [True, True]
    assert results[0].tool_call_id == "c1"
    assert "unknown tool ''" in results[1].content


# ---------------------------------------------------------------- handler failures


def test_tool_error_text_is_the_result_and_other_exceptions_are_named():
    def fails(args):
        raise ToolError("no such file: x.txt")

    def crashes(args):
        raise KeyError("boom")

    def wrong_type(args):
        return {"not": "text"}

    registry = ToolRegistry([make_tool("fails", fails), make_tool("crashes", crashes), make_tool("wrong", wrong_type)])
    results = run([call("1", "fails"), call("2", "crashes"), call("3", "wrong")], registry)
    assert [(r.content, r.is_error, r.attempts) for r in results] == [
        ("no such file: x.txt", True, 1),
        ("KeyError: 'boom'", True, 1),
        ("TypeError: tool wrong returned dict, expected str", True, 1),
    ]


def flaky(fail_times: int, counter: list[int]):
    def handler(args):
        counter.append(1)
        if len(counter) <= fail_times:
            raise TransientToolError(f"busy (attempt {len(counter)})")
        return "finally"

    return handler


def test_idempotent_tool_is_retried_on_transient_failure():
    counter: list[int] = []
    registry = ToolRegistry([make_tool("t", flaky(2, counter), idempotent=True)])
    [result] = run([call("1", "t")], registry, idempotent_retries=2)
    assert (result.content, result.is_error, result.attempts) == ("finally", False, 3)
    assert len(counter) == 3


def test_retries_are_bounded_and_report_the_last_error():
    counter: list[int] = []
    registry = ToolRegistry([make_tool("t", flaky(10, counter), idempotent=True)])
    [result] = run([call("1", "t")], registry, idempotent_retries=2)
    assert (result.content, result.is_error, result.attempts) == ("busy (attempt 3)", True, 3)
    assert len(counter) == 3


def test_non_idempotent_tool_is_not_retried():
    counter: list[int] = []
    registry = ToolRegistry([make_tool("t", flaky(1, counter), idempotent=False)])
    [result] = run([call("1", "t")], registry, idempotent_retries=5)
    assert (result.content, result.is_error, result.attempts) == ("busy (attempt 1)", True, 1)
    assert len(counter) == 1


def test_plain_tool_error_is_not_retried_even_when_idempotent():
    counter: list[int] = []

    def handler(args):
        counter.append(1)
        raise ToolError("permanent")

    registry = ToolRegistry([make_tool("t", handler, idempotent=True)])
    [result] = run([call("1", "t")], registry)
    assert result.attempts == 1 and len(counter) == 1


def test_retry_backoff_is_applied_between_attempts():
    counter: list[int] = []
    registry = ToolRegistry([make_tool("t", flaky(2, counter), idempotent=True)])
    started = time.perf_counter()
    [result] = run([call("1", "t")], registry, retry_backoff=0.05)
    assert not result.is_error
    assert time.perf_counter() - started >= 0.1
    assert result.duration_ms >= 100


# ---------------------------------------------------------------- ordering and concurrency


def test_consecutive_read_only_calls_run_concurrently():
    barrier = threading.Barrier(3, timeout=5)

    def meet(args):
        barrier.wait()  # only returns once three calls are running at the same time
        return args["x"]

    registry = ToolRegistry([make_tool("meet", meet, read_only=True)])
    calls = [call(f"c{i}", "meet", {"x": str(i)}) for i in range(3)]
    results = run(calls, registry, max_workers=3)
    assert [(r.tool_call_id, r.content, r.is_error) for r in results] == [("c0", "0", False), ("c1", "1", False), ("c2", "2", False)]


def test_read_only_calls_wait_for_a_free_worker():
    barrier = threading.Barrier(3, timeout=0.5)

    def meet(args):
        barrier.wait()
        return "met"

    registry = ToolRegistry([make_tool("meet", meet, read_only=True)])
    results = run([call(f"c{i}", "meet") for i in range(3)], registry, max_workers=2)
    # With two workers the third party never arrives: the barrier breaks for everyone.
    assert all(r.is_error and "BrokenBarrierError" in r.content for r in results)


def test_side_effecting_call_runs_alone_between_concurrent_groups():
    log: list[str] = []
    lock = threading.Lock()
    first_pair = threading.Barrier(2, timeout=5)
    second_pair = threading.Barrier(2, timeout=5)

    def record(entry: str) -> None:
        with lock:
            log.append(entry)

    def reader(args):
        barrier = first_pair if args["x"] in ("r1", "r2") else second_pair
        record(f"start {args['x']}")
        barrier.wait()
        time.sleep(0.02)
        record(f"end {args['x']}")
        return f"read {args['x']}"

    def writer(args):
        record("write")
        return "written"

    registry = ToolRegistry([make_tool("read", reader, read_only=True), make_tool("write", writer)])
    calls = [
        call("1", "read", {"x": "r1"}),
        call("2", "read", {"x": "r2"}),
        call("3", "write", {"x": "w"}),
        call("4", "read", {"x": "r3"}),
        call("5", "read", {"x": "r4"}),
    ]
    results = run(calls, registry)
    assert [r.tool_call_id for r in results] == ["1", "2", "3", "4", "5"]
    assert [r.content for r in results] == ["read r1", "read r2", "written", "read r3", "read r4"]
    write_at = log.index("write")
    assert {"end r1", "end r2"} <= set(log[:write_at])
    assert {"start r3", "start r4"} <= set(log[write_at + 1:])


def test_side_effecting_calls_keep_their_order():
    log: list[str] = []
    registry = ToolRegistry([make_tool("step", lambda args: log.append(args["x"]) or args["x"])])
    run([call(str(i), "step", {"x": str(i)}) for i in range(6)], registry, max_workers=4)
    assert log == ["0", "1", "2", "3", "4", "5"]


def test_results_follow_call_order_even_when_later_calls_finish_first():
    def sleepy(args):
        time.sleep(float(args["x"]))
        return args["x"]

    registry = ToolRegistry([make_tool("sleepy", sleepy, read_only=True)])
    finished: list[str] = []
    results = run(
        [call("slow", "sleepy", {"x": "0.2"}), call("fast", "sleepy", {"x": "0"})],
        registry,
        on_finish=lambda result: finished.append(result.tool_call_id),
    )
    assert [r.tool_call_id for r in results] == ["slow", "fast"]
    assert finished == ["fast", "slow"]


# ---------------------------------------------------------------- interruption and callbacks


def test_should_stop_interrupts_the_calls_not_yet_started():
    ran: list[str] = []
    registry = ToolRegistry([make_tool("step", lambda args: ran.append(args["x"]) or "done")])
    results = run(
        [call(str(i), "step", {"x": str(i)}) for i in range(4)],
        registry,
        should_stop=lambda: len(ran) >= 2,
    )
    assert ran == ["0", "1"]
    assert [r.content for r in results] == ["done", "done", INTERRUPTED_TEXT, INTERRUPTED_TEXT]
    assert [r.is_error for r in results] == [False, False, True, True]
    assert [r.attempts for r in results] == [1, 1, 0, 0]
    assert [r.tool_call_id for r in results] == ["0", "1", "2", "3"]


def test_a_stop_request_is_final_for_the_batch():
    answers = iter([False, True, False, False])
    ran: list[str] = []
    registry = ToolRegistry([make_tool("step", lambda args: ran.append(args["x"]) or "done")])
    results = run([call(str(i), "step", {"x": str(i)}) for i in range(4)], registry, should_stop=lambda: next(answers))
    assert ran == ["0"]
    assert [r.content for r in results] == ["done"] + [INTERRUPTED_TEXT] * 3


def test_should_stop_applies_inside_a_concurrent_group():
    ran: list[str] = []
    lock = threading.Lock()

    def read(args):
        with lock:
            ran.append(args["x"])
        return "read"

    registry = ToolRegistry([make_tool("read", read, read_only=True)])
    results = run([call(str(i), "read", {"x": str(i)}) for i in range(5)], registry, max_workers=1, should_stop=lambda: len(ran) >= 2)
    assert [r.content for r in results] == ["read", "read"] + [INTERRUPTED_TEXT] * 3


def test_callbacks_see_every_started_call_and_every_result():
    started: list[str] = []
    finished: list[tuple[str, bool]] = []
    registry = ToolRegistry([make_tool("ok", lambda args: "fine", read_only=True)])
    calls = [call("a", "ok"), call("b", "missing"), call("c", "ok")]
    run(
        calls,
        registry,
        on_start=lambda c: started.append(c["id"]),
        on_finish=lambda r: finished.append((r.tool_call_id, r.is_error)),
    )
    assert sorted(started) == ["a", "b", "c"]
    assert sorted(finished) == [("a", False), ("b", True), ("c", False)]


def test_interrupted_calls_are_reported_but_not_started():
    started: list[str] = []
    finished: list[str] = []
    registry = ToolRegistry([make_tool("ok", lambda args: "fine")])
    run(
        [call("a", "ok"), call("b", "ok")],
        registry,
        should_stop=lambda: True,
        on_start=lambda c: started.append(c["id"]),
        on_finish=lambda r: finished.append(r.content),
    )
    assert started == []
    assert finished == [INTERRUPTED_TEXT, INTERRUPTED_TEXT]


@pytest.mark.parametrize(("kwargs", "message"), [({"max_workers": 0}, "max_workers"), ({"idempotent_retries": -1}, "idempotent_retries")])
def test_bad_executor_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        execute_tool_calls([], ToolRegistry(), **kwargs)
