"""The virtualenvs that hold OpenHands, one per release compared: installed by an explicit command, then reused.

OpenHands needs Python 3.12 or newer and pins libraries hermeslab must not
inherit, so each release gets a virtualenv of its own under
``~/.cache/hermeslab`` (or ``$HERMESLAB_OPENHANDS_HOME``), built with the first
Python 3.12+ found: ``$HERMESLAB_OPENHANDS_PYTHON``, then ``python3.13`` and
``python3.12`` on the path, then pyenv's versions. A marker file written last
records a completed install; a lock file makes concurrent installs wait.
Installing downloads hundreds of megabytes, so only
``hermeslab reference install openhands`` does it; every other caller gets the
installed venv or a ``ReferenceNotInstalledError`` naming that command.
Every dependency is pinned to the versions the comparison was measured with
(``constraints/<release>.txt``, a ``pip freeze`` of that venv), so an install
resolves without backtracking and measures the same code wherever it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from hermeslab.reference.errors import HermesReferenceError
from hermeslab.reference.venv import ReferenceNotInstalledError, run_streamed

MARKER_NAME = "hermeslab-venv.json"
CONSTRAINTS = Path(__file__).resolve().parent / "constraints"
HOME_ENV_VAR = "HERMESLAB_OPENHANDS_HOME"
PYTHON_ENV_VAR = "HERMESLAB_OPENHANDS_PYTHON"
#: The command that installs both releases, named by every error that finds one missing.
INSTALL_COMMAND = "hermeslab reference install openhands"


class OpenHandsReferenceError(HermesReferenceError):
    """OpenHands could not be installed, started, or could not answer."""


class OpenHandsNotInstalledError(ReferenceNotInstalledError, OpenHandsReferenceError):
    """An OpenHands release is needed and not installed."""


@dataclass(frozen=True)
class Release:
    """One OpenHands distribution pinned to a version, and the module whose import proves the install."""

    distribution: str
    version: str
    probe: str
    #: The worker's family argument: ``sdk`` or ``legacy``.
    family: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def folder(self) -> str:
        return f"{self.distribution}-{self.version}"


#: The SDK (the LLM summarizing condenser) and the last release with the older condensers.
SDK = Release("openhands-sdk", "1.58.2", "openhands.sdk.context.condenser", "sdk")
LEGACY = Release("openhands-ai", "0.62.0", "openhands.memory.condenser.impl.amortized_forgetting_condenser",
                 "legacy")


def venv_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def default_path(release: Release) -> Path:
    home = os.environ.get(HOME_ENV_VAR)
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "hermeslab") / release.folder


def find_python() -> str:
    """A Python 3.12 or newer to build the virtualenv with; OpenHandsReferenceError when there is none."""
    candidates = [os.environ.get(PYTHON_ENV_VAR), sys.executable, shutil.which("python3.13"), shutil.which("python3.12")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += [str(p / "bin" / "python") for p in sorted(pyenv.iterdir(), reverse=True)]
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run([candidate, "-I", "-c", "import sys; print(sys.version_info >= (3, 12))"],
                                   capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if found.returncode == 0 and found.stdout.strip() == "True":
            return candidate
    raise OpenHandsReferenceError(f"OpenHands needs Python 3.12 or newer and none was found; set {PYTHON_ENV_VAR}")


def is_complete(path: Path, release: Release) -> bool:
    try:
        marker = json.loads((path / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(marker, dict) and marker.get("requirement") == release.requirement
            and marker.get("complete") is True and venv_python(path).exists())


def installed_venv(release: Release, path: Path | None = None) -> Path:
    """The installed virtualenv holding ``release``; never installs it (``OpenHandsNotInstalledError`` names the
    command that does)."""
    target = Path(path).expanduser() if path is not None else default_path(release)
    if is_complete(target, release):
        return target
    command = (INSTALL_COMMAND if target == default_path(release)
               else f"{HOME_ENV_VAR}={target.parent} {INSTALL_COMMAND}")
    raise OpenHandsNotInstalledError(f"the {release.requirement} reference environment", target, command)


def install_venv(release: Release, path: Path | None = None, echo: Callable[[str], None] = print) -> Path:
    """Install ``release`` into its virtualenv, passing pip's output to ``echo`` as it comes; a completed install
    is reused and an unfinished one installed into again."""
    target = Path(path).expanduser() if path is not None else default_path(release)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / f".{target.name}.lock")):
            if not is_complete(target, release):
                _install(target, release, echo)
    except OSError as exc:
        raise OpenHandsReferenceError(f"could not prepare the OpenHands venv at {target}: {exc}") from exc
    return target


def _install(target: Path, release: Release, echo: Callable[[str], None]) -> None:
    started = time.perf_counter()
    if target.exists() and not (target / "pyvenv.cfg").exists():
        raise OpenHandsReferenceError(f"{target} exists and is not a virtualenv; refusing to use it")
    if not venv_python(target).exists():
        base = find_python()
        echo(f"  creating a virtualenv with {base} (a minute or two)")
        made = subprocess.run([base, "-m", "venv", str(target)], capture_output=True, text=True,
                              check=False)
        if made.returncode != 0:
            raise OpenHandsReferenceError(f"could not create a virtualenv at {target}:\n{_tail(made.stderr)}")
    python = str(venv_python(target))
    pins = CONSTRAINTS / f"{release.folder}.txt"
    returncode, output = run_streamed([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                                       "-c", str(pins), release.requirement], echo)
    if returncode != 0:
        raise OpenHandsReferenceError(f"pip install {release.requirement} failed (exit code {returncode}); "
                                      f"is the package index reachable?\n{output}")
    check = subprocess.run([python, "-I", "-c", f"import {release.probe}"], capture_output=True, text=True,
                           env={**os.environ, **QUIET_ENV}, check=False)
    if check.returncode != 0:
        raise OpenHandsReferenceError(f"{release.requirement} installed but {release.probe} does not import:\n"
                                      f"{_tail(check.stderr)}")
    marker = {"requirement": release.requirement, "complete": True,
              "install_seconds": round(time.perf_counter() - started, 1),
              "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (target / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


#: Keeps OpenHands' libraries off the network and quiet: litellm reads its bundled model list.
QUIET_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1"}


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
