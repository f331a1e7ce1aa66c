"""``ZooReference``: one zoo agent's own code running in its virtualenv, answering JSON lines.

The worker (``worker/``) runs under the Python of the agent's virtualenv
(``venv``), in an empty temporary folder, without ``*_API_KEY`` variables and
with litellm told to read its bundled model list, so nothing leaves the
machine; whatever would call a model is a stub inside the worker.
"""

from __future__ import annotations

from pathlib import Path

from hermeslab.core.hermes_install import venv_python
from hermeslab.reference.worker_client import JsonLinesWorker
from hermeslab.reference.zoo.venv import Package, ZooReferenceError, installed_venv

WORKER_DIR = Path(__file__).with_name("worker")
#: Keeps the agents' libraries off the network and quiet.
QUIET_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_ANALYTICS": "false", "LANGSMITH_TRACING": "false"}


class ZooReference(JsonLinesWorker):
    """A running worker for one agent; use it as a context manager."""

    def __init__(self, package: Package | None, agent: str, venv_path: Path | None = None, *,
                 timeout: float = 1800.0, python: Path | None = None):
        super().__init__(agent, ZooReferenceError, timeout=timeout)
        self.package = package
        self.agent = agent
        self._venv_path = venv_path
        #: An interpreter to run the worker with instead of the package's virtualenv (an agent whose code
        #: needs only the standard library, read from a folder rather than installed).
        self._python = python

    def _command(self) -> list[str]:
        python = self._python or venv_python(installed_venv(self.package, self._venv_path))
        return [str(python), "-I", str(WORKER_DIR), self.agent]

    def _environment(self, folder: str) -> dict[str, str]:
        return {**QUIET_ENV, "HOME": folder}

    def replay(self, sessions: list[list[dict]], params: dict) -> list[list[dict]]:
        """The worker's step records for each session's wire messages (see the agent's ``*_steps`` module)."""
        return self.request("replay", {"sessions": [{"messages": s} for s in sessions], "params": params})
