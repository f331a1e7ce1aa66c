"""The virtualenv that holds hermes-agent 0.19.0, created once and reused.

hermes-agent pins exact library versions (among them an older ``openai``), so
it cannot share hermeslab's environment; it gets a virtualenv of its own,
installed with pip on first use. A marker file written last records a
completed install, so an interrupted one is rebuilt rather than trusted, and a
lock file beside the venv makes concurrent callers wait instead of installing
twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

from filelock import FileLock

from hermeslab.reference.errors import HermesReferenceError

HERMES_REQUIREMENT = "hermes-agent==0.19.0"
VENV_ENV_VAR = "HERMESLAB_HERMES_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "hermeslab" / "hermes-agent-0.19.0"
MARKER_NAME = "hermeslab-venv.json"
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


def default_venv_path() -> Path:
    """``$HERMESLAB_HERMES_VENV`` when set, else ``~/.cache/hermeslab/hermes-agent-0.19.0``."""
    configured = os.environ.get(VENV_ENV_VAR)
    return Path(configured).expanduser() if configured else DEFAULT_VENV


def venv_python(path: Path) -> Path:
    """The interpreter of the virtualenv at ``path``."""
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
