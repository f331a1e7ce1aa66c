"""``ZooReference``: one zoo agent's own code running in its virtualenv, answering JSON lines.

The worker (``worker/``) runs under the Python of the agent's virtualenv
(``venv``), in an empty temporary folder, without ``*_API_KEY`` variables and
with litellm told to read its bundled model list, so nothing leaves the
machine; whatever would call a model is a stub inside the worker.
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
from hermeslab.reference.zoo.venv import Package, ZooReferenceError, installed_venv

WORKER_DIR = Path(__file__).with_name("worker")
#: Keeps the agents' libraries off the network and quiet.
QUIET_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_ANALYTICS": "false", "LANGSMITH_TRACING": "false"}


class ZooReference:
    """A running worker for one agent; use it as a context manager."""

    def __init__(self, package: Package | None, agent: str, venv_path: Path | None = None, *,
                 timeout: float = 1800.0, python: Path | None = None):
        self.package = package
        self.agent = agent
        self._venv_path = venv_path
        #: An interpreter to run the worker with instead of the package's virtualenv (an agent whose code
        #: needs only the standard library, read from a folder rather than installed).
        self._python = python
        self._timeout = timeout
        self._process: subprocess.Popen | None = None
        self._folder: tempfile.TemporaryDirectory | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str | None] = deque(maxlen=40)
        self._next_id = 0
        self.info: dict = {}

    def __enter__(self) -> ZooReference:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        python = self._python or venv_python(installed_venv(self.package, self._venv_path))
        self._folder = tempfile.TemporaryDirectory(prefix=f"hermeslab-{self.agent}-")
        env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
        env.update(QUIET_ENV, HOME=self._folder.name)
        try:
            self._process = subprocess.Popen([str(python), "-I", str(WORKER_DIR), self.agent], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self._folder.name,
                                             env=env)
        except OSError as exc:
            self.close()
            raise ZooReferenceError(f"could not start the {self.agent} worker with {python}: {exc}") from exc
        threading.Thread(target=_pump, args=(self._process.stdout, self._replies.put), daemon=True).start()
        threading.Thread(target=_pump, args=(self._process.stderr, self._stderr.append), daemon=True).start()
        self.info = self.request("hello")

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
            raise ZooReferenceError(f"the {self.agent} worker is not running", stderr=self._tail())
        self._next_id += 1
        line = json.dumps({"id": self._next_id, "op": op, "args": args or {}}) + "\n"
        try:
            self._process.stdin.write(line.encode("utf-8"))
            self._process.stdin.flush()
            raw = self._replies.get(timeout=self._timeout)
        except (OSError, queue.Empty) as exc:
            self.close()
            raise ZooReferenceError(f"the {self.agent} worker did not answer {op!r}: {exc!r}",
                                    stderr=self._tail()) from None
        if raw is None:
            self.close()
            raise ZooReferenceError(f"the {self.agent} worker exited while answering {op!r}", stderr=self._tail())
        reply = json.loads(raw)
        if reply.get("id") != self._next_id:
            raise ZooReferenceError(f"the {self.agent} worker answered out of turn: {raw[:200]!r}")
        if not reply.get("ok"):
            raise ZooReferenceError(str(reply.get("error")), worker_traceback=str(reply.get("traceback") or ""))
        return reply["result"]

    def replay(self, sessions: list[list[dict]], params: dict) -> list[list[dict]]:
        """The worker's step records for each session's wire messages (see the agent's ``*_steps`` module)."""
        return self.request("replay", {"sessions": [{"messages": s} for s in sessions], "params": params})

    def _tail(self) -> str:
        return "\n".join(line for line in self._stderr if line is not None)


def _pump(stream: Any, sink: Any) -> None:
    for raw in stream:
        sink(raw.decode("utf-8", errors="replace").rstrip("\n"))
    sink(None)
