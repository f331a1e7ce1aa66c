"""``OpenHandsReference``: run OpenHands' own condensers beside hermeslab, one JSON line per call.

The worker (``worker/``) runs under the Python of an OpenHands virtualenv
(``venv``), in an empty temporary folder, without ``*_API_KEY`` variables and
with litellm told to use its bundled model list, so nothing leaves the
machine; the summary model is a stub with fixed text.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Any

from hermeslab.core.hermes_install import venv_python
from hermeslab.reference.openhands.venv import (
    QUIET_ENV,
    OpenHandsReferenceError,
    Release,
    installed_venv,
)

WORKER_DIR = Path(__file__).with_name("worker")


class OpenHandsReference:
    """A running worker for one OpenHands release; use it as a context manager."""

    def __init__(self, release: Release, venv_path: Path | None = None, *, timeout: float = 1800.0):
        self.release = release
        self._venv_path = venv_path
        self._timeout = timeout
        self._process: subprocess.Popen | None = None
        self._folder: tempfile.TemporaryDirectory | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=40)
        self._next_id = 0
        self.info: dict = {}

    def __enter__(self) -> OpenHandsReference:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        python = venv_python(installed_venv(self.release, self._venv_path))
        self._folder = tempfile.TemporaryDirectory(prefix="hermeslab-openhands-")
        env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
        env.update(QUIET_ENV)
        try:
            self._process = subprocess.Popen([str(python), "-I", str(WORKER_DIR), self.release.family], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             cwd=self._folder.name, env=env)
        except OSError as exc:
            self.close()
            raise OpenHandsReferenceError(f"could not start the OpenHands worker with {python}: {exc}") from exc
        threading.Thread(target=self._pump, args=(self._process.stdout, self._replies.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._process.stderr, self._stderr.append), daemon=True).start()
        self.info = self.request("hello")

    @staticmethod
    def _pump(stream: Any, sink: Any) -> None:
        for raw in stream:
            sink(raw.decode("utf-8", errors="replace").rstrip("\n"))
        sink(None)

    def close(self) -> None:
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
        if self._process is None or self._process.poll() is not None:
            raise OpenHandsReferenceError("the OpenHands worker is not running", stderr=self._tail())
        self._next_id += 1
        line = json.dumps({"id": self._next_id, "op": op, "args": args or {}}) + "\n"
        try:
            self._process.stdin.write(line.encode("utf-8"))
            self._process.stdin.flush()
            raw = self._replies.get(timeout=self._timeout)
        except (OSError, queue.Empty) as exc:
            self.close()
            raise OpenHandsReferenceError(f"the OpenHands worker did not answer {op!r}: {exc!r}",
                                          stderr=self._tail()) from None
        if raw is None:
            self.close()
            raise OpenHandsReferenceError(f"the OpenHands worker exited while answering {op!r}", stderr=self._tail())
        reply = json.loads(raw)
        if reply.get("id") != self._next_id:
            raise OpenHandsReferenceError(f"the OpenHands worker answered out of turn: {raw[:200]!r}")
        if not reply.get("ok"):
            raise OpenHandsReferenceError(str(reply.get("error")), worker_traceback=str(reply.get("traceback") or ""))
        return reply["result"]

    def _tail(self) -> str:
        return "\n".join(line for line in self._stderr if line is not None)

    def replay(self, sessions: list[dict], condenser: str, params: dict) -> list[list[dict]]:
        """The worker's step records (see ``worker/oh_sdk_steps``) for each session's ``messages``."""
        if not isinstance(sessions, list) or not all(isinstance(s, dict) and isinstance(s.get("messages"), list)
                                                     for s in sessions):
            raise OpenHandsReferenceError("sessions must be a list of objects with a 'messages' list")
        return self.request("replay", {"sessions": [{"messages": s["messages"]} for s in sessions],
                                       "condenser": condenser, "params": params})
