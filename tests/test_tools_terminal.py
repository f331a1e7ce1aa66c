"""The terminal tool: exit codes, working directory, timeouts that kill the whole group, output capping."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hermeslab.core.config import TerminalConfig, ToolsConfig
from hermeslab.tools import builtin_registry, execute_tool_calls
from hermeslab.tools.terminal import cap_output


def terminal_registry(root: Path, **terminal):
    return builtin_registry(ToolsConfig(workspace=str(root), terminal=TerminalConfig(enabled=True, **terminal)))


def run_terminal(registry, **arguments):
    [result] = execute_tool_calls(
        [{"id": "t1", "type": "function", "function": {"name": "terminal", "arguments": json.dumps(arguments)}}],
        registry,
    )
    return result


def process_is_gone(pid: int) -> bool:
    """True when the process no longer exists or is only a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_terminal_is_absent_unless_enabled(tmp_path: Path):
    assert "terminal" not in builtin_registry(ToolsConfig(workspace=str(tmp_path)))
    tool = terminal_registry(tmp_path).get("terminal")
    assert tool is not None and not tool.read_only and not tool.idempotent


def test_exit_code_and_combined_output(tmp_path: Path):
    registry = terminal_registry(tmp_path)
    ok = run_terminal(registry, command="echo out; echo err 1>&2")
    assert not ok.is_error
    assert ok.content == "exit code 0\nout\nerr"
    failed = run_terminal(registry, command="echo about to fail; exit 3")
    assert failed.content == "exit code 3\nabout to fail"
    quiet = run_terminal(registry, command="true")
    assert quiet.content == "exit code 0\n(no output)"


def test_runs_in_the_workspace_root_with_stdin_closed(tmp_path: Path):
    (tmp_path / "marker.txt").write_text("present\n")
    registry = terminal_registry(tmp_path)
    assert run_terminal(registry, command="cat marker.txt").content == "exit code 0\npresent"
    # A command waiting for input gets EOF instead of hanging.
    assert run_terminal(registry, command="cat", timeout=5).content == "exit code 0\n(no output)"


def test_timeout_kills_the_command_quickly(tmp_path: Path):
    registry = terminal_registry(tmp_path)
    started = time.perf_counter()
    result = run_terminal(registry, command="sleep 30", timeout=0.5)
    elapsed = time.perf_counter() - started
    assert elapsed < 5
    assert result.content.startswith("exit code -9 (timed out after 0.5 s; the command's whole process group was killed)")


def test_timeout_kills_background_children_and_keeps_partial_output(tmp_path: Path):
    registry = terminal_registry(tmp_path)
    command = "sleep 30 & echo child $!; echo started; wait"
    started = time.perf_counter()
    result = run_terminal(registry, command=command, timeout=0.5)
    assert time.perf_counter() - started < 5
    lines = result.content.splitlines()
    assert "timed out" in lines[0]
    assert "started" in lines
    child_pid = int(next(line for line in lines if line.startswith("child ")).split()[1])
    deadline = time.monotonic() + 3
    while not process_is_gone(child_pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_is_gone(child_pid)


def test_config_timeout_is_the_default(tmp_path: Path):
    registry = terminal_registry(tmp_path, timeout=0.3)
    started = time.perf_counter()
    result = run_terminal(registry, command="sleep 30")
    assert time.perf_counter() - started < 5
    assert "timed out after 0.3 s" in result.content


def test_output_is_capped_keeping_head_and_tail(tmp_path: Path):
    registry = terminal_registry(tmp_path, max_output_chars=1000)
    result = run_terminal(registry, command="echo FIRST; seq 1 20000; echo LAST")
    body = result.content.split("\n", 1)[1]
    assert result.content.startswith("exit code 0\nFIRST\n1\n")
    assert body.endswith("20000\nLAST")
    assert "characters omitted" in body
    assert len(body) < 1100


def test_empty_command_is_refused(tmp_path: Path):
    result = run_terminal(terminal_registry(tmp_path), command="   ")
    assert result.is_error and result.content == "command is empty"
    bad_timeout = run_terminal(terminal_registry(tmp_path), command="true", timeout=0)
    assert bad_timeout.is_error and "timeout: 0 must be greater than 0" in bad_timeout.content


@pytest.mark.parametrize("limit", [10, 101, 1000])
def test_cap_output_keeps_within_limit_plus_marker(limit: int):
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    capped = cap_output(text, limit)
    head, marker, tail = capped.split("\n")
    assert len(head) + len(tail) == limit
    assert text.startswith(head) and text.endswith(tail)
    assert marker == f"[... {5000 - limit} characters omitted ...]"
    assert len(tail) > len(head)


def test_cap_output_leaves_short_text_alone():
    assert cap_output("short", 5) == "short"
