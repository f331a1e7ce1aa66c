"""The virtualenv that holds hermes-agent 0.19.0: installed by an explicit command, then reused.

hermes-agent pins exact library versions (among them an older ``openai``), so
it cannot share hermeslab's environment; it gets a virtualenv of its own.
Installing it downloads a few hundred megabytes, so nothing installs it on the
way: ``hermeslab reference install hermes`` does, announcing it, and every
other caller gets the installed venv or a ``ReferenceNotInstalledError`` naming
that command. A marker file written last records a completed install, so an
interrupted one is rebuilt rather than trusted, and a lock file beside the
venv makes concurrent installs wait instead of installing twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import venv
from collections import deque
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from hermeslab.core.hermes_install import (DEFAULT_VENV, HERMES_REQUIREMENT, MARKER_NAME, VENV_ENV_VAR,  # noqa: F401
                                           default_venv_path, read_marker, venv_python)
from hermeslab.reference.errors import HermesReferenceError

SUPPORTED_PYTHONS = ((3, 11), (3, 13))  # hermes-agent 0.19.0 declares >=3.11,<3.14
#: The command that installs it, named by every error that finds it missing.
INSTALL_COMMAND = "hermeslab reference install hermes"

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


class ReferenceNotInstalledError(HermesReferenceError):
    """A reference environment is needed and not installed; ``command`` installs it."""

    def __init__(self, what: str, path: Path, command: str):
        self.path = path
        self.command = command
        super().__init__(f"{what} is not installed (looked in {path}); install it with `{command}`")


def hermes_venv(path: Path | None = None) -> Path:
    """The installed virtualenv holding hermes-agent 0.19.0; never installs it.

    The location is ``path``, else ``$HERMESLAB_HERMES_VENV``, else
    ``~/.cache/hermeslab/hermes-agent-0.19.0``. Raises
    ``ReferenceNotInstalledError`` naming the install command when no completed
    install is there.
    """
    target = Path(path).expanduser() if path is not None else default_venv_path()
    if read_marker(target):
        return target
    command = INSTALL_COMMAND if target == default_venv_path() else f"{VENV_ENV_VAR}={target} {INSTALL_COMMAND}"
    raise ReferenceNotInstalledError(f"the {HERMES_REQUIREMENT} reference environment", target, command)


def install_hermes_venv(path: Path | None = None, echo: Callable[[str], None] = print) -> Path:
    """Install hermes-agent 0.19.0 into its virtualenv (``hermes_venv`` says where), passing pip's output to
    ``echo`` as it comes; a completed install is reused. Concurrent installs wait on a lock file."""
    target = Path(path).expanduser() if path is not None else default_venv_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / f".{target.name}.lock")):
            if not read_marker(target):
                _build_venv(target, echo)
    except OSError as exc:
        raise HermesReferenceError(f"could not prepare the Hermes venv at {target}: {exc}") from exc
    return target


def run_streamed(command: list[str], echo: Callable[[str], None]) -> tuple[int, str]:
    """Run ``command`` with its output lines passed to ``echo`` as they come; its exit code and last lines."""
    tail: deque[str] = deque(maxlen=25)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace") as process:
        for line in process.stdout:
            tail.append(line.rstrip())
            echo(f"  {tail[-1]}")
    return process.returncode, "\n".join(tail)


def _build_venv(target: Path, echo: Callable[[str], None]) -> None:
    if not (SUPPORTED_PYTHONS[0] <= sys.version_info[:2] <= SUPPORTED_PYTHONS[1]):
        raise HermesReferenceError(
            f"{HERMES_REQUIREMENT} needs Python 3.11 to 3.13; this interpreter is {sys.version.split()[0]}"
        )
    if target.exists():
        if any(target.iterdir()) and not (target / "pyvenv.cfg").exists():
            raise HermesReferenceError(f"{target} exists and is not a virtualenv; refusing to replace it")
        shutil.rmtree(target)
    started = time.perf_counter()
    echo(f"  creating a virtualenv with {sys.executable} (a minute or two)")
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HermesReferenceError(f"could not create a virtualenv at {target}: {exc}") from exc
    command = [
        str(venv_python(target)), "-m", "pip", "install",
        "--disable-pip-version-check", "--no-input", HERMES_REQUIREMENT,
    ]
    returncode, output = run_streamed(command, echo)
    if returncode != 0:
        raise HermesReferenceError(_install_failure(returncode, output))
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


def _install_failure(returncode: int, output: str) -> str:
    if any(sign in output.lower() for sign in _NETWORK_SIGNS):
        return (
            f"pip could not download {HERMES_REQUIREMENT}: the package index was not reachable or "
            f"does not offer it (no network access?). Last pip output:\n{_tail(output)}"
        )
    return f"pip install {HERMES_REQUIREMENT} failed (exit code {returncode}):\n{_tail(output)}"


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
