"""The errors of the Hermes reference: installing the virtualenv, running the worker, or a bad call.

Both the virtualenv setup and the client raise them, and callers (tests that
skip without a venv, benchmarks) catch them without caring which part failed.
"""

from __future__ import annotations


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
