"""The virtualenvs that hold the zoo agents published on the package index, one per package, installed on request.

Each agent pins libraries hermeslab must not inherit, so each gets a
virtualenv under ``~/.cache/hermeslab`` (or ``$HERMESLAB_ZOO_HOME``), built
with the first Python found that the package accepts. A marker file written
last records a completed install and a lock file makes concurrent installs
wait. Only ``hermeslab reference install zoo`` installs; every other caller
gets the installed venv or a ``ReferenceNotInstalledError`` naming that
command. Where ``constraints/<package>-<version>.txt`` exists (a ``pip
freeze`` of the venv the comparison was measured in), the install is pinned
to it.
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
    write_marker,
)

CONSTRAINTS = Path(__file__).resolve().parent / "constraints"
HOME_ENV_VAR = "HERMESLAB_ZOO_HOME"
INSTALL_COMMAND = "hermeslab reference install zoo"


class ZooReferenceError(HermesReferenceError):
    """A zoo agent's package could not be installed, started, or could not answer."""


class ZooNotInstalledError(ReferenceNotInstalledError, ZooReferenceError):
    """A zoo agent's package is needed and not installed."""


@dataclass(frozen=True)
class Package(PinnedDistribution):
    """One agent's distribution pinned to a version, the module whose import proves it, the Pythons it accepts."""

    #: Oldest and newest (major, minor) the package declares.
    pythons: tuple[tuple[int, int], tuple[int, int]]


def default_path(package: Package) -> Path:
    return default_place(HOME_ENV_VAR, package.folder)


def find_python(package: Package) -> str:
    """A Python the package accepts: this one, then ``python3.x`` on the path, then pyenv's versions."""
    low, high = package.pythons
    candidates = [sys.executable] + [shutil.which(f"python3.{minor}") for minor in range(high[1], low[1] - 1, -1)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += [str(p / "bin" / "python3") for p in sorted(pyenv.iterdir(), reverse=True)]
    check = f"import sys; print({low} <= sys.version_info[:2] <= {high})"
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run([candidate, "-I", "-c", check], capture_output=True, text=True, timeout=60,
                                   check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if found.returncode == 0 and found.stdout.strip() == "True":
            return candidate
    raise ZooReferenceError(f"{package.requirement} needs Python {low[0]}.{low[1]} to {high[0]}.{high[1]} and "
                            "none was found")


def is_complete(path: Path, package: Package) -> bool:
    return is_marked_complete(path, package.requirement)


def installed_venv(package: Package, path: Path | None = None) -> Path:
    """The installed virtualenv holding ``package``; never installs it."""
    target = Path(path).expanduser() if path is not None else default_path(package)
    return installed_or_raise(target, package.requirement, default_path(package), HOME_ENV_VAR, INSTALL_COMMAND,
                              ZooNotInstalledError)


def install_venv(package: Package, path: Path | None = None, echo: Callable[[str], None] = print) -> Path:
    """Install ``package`` into its virtualenv, streaming pip's output to ``echo``; a completed install is reused."""
    target = Path(path).expanduser() if path is not None else default_path(package)
    return build_once(target, package.requirement, lambda: _install(target, package, echo), ZooReferenceError,
                      package.distribution)


def _install(target: Path, package: Package, echo: Callable[[str], None]) -> None:
    started = time.perf_counter()
    python = create_if_missing(target, lambda: find_python(package), echo, ZooReferenceError)
    pins = CONSTRAINTS / f"{package.folder}.txt"
    pip_install(python, package.requirement, echo, ZooReferenceError, constraints=pins if pins.exists() else None)
    check = subprocess.run([python, "-I", "-c", f"import {package.probe}"], capture_output=True, text=True,
                           check=False)
    if check.returncode != 0:
        raise ZooReferenceError(f"{package.requirement} installed but {package.probe} does not import:\n"
                                f"{check.stderr[-2000:]}")
    write_marker(target, package.requirement, started)


#: Aider: ``aider.history.ChatSummary`` and the budget arithmetic in ``aider.models.Model``.
AIDER = Package("aider-chat", "0.86.2", "aider.history", ((3, 10), (3, 12)))
#: LangChain v1: ``SummarizationMiddleware`` in ``langchain.agents.middleware.summarization``.
LANGCHAIN = Package("langchain", "1.5.0", "langchain.agents.middleware.summarization", ((3, 11), (3, 13)))
#: Kimi CLI: ``should_auto_compact`` and ``SimpleCompaction`` in ``kimi_cli.soul.compaction``.
KIMI_CLI = Package("kimi-cli", "1.52.0", "kimi_cli.soul.compaction", ((3, 12), (3, 13)))
#: SWE-agent's only release here: its history processors, loaded by path from ``SWE_AGENT_MODULE``. One of its
#: declared dependencies is not on the package index, so it is installed without them (``no_deps``).
SWE_AGENT = Package("sweagent", "0.0.1", "sweagent.agent.history_processors", ((3, 9), (3, 13)))
SWE_AGENT_MODULE = "sweagent/agent/history_processors.py"
#: Inspect AI: the compaction strategies in ``inspect_ai.model._compaction``.
INSPECT_AI = Package("inspect-ai", "0.3.285", "inspect_ai.model", ((3, 11), (3, 13)))
