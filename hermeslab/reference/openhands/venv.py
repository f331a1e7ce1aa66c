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

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hermeslab.reference.errors import HermesReferenceError
from hermeslab.reference.venv import ReferenceNotInstalledError
from hermeslab.reference.venv_builder import (
    PinnedDistribution,
    build_once,
    create_if_missing,
    default_place,
    installed_or_raise,
    is_marked_complete,
    pip_install,
    tail,
    write_marker,
)

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
class Release(PinnedDistribution):
    """One OpenHands distribution pinned to a version, and the module whose import proves the install."""

    #: The worker's family argument: ``sdk`` or ``legacy``.
    family: str


#: The SDK (the LLM summarizing condenser) and the last release with the older condensers.
SDK = Release("openhands-sdk", "1.58.2", "openhands.sdk.context.condenser", "sdk")
LEGACY = Release("openhands-ai", "0.62.0", "openhands.memory.condenser.impl.amortized_forgetting_condenser",
                 "legacy")


def default_path(release: Release) -> Path:
    return default_place(HOME_ENV_VAR, release.folder)


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
    return is_marked_complete(path, release.requirement)


def installed_venv(release: Release, path: Path | None = None) -> Path:
    """The installed virtualenv holding ``release``; never installs it (``OpenHandsNotInstalledError`` names the
    command that does)."""
    target = Path(path).expanduser() if path is not None else default_path(release)
    return installed_or_raise(target, release.requirement, default_path(release), HOME_ENV_VAR, INSTALL_COMMAND,
                              OpenHandsNotInstalledError)


def install_venv(release: Release, path: Path | None = None, echo: Callable[[str], None] = print) -> Path:
    """Install ``release`` into its virtualenv, passing pip's output to ``echo`` as it comes; a completed install
    is reused and an unfinished one installed into again."""
    target = Path(path).expanduser() if path is not None else default_path(release)
    return build_once(target, release.requirement, lambda: _install(target, release, echo), OpenHandsReferenceError,
                      "OpenHands")


def _install(target: Path, release: Release, echo: Callable[[str], None]) -> None:
    started = time.perf_counter()
    python = create_if_missing(target, find_python, echo, OpenHandsReferenceError, note=" (a minute or two)")
    pip_install(python, release.requirement, echo, OpenHandsReferenceError,
                constraints=CONSTRAINTS / f"{release.folder}.txt")
    check = subprocess.run([python, "-I", "-c", f"import {release.probe}"], capture_output=True, text=True,
                           env={**os.environ, **QUIET_ENV}, check=False)
    if check.returncode != 0:
        raise OpenHandsReferenceError(f"{release.requirement} installed but {release.probe} does not import:\n"
                                      f"{tail(check.stderr)}")
    write_marker(target, release.requirement, started)


#: Keeps OpenHands' libraries off the network and quiet: litellm reads its bundled model list.
QUIET_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1"}
