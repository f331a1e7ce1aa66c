"""The terminal tool: run a shell command in the workspace root.

Each command gets its own process group so a timeout can kill everything it
started (pipelines, background children), not just the shell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from functools import partial
from typing import Any

from hermeslab.core.config import TerminalConfig
from hermeslab.tools.registry import Tool, ToolError
from hermeslab.tools.workspace import Workspace

#: Share of the output budget kept from the start; the rest comes from the end,
#: where errors and summaries usually are.
_HEAD_SHARE = 0.4
#: Seconds to collect what is left in the pipes after the group was killed.
_DRAIN_SECONDS = 2.0


def cap_output(text: str, max_chars: int) -> str:
    """Keep the head and tail of ``text`` within ``max_chars``, saying how much was cut."""
    if len(text) <= max_chars:
        return text
    head = int(max_chars * _HEAD_SHARE)
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail:]}"


def run_command(workspace: Workspace, config: TerminalConfig, args: dict[str, Any]) -> str:
    command: str = args["command"]
    if not command.strip():
        raise ToolError("command is empty")
    timeout = float(args.get("timeout", config.timeout))
    try:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=workspace.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"cannot start the shell: {exc.strerror or exc}") from None
    timed_out = False
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        output = _kill_group(process)
    text = cap_output(output.decode("utf-8", errors="replace").rstrip("\n"), config.max_output_chars)
    status = f"exit code {process.returncode}"
    if timed_out:
        status += f" (timed out after {timeout:g} s; the command's whole process group was killed)"
    return f"{status}\n{text}" if text else f"{status}\n(no output)"


def _kill_group(process: subprocess.Popen[bytes]) -> bytes:
    """Kill every process in the command's group and return the output gathered so far."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        output, _ = process.communicate(timeout=_DRAIN_SECONDS)
    except subprocess.TimeoutExpired as exc:
        # A child that left the group still holds the pipe open; keep what arrived and move on.
        if process.stdout is not None:
            process.stdout.close()
        process.wait()
        return exc.output or b""
    return output


def terminal_tool(workspace: Workspace, config: TerminalConfig) -> Tool:
    return Tool(
        name="terminal",
        description=(
            "Run a shell command in the workspace root and get its exit code and combined stdout/stderr "
            f"(long output keeps its start and end). Commands time out after {config.timeout:g} s unless "
            "'timeout' is given. Use it to run programs, tests, builds or git. Not for reading, writing, "
            "listing or searching files (use read_file, write_file, list_dir, search_files), and not for "
            "interactive programs: stdin is closed."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command line to run."},
                "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds before the command is killed."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        handler=partial(run_command, workspace, config),
    )
