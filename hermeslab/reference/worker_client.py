"""A worker process in another project's virtualenv, asked one JSON line at a time.

The Hermes, OpenHands and zoo references run the other project's code under
that project's own Python, in an empty temporary folder and without ``*_API_KEY``
variables, and talk to it over stdin/stdout: each request is
``{"id", "op", "args"}`` and each reply ``{"id", "ok", "result"}`` or
``{"id", "ok": false, "error", "traceback"}``. Starting, asking, waiting with
a timeout and stopping are the same for every such worker and live here; a
subclass says only how its worker is launched.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, NoReturn

from hermeslab.reference.errors import HermesReferenceError


class JsonLinesWorker(ABC):
    """A running worker; use it as a context manager. Calls are sequential: one request, then its reply."""

    def __init__(self, label: str, error: type[HermesReferenceError], *, timeout: float | None):
        #: How errors name the worker ("the <label> worker ...").
        self.label = label
        self._error = error
        self._timeout = timeout
        self._process: subprocess.Popen | None = None
        self._folder: tempfile.TemporaryDirectory | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str | None] = deque(maxlen=40)
        self._stderr_reader: threading.Thread | None = None
        self._next_id = 0
        self.info: dict = {}

    @abstractmethod
    def _command(self) -> list[str]:
        """The worker's command line; finding its interpreter may raise, before anything is started."""

    def _environment(self, folder: str) -> dict[str, str]:
        """Variables set for the worker on top of the caller's (less any ``*_API_KEY``); ``folder`` is its cwd."""
        return {}

    def __enter__(self) -> JsonLinesWorker:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the worker in an empty temporary folder and keep its ``hello`` answer in ``info``."""
        if self._process is not None:
            raise self._error(f"the {self.label} worker is already running")
        command = self._command()
        self._folder = tempfile.TemporaryDirectory(prefix=f"hermeslab-{self.label.lower()}-")
        env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
        env.update(self._environment(self._folder.name))
        try:
            self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, cwd=self._folder.name, env=env)
        except OSError as exc:
            self.close()
            raise self._error(f"could not start the {self.label} worker with {command[0]}: {exc}") from exc
        self._replies, self._next_id = queue.Queue(), 0
        self._stderr.clear()
        threading.Thread(target=_pump, args=(self._process.stdout, self._replies.put), daemon=True).start()
        self._stderr_reader = threading.Thread(target=_pump, args=(self._process.stderr, self._stderr.append),
                                               daemon=True)
        self._stderr_reader.start()
        self.info = self.request("hello")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        """Stop the worker (by closing its input, then by force) and remove its folder."""
        process, self._process = self._process, None
        if process is not None:
            try:
                process.stdin.close()
                process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def request(self, op: str, args: dict | None = None) -> Any:
        """Send one request and return its result; a worker that does not answer in time is stopped."""
        if not self.running:
            raise self._error(f"the {self.label} worker is not running", stderr=self._tail())
        self._next_id += 1
        line = json.dumps({"id": self._next_id, "op": op, "args": args or {}}) + "\n"
        try:
            self._process.stdin.write(line.encode("utf-8"))
            self._process.stdin.flush()
        except OSError as exc:
            self._fail(f"could not send {op!r} to the {self.label} worker: {exc}")
        try:
            raw = self._replies.get(timeout=self._timeout)
        except queue.Empty:
            self._fail(f"the {self.label} worker gave no answer to {op!r} within {self._timeout} s; it was stopped")
        if raw is None:
            self._fail(f"the {self.label} worker exited while answering {op!r}")
        try:
            reply = json.loads(raw)
        except ValueError:
            self._fail(f"the {self.label} worker answered {op!r} with a line that is not JSON: {raw[:200]!r}")
        if not isinstance(reply, dict) or reply.get("id") != self._next_id:
            self._fail(f"the {self.label} worker answered out of turn (expected reply {self._next_id}): "
                       f"{raw[:200]!r}")
        if not reply.get("ok"):
            raise self._error(str(reply.get("error") or f"{op} failed"),
                              worker_traceback=str(reply.get("traceback") or ""))
        return reply.get("result")

    def _fail(self, message: str) -> NoReturn:
        """Stop the worker and raise ``message`` with its exit code and the end of what it wrote to stderr."""
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()
            message += f" (exit code {process.returncode})"
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=2)
        stderr = self._tail()
        self.close()
        raise self._error(message, stderr=stderr)

    def _tail(self) -> str:
        return "\n".join(line for line in self._stderr if line is not None)


def _pump(stream: Any, sink: Any) -> None:
    for raw in stream:
        sink(raw.decode("utf-8", errors="replace").rstrip("\n"))
    sink(None)
