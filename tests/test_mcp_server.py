"""``hermeslab mcp-server``: the lab's log as read-only MCP tools, in process and as a real server process."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from hermeslab.core.events import (
    ApiCallFinished,
    CompressionEvent,
    MessageAdded,
    RecoveryEvent,
    SessionEnded,
    SessionStarted,
    ToolCallFinished,
    TurnFinished,
)
from hermeslab.mcp_server import build_server, lineage
from hermeslab.store import StoreWriter
from hermeslab.tools import ToolRegistry
from hermeslab.tools.mcp.manager import MCPManager

TOOLS = ["list_sessions", "session_messages", "turn_usage", "compressions", "recoveries"]


def write_lab(path: Path) -> None:
    """s1 (cli) is compressed into s2; s3 (notebook) branches from s1."""
    writer = StoreWriter(path)
    seq = 0

    def message(session: str, turn: int, **message: Any) -> MessageAdded:
        nonlocal seq
        seq += 1
        return MessageAdded(session_id=session, turn=turn, message_id=f"m{seq}", parent_id=None, seq=seq,
                            message=message, tokens=3)

    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    for event in [
        SessionStarted(session_id="s1", source="cli", model="m", title="inventory"),
        message("s1", 1, role="user", content="read a.py " + "x" * 500),
        message("s1", 1, role="assistant", content="", tool_calls=[call]),
        message("s1", 1, role="tool", tool_call_id="c1", content="print('a')"),
        ToolCallFinished(session_id="s1", turn=1, tool_call_id="c1", name="read_file", arguments="{}", result="a"),
        ApiCallFinished(session_id="s1", turn=1, call_index=0, attempt=1, prompt_tokens=120, completion_tokens=8),
        RecoveryEvent(session_id="s1", turn=1, fault_class="rate_limit", action="retry", delay_s=2.0, outcome="ok"),
        ApiCallFinished(session_id="s1", turn=1, call_index=1, attempt=1, prompt_tokens=150, completion_tokens=20),
        TurnFinished(session_id="s1", turn=1, status="completed"),
        CompressionEvent(session_id="s1", turn=2, trigger="preflight", tokens_before=4000, tokens_after=900,
                         mode="rotation", new_session_id="s2", details={"pruned": [2]}),
        SessionEnded(session_id="s1", end_reason="compression"),
        SessionStarted(session_id="s2", parent_session_id="s1", reason="compression", source="cli"),
        message("s2", 2, role="user", content="continue"),
        TurnFinished(session_id="s2", turn=2),
        SessionStarted(session_id="s3", parent_session_id="s1", reason="branch", source="notebook"),
        message("s3", 1, role="user", content="old"),
        message("s3", 1, role="assistant", content="older answer"),
        CompressionEvent(session_id="s3", turn=1, trigger="manual", mode="in_place", archived_before_seq=seq + 1),
        message("s3", 1, role="user", content="new"),
        TurnFinished(session_id="s3", turn=1),
    ]:
        writer.handle(event)
    writer.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mcp-lab") / "lab.duckdb"
    write_lab(path)
    return path


def call(server: Any, name: str, **arguments: Any) -> Any:
    """The tool's JSON answer; an error result raises AssertionError with its text."""
    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(name, arguments)

    result = anyio.run(go)
    text = result.content[0].text
    if result.is_error:
        raise AssertionError(text)
    return json.loads(text)


def test_lineage_runs_from_the_root_and_stops_at_cycles_and_gaps():
    parents = {"c": "b", "b": "a", "a": None, "x": "y", "y": "x", "orphan": "gone"}
    assert lineage(parents, "c") == ["a", "b", "c"]
    assert lineage(parents, "x") == ["y", "x"]
    assert lineage(parents, "orphan") == ["gone", "orphan"]
    assert lineage(parents, "unknown") == ["unknown"]


def test_the_server_offers_read_only_tools(lab):
    async def go() -> Any:
        async with Client(build_server(lab)) as client:
            return (await client.list_tools()).tools

    tools = anyio.run(go)
    assert [tool.name for tool in tools] == TOOLS
    assert all(tool.annotations.read_only_hint and tool.annotations.idempotent_hint for tool in tools)


def test_sessions_come_newest_first_with_lineage_and_children(lab):
    answer = call(build_server(lab), "list_sessions")
    assert answer["total"] == 3 and answer["lab"] == str(lab)
    by_id = {row["id"]: row for row in answer["sessions"]}
    assert [row["id"] for row in answer["sessions"]] == ["s3", "s2", "s1"]
    assert by_id["s2"]["lineage"] == ["s1", "s2"] and by_id["s2"]["reason"] == "compression"
    assert sorted(by_id["s1"]["children"]) == ["s2", "s3"] and by_id["s1"]["lineage"] == ["s1"]
    assert by_id["s1"]["input_tokens"] == 270 and by_id["s1"]["end_reason"] == "compression"
    assert by_id["s1"]["started_at"].startswith("20")
    page = call(build_server(lab), "list_sessions", limit=1, offset=1, source="cli")
    assert page["total"] == 2 and [row["id"] for row in page["sessions"]] == ["s1"]


def test_messages_come_in_order_with_tool_calls_cut_contents_and_archived_rows(lab):
    server = build_server(lab)
    answer = call(server, "session_messages", session_id="s1", max_chars=20)
    rows = answer["messages"]
    assert [row["role"] for row in rows] == ["user", "assistant", "tool"] and answer["total"] == 3
    assert rows[0]["content"].startswith("read a.py xxxxxxxxxx…") and "[490 more characters]" in rows[0]["content"]
    assert rows[1]["tool_calls"][0]["function"]["name"] == "read_file"
    assert rows[2]["tool_call_id"] == "c1" and rows[2]["tool_name"] == "read_file"
    branch = call(server, "session_messages", session_id="s3")
    assert [(row["content"], row["active"]) for row in branch["messages"]] == [
        ("old", False), ("older answer", False), ("new", True)]
    active = call(server, "session_messages", session_id="s3", active_only=True)
    assert [row["content"] for row in active["messages"]] == ["new"]


def test_turn_usage_compressions_and_recoveries(lab):
    server = build_server(lab)
    [turn] = call(server, "turn_usage", session_id="s1")["turns"]
    assert [turn[key] for key in ("api_calls", "tool_calls", "last_prompt_tokens", "prompt_tokens")] == [2, 1, 150, 270]
    compressions = call(server, "compressions")
    assert compressions["total"] == 2
    rotation = call(server, "compressions", session_id="s1")["compressions"][0]
    assert (rotation["trigger"], rotation["mode"], rotation["new_session_id"], rotation["tokens_after"]) == (
        "preflight", "rotation", "s2", 900)
    assert rotation["details"] == {"pruned": [2]}
    [recovery] = call(server, "recoveries", session_id="s1")["recoveries"]
    assert (recovery["fault_class"], recovery["action"], recovery["delay_s"]) == ("rate_limit", "retry", 2.0)
    assert call(server, "recoveries", session_id="s2")["recoveries"] == []


@pytest.mark.parametrize("name, arguments, message", [
    ("turn_usage", {"session_id": "nope"}, "no session 'nope'"),
    ("compressions", {"session_id": "nope"}, "no session 'nope'"),
    ("session_messages", {"session_id": "s1", "max_chars": -1}, "max_chars must be 0"),
    ("list_sessions", {"limit": 0}, "limit must be at least 1"),
    ("list_sessions", {"offset": -2}, "offset must be 0 or more"),
])
def test_bad_requests_get_a_clear_error(lab, name, arguments, message):
    with pytest.raises(AssertionError, match=message):
        call(build_server(lab), name, **arguments)


def test_a_missing_lab_reads_as_empty_and_is_not_created(tmp_path):
    path = tmp_path / "none.duckdb"
    assert call(build_server(path), "list_sessions")["sessions"] == []
    assert not path.exists()


def _command(lab: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hermeslab.cli", "mcp-server", "--lab", str(lab), *extra]


def test_the_stdio_server_process_answers_the_client_manager_while_the_lab_grows(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="hermeslab.tools.mcp")
    path = tmp_path / "live.duckdb"
    write_lab(path)
    command = _command(path)
    registry = ToolRegistry()
    with MCPManager({"lab": {"command": command[0], "args": command[1:], "connect_timeout": 60}}) as manager:
        manager.start(registry)
        assert [name for name in registry.names()] == [f"lab__{tool}" for tool in TOOLS]
        assert all(registry.get(name).read_only for name in registry.names())
        assert json.loads(registry.get("lab__list_sessions").handler({}))["total"] == 3
        writer = StoreWriter(path)  # the server holds no lock on the file: an agent keeps logging
        writer.handle(SessionStarted(session_id="s4", source="cli"))
        writer.close()
        answer = json.loads(registry.get("lab__list_sessions").handler({"limit": 1}))
        assert answer["total"] == 4 and answer["sessions"][0]["id"] == "s4"
        usage = json.loads(manager.call("lab", "turn_usage", {"session_id": "s1"}))
        assert usage["turns"][0]["prompt_tokens"] == 270
    assert "MCP server 'lab' connected with 5 tools" in caplog.messages  # no event bus: the log says it


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_server_speaks_streamable_http(lab):
    port = _free_port()
    process = subprocess.Popen(_command(lab, "--http", str(port)), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout.readline().strip() == (f"hermeslab lab server at http://127.0.0.1:{port}/mcp "
                                                      "(Ctrl+C to stop)")
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.1)
        registry = ToolRegistry()
        with MCPManager({"lab": {"url": f"http://127.0.0.1:{port}/mcp"}}) as manager:
            manager.start(registry)
            assert manager.status()["lab"].state == "ready"
            answer = json.loads(registry.get("lab__session_messages").handler({"session_id": "s2"}))
            assert [row["content"] for row in answer["messages"]] == ["continue"]
    finally:
        process.terminate()
        process.wait(timeout=30)
