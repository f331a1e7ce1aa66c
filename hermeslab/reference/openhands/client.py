"""``OpenHandsReference``: run OpenHands' own condensers beside hermeslab, one JSON line per call.

The worker (``worker/``) runs under the Python of an OpenHands virtualenv
(``venv``), in an empty temporary folder, without ``*_API_KEY`` variables and
with litellm told to use its bundled model list, so nothing leaves the
machine; the summary model is a stub with fixed text.
"""

from __future__ import annotations

from pathlib import Path

from hermeslab.core.hermes_install import venv_python
from hermeslab.reference.openhands.venv import QUIET_ENV, OpenHandsReferenceError, Release, installed_venv
from hermeslab.reference.worker_client import JsonLinesWorker

WORKER_DIR = Path(__file__).with_name("worker")


class OpenHandsReference(JsonLinesWorker):
    """A running worker for one OpenHands release; use it as a context manager."""

    def __init__(self, release: Release, venv_path: Path | None = None, *, timeout: float = 1800.0):
        super().__init__("OpenHands", OpenHandsReferenceError, timeout=timeout)
        self.release = release
        self._venv_path = venv_path

    def _command(self) -> list[str]:
        return [str(venv_python(installed_venv(self.release, self._venv_path))), "-I", str(WORKER_DIR),
                self.release.family]

    def _environment(self, folder: str) -> dict[str, str]:
        return dict(QUIET_ENV)

    def replay(self, sessions: list[dict], condenser: str, params: dict) -> list[list[dict]]:
        """The worker's step records (see ``worker/oh_sdk_steps``) for each session's ``messages``."""
        if not isinstance(sessions, list) or not all(isinstance(s, dict) and isinstance(s.get("messages"), list)
                                                     for s in sessions):
            raise OpenHandsReferenceError("sessions must be a list of objects with a 'messages' list")
        return self.request("replay", {"sessions": [{"messages": s["messages"]} for s in sessions],
                                       "condenser": condenser, "params": params})
