"""Run the real hermes-agent 0.19.0 compressor beside hermeslab and report its decisions.

hermes-agent pins exact library versions (among them an older ``openai``), so
it lives in a virtualenv of its own (`ensure_hermes_venv`) and runs in a
child process, `hermes_worker.py`, which `HermesReference` drives over JSON
lines on stdin/stdout. The worker gets an empty temporary ``HERMES_HOME`` (no
user config can reroute anything) and an environment without ``*_API_KEY``
variables, and Hermes's summary call is answered by a fixed stand-in text, so
nothing ever leaves the machine.

How the decisions of one ``compress()`` call are extracted (all inside the
worker, by watching Hermes rather than re-deriving its rules):

- **Budgets** are read from the freshly built ``ContextCompressor``.
- **Head, start and end**: the compressor's ``_protect_head_size`` and
  ``_find_tail_cut_by_tokens`` are wrapped; ``compress()`` passes its aligned
  start to the tail cut and uses the returned cut as its end, so the wrapper's
  argument and result are exactly the span it goes on to replace.
- **Summarised span**: ``_generate_summary`` is wrapped and the turns it
  receives are located in the pruned list by object identity. The span is
  narrower than ``[start, end)`` when Hermes found an earlier handoff summary
  inside the window (reported as ``previous_summary_index``).
- **Prune decisions**: ``_prune_old_tool_results`` is wrapped and its output is
  diffed against the input message by message (pruning rewrites in place, so
  indices line up). Each change is classified by what changed: tool-call
  arguments → ``shrink_args``; multimodal tool content → ``image_placeholder``;
  text equal to Hermes's duplicate back-reference (learned once at start-up by
  pruning two identical results) → ``dedupe``; text that Hermes's one-liner
  builder produced during this pass (recorded by wrapping it) → ``one_line``.
  Any other change is reported as an error instead of being guessed.
- **Prune boundary**: Hermes's backward budget walk sizes one message per call
  of ``_estimate_msg_budget_tokens``; counting those calls during the prune pass
  gives where the walk stopped, and Hermes's ``protect_last_n`` floor can only
  move it earlier. Every non-dedupe rewrite is checked to lie below it.

Replays follow Hermes's agent: the system prompt is held apart from the
transcript handed to ``compress()`` but counted in every prompt estimate, and
the stand-in summary has the size of a short real one, because it stays in the
context and is counted by every later trigger check. With these two choices a
16K replay of the mini-swe-agent recordings reproduces the figures measured
independently for Hermes 0.19.0 (648 compress() calls, 87 still over the window, 62 outputs with two
summaries, 62 missing the latest user message, 143 summarising only the
previous summary).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import venv
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from filelock import FileLock

from hermeslab.core.messages import MessageValidationError, validate_messages

HERMES_REQUIREMENT = "hermes-agent==0.19.0"
VENV_ENV_VAR = "HERMESLAB_HERMES_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "hermeslab" / "hermes-agent-0.19.0"
MARKER_NAME = "hermeslab-venv.json"
WORKER_SCRIPT = Path(__file__).with_name("hermes_worker.py")
SUPPORTED_PYTHONS = ((3, 11), (3, 13))  # hermes-agent 0.19.0 declares >=3.11,<3.14

_NETWORK_SIGNS = (
    "could not find a version that satisfies",
    "no matching distribution found",
    "failed to establish a new connection",
    "temporary failure in name resolution",
    "name or service not known",
    "network is unreachable",
    "connection refused",
    "connecttimeout",
    "read timed out",
    "max retries exceeded",
)


class HermesReferenceError(RuntimeError):
    """The Hermes reference could not be installed, started or could not answer.

    ``worker_traceback`` holds the traceback raised inside Hermes (if any) and
    ``stderr`` the last lines the worker wrote to its error stream.
    """

    def __init__(self, message: str, *, worker_traceback: str = "", stderr: str = ""):
        self.worker_traceback = worker_traceback
        self.stderr = stderr
        details = message
        if worker_traceback:
            details += f"\n--- worker traceback ---\n{worker_traceback.rstrip()}"
        if stderr:
            details += f"\n--- worker stderr (last lines) ---\n{stderr.rstrip()}"
        super().__init__(details)


class HermesInputError(HermesReferenceError, ValueError):
    """A call was given arguments the reference cannot run on."""


# ---------------------------------------------------------------- the virtualenv


def default_venv_path() -> Path:
    configured = os.environ.get(VENV_ENV_VAR)
    return Path(configured).expanduser() if configured else DEFAULT_VENV


def venv_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def read_marker(path: Path) -> dict | None:
    """The completion record of a venv, or None when it is missing, unreadable or for another version."""
    try:
        marker = json.loads((path / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("requirement") != HERMES_REQUIREMENT:
        return None
    return marker if marker.get("complete") is True and venv_python(path).exists() else None


def ensure_hermes_venv(path: Path | None = None) -> Path:
    """Return a virtualenv holding hermes-agent 0.19.0, creating it on first use.

    The location is ``path``, else ``$HERMESLAB_HERMES_VENV``, else
    ``~/.cache/hermeslab/hermes-agent-0.19.0``. A venv is reused when its marker
    file records a completed install; an unfinished one is rebuilt. Concurrent
    callers wait on a lock file beside the venv instead of installing twice.
    """
    target = Path(path).expanduser() if path is not None else default_venv_path()
    if read_marker(target):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(target.parent / f".{target.name}.lock"))
        with lock:
            if not read_marker(target):
                _build_venv(target)
    except OSError as exc:
        raise HermesReferenceError(f"could not prepare the Hermes venv at {target}: {exc}") from exc
    return target


def _build_venv(target: Path) -> None:
    if not (SUPPORTED_PYTHONS[0] <= sys.version_info[:2] <= SUPPORTED_PYTHONS[1]):
        raise HermesReferenceError(
            f"{HERMES_REQUIREMENT} needs Python 3.11 to 3.13; this interpreter is {sys.version.split()[0]}"
        )
    if target.exists():
        if any(target.iterdir()) and not (target / "pyvenv.cfg").exists():
            raise HermesReferenceError(f"{target} exists and is not a virtualenv; refusing to replace it")
        shutil.rmtree(target)
    started = time.perf_counter()
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HermesReferenceError(f"could not create a virtualenv at {target}: {exc}") from exc
    command = [
        str(venv_python(target)), "-m", "pip", "install",
        "--disable-pip-version-check", "--no-input", HERMES_REQUIREMENT,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise HermesReferenceError(_install_failure(result))
    check = subprocess.run(
        [str(venv_python(target)), "-I", "-c", "import agent.context_compressor"],
        capture_output=True, text=True,
    )
    if check.returncode != 0:
        raise HermesReferenceError(
            f"{HERMES_REQUIREMENT} installed but its compressor does not import:\n{_tail(check.stderr)}"
        )
    marker = {
        "requirement": HERMES_REQUIREMENT,
        "complete": True,
        "python": sys.version.split()[0],
        "install_seconds": round(time.perf_counter() - started, 1),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (target / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _install_failure(result: subprocess.CompletedProcess) -> str:
    output = f"{result.stdout}\n{result.stderr}"
    if any(sign in output.lower() for sign in _NETWORK_SIGNS):
        return (
            f"pip could not download {HERMES_REQUIREMENT}: the package index was not reachable or "
            f"does not offer it (no network access?). Last pip output:\n{_tail(output)}"
        )
    return f"pip install {HERMES_REQUIREMENT} failed (exit code {result.returncode}):\n{_tail(output)}"


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# ---------------------------------------------------------------- input checks


def _check_messages(messages: Any, what: str = "messages") -> list[dict]:
    try:
        validate_messages(messages, check_pairs=False)
    except MessageValidationError as exc:
        raise HermesInputError(f"{what} are not valid chat messages: {exc}") from None
    return messages


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HermesInputError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise HermesInputError(f"{name} must be at least {minimum}, got {value}")
    return value


def _check_tools(tools: Any, what: str) -> list | None:
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise HermesInputError(f"{what} must be a list of tool schema objects or None")
    return tools


def _check_session(session: Any, index: int) -> dict:
    if not isinstance(session, dict) or "messages" not in session:
        raise HermesInputError(f"session {index} must be an object with a 'messages' list")
    _check_messages(session["messages"], f"messages of session {index}")
    _check_tools(session.get("tools"), f"tools of session {index}")
    return {"id": session.get("id"), "messages": session["messages"], "tools": session.get("tools")}


# ---------------------------------------------------------------- the worker process


class HermesReference:
    """A running Hermes reference worker; use it as a context manager.

    Each method sends one JSON line and waits for one reply, so calls are
    sequential. ``timeout`` bounds the wait for a single reply (None waits
    forever); a worker that times out is stopped.
    """

    def __init__(self, venv_path: Path | None = None, *, timeout: float | None = 600.0):
        if timeout is not None and timeout <= 0:
            raise HermesInputError(f"timeout must be positive or None, got {timeout}")
        self._venv_path = venv_path
        self._timeout = timeout
        self._process: subprocess.Popen | None = None
        self._home: tempfile.TemporaryDirectory | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=60)
        self._stderr_reader: threading.Thread | None = None
        self._next_id = 0
        self.info: dict = {}

    # -- lifecycle

    def __enter__(self) -> HermesReference:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def start(self) -> None:
        """Install the venv if needed, start the worker and check that it answers."""
        if self._process is not None:
            raise HermesReferenceError("the Hermes reference worker is already running")
        python = venv_python(ensure_hermes_venv(self._venv_path))
        self._home = tempfile.TemporaryDirectory(prefix="hermeslab-hermes-home-")
        env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
        env["HERMES_HOME"] = self._home.name
        try:
            self._process = subprocess.Popen(
                [str(python), "-I", str(WORKER_SCRIPT)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=self._home.name, env=env,
            )
        except OSError as exc:
            self.close()
            raise HermesReferenceError(f"could not start the Hermes worker with {python}: {exc}") from exc
        self._replies = queue.Queue()
        self._stderr.clear()
        threading.Thread(target=self._pump_replies, args=(self._process.stdout,), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._pump_stderr, args=(self._process.stderr,), daemon=True)
        self._stderr_reader.start()
        self.info = self.request("hello")

    def close(self) -> None:
        """Stop the worker (politely, then by force) and remove its HERMES_HOME."""
        process, self._process = self._process, None
        if process is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._home is not None:
            self._home.cleanup()
            self._home = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _pump_replies(self, stream: Any) -> None:
        for raw in stream:
            self._replies.put(raw.decode("utf-8", errors="replace"))
        self._replies.put(None)

    def _pump_stderr(self, stream: Any) -> None:
        for raw in stream:
            self._stderr.append(raw.decode("utf-8", errors="replace").rstrip("\n"))

    def _stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    # -- the wire

    def request(self, op: str, args: dict | None = None) -> Any:
        """Send one raw request and return its result; no client-side checks.

        The typed methods below validate their arguments and then call this.
        """
        if not self.running:
            raise HermesReferenceError("the Hermes reference worker is not running", stderr=self._stderr_tail())
        self._next_id += 1
        request_id = self._next_id
        line = json.dumps({"id": request_id, "op": op, "args": args or {}}, ensure_ascii=True)
        try:
            self._process.stdin.write(line.encode("ascii") + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._fail(f"could not send {op!r} to the Hermes worker: {exc}")
        reply = self._await_reply(op, request_id)
        if not reply.get("ok"):
            raise HermesReferenceError(
                str(reply.get("error") or f"{op} failed"), worker_traceback=str(reply.get("traceback") or "")
            )
        return reply.get("result")

    def _await_reply(self, op: str, request_id: int) -> dict:
        try:
            raw = self._replies.get(timeout=self._timeout)
        except queue.Empty:
            self._fail(f"the Hermes worker gave no answer to {op!r} within {self._timeout} s; it was stopped")
        if raw is None:
            self._fail(f"the Hermes worker exited while answering {op!r}")
        try:
            reply = json.loads(raw)
        except ValueError:
            self._fail(f"the Hermes worker answered {op!r} with a line that is not JSON: {raw[:200]!r}")
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            self._fail(f"the Hermes worker answered out of turn (expected reply {request_id}): {raw[:200]!r}")
        return reply

    def _fail(self, message: str) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()
            message += f" (exit code {process.returncode})"
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=2)
        stderr = self._stderr_tail()
        self.close()
        raise HermesReferenceError(message, stderr=stderr)

    # -- operations

    def ping(self) -> float:
        """Round-trip time of an empty request in milliseconds (the bridge's own cost)."""
        started = time.perf_counter()
        self.request("ping")
        return (time.perf_counter() - started) * 1000.0

    def plan(
        self,
        messages: list[dict],
        *,
        context_length: int,
        compression_count: int = 0,
        previous_summary: str | None = None,
    ) -> dict:
        """Hermes's decisions for one ``compress()`` call on a fresh compressor.

        ``compression_count`` and ``previous_summary`` preset the compressor's
        state (both switch Hermes's head protection off). Returns the budgets,
        ``outcome`` ("compressed", "too_small", "nothing_to_compress" or
        "aborted"), ``head_size``, ``compress_start``, ``compress_end``,
        ``prune_boundary``, ``pruned`` (``[{"index", "action"}]``),
        ``previous_summary_index``, ``summarised_indices`` (``[start, end)``),
        ``input_len`` and ``output_len``. Indices refer to ``messages``;
        boundaries are None when Hermes found too few messages to start.
        """
        if previous_summary is not None and not isinstance(previous_summary, str):
            raise HermesInputError(f"previous_summary must be a string or None, got {type(previous_summary).__name__}")
        return self.request("plan", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
            "compression_count": _check_int(compression_count, "compression_count", 0),
            "previous_summary": previous_summary,
        })

    def compress(self, messages: list[dict], *, context_length: int) -> dict:
        """Hermes's output for one ``compress()`` call: ``{"messages", "elapsed_ms"}``."""
        return self.request("compress", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
        })

    def time_compress(self, messages: list[dict], *, context_length: int, repeats: int) -> list[float]:
        """Milliseconds per warm ``compress()`` inside the worker, one fresh compressor each."""
        return self.request("time_compress", {
            "messages": _check_messages(messages),
            "context_length": _check_int(context_length, "context_length", 1),
            "repeats": _check_int(repeats, "repeats", 1),
        })

    def replay(
        self, session_messages: list[dict], *, context_length: int, tools: list[dict] | None = None
    ) -> dict:
        """Replay one recording through Hermes's trigger and compressor (see `replay_many`)."""
        return self.replay_many([{"messages": session_messages, "tools": tools}], context_length=context_length)[0]

    def replay_many(self, sessions: Iterable[dict], *, context_length: int) -> list[dict]:
        """Replay recordings (``{"messages", "tools"?, "id"?}``) in one round trip.

        Before each recorded assistant message the prompt is estimated with
        Hermes's ``estimate_request_tokens_rough`` (system prompt held apart,
        tool schemas included); when ``should_compress`` fires, ``compress()``
        runs and its output becomes the context. Each result has ``calls``
        (per call: ``prompt_before``, ``prompt_after``, ``compressed`` and, if
        so, a ``compress`` record) and ``totals`` (``calls``,
        ``compress_calls``, ``ineffective_compress_calls``,
        ``over_window_after_compress``, ``two_summary_outputs``,
        ``missing_latest_user_outputs``, ``summary_only_compressions``).
        """
        if isinstance(sessions, (str, bytes, dict)):
            raise HermesInputError("sessions must be an iterable of session objects")
        checked = [_check_session(session, index) for index, session in enumerate(sessions)]
        return self.request("replay_many", {
            "sessions": checked,
            "context_length": _check_int(context_length, "context_length", 1),
        })
