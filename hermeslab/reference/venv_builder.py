"""The steps every pinned reference virtualenv shares: finding it, building it under a lock, marking it done.

The OpenHands and zoo environments differ in which package they install and
how they prove the install worked; where they live, how a finished install is
recorded (a marker file written last, so an interrupted one is redone rather
than trusted) and how concurrent installs wait for each other (a lock file
beside the venv) are the same, and live here. Each step raises the caller's
own error class, so a failure still names the environment it came from.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from hermeslab.core.hermes_install import MARKER_NAME, venv_python
from hermeslab.reference.errors import HermesReferenceError
from hermeslab.reference.venv import ReferenceNotInstalledError, run_streamed


@dataclass(frozen=True)
class PinnedDistribution:
    """A distribution pinned to one version, and the module whose import proves it installed."""

    distribution: str
    version: str
    probe: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def folder(self) -> str:
        """The venv's folder name under its home."""
        return f"{self.distribution}-{self.version}"


def default_place(home_env_var: str, folder: str) -> Path:
    """``folder`` under ``$home_env_var`` when set, else under ``~/.cache/hermeslab``."""
    home = os.environ.get(home_env_var)
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "hermeslab") / folder


def is_marked_complete(path: Path, requirement: str) -> bool:
    """Whether ``path`` holds a venv whose marker records a finished install of ``requirement``."""
    try:
        marker = json.loads((path / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(marker, dict) and marker.get("requirement") == requirement
            and marker.get("complete") is True and venv_python(path).exists())


def installed_or_raise(target: Path, requirement: str, default: Path, home_env_var: str, install_command: str,
                       not_installed: type[ReferenceNotInstalledError]) -> Path:
    """``target`` when it holds a finished install, else ``not_installed`` naming the command that installs it."""
    if is_marked_complete(target, requirement):
        return target
    command = install_command if target == default else f"{home_env_var}={target.parent} {install_command}"
    raise not_installed(f"the {requirement} reference environment", target, command)


def build_once(target: Path, requirement: str, build: Callable[[], None], error: type[HermesReferenceError],
               what: str) -> Path:
    """Run ``build`` under the venv's lock unless a finished install is there; file errors become ``error``."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / f".{target.name}.lock")):
            if not is_marked_complete(target, requirement):
                build()
    except OSError as exc:
        raise error(f"could not prepare the {what} venv at {target}: {exc}") from exc
    return target


def create_if_missing(target: Path, find_base: Callable[[], str], echo: Callable[[str], None],
                      error: type[HermesReferenceError], note: str = "") -> str:
    """Create the venv at ``target`` (unless one is there) with the Python ``find_base`` picks; its interpreter."""
    if target.exists() and not (target / "pyvenv.cfg").exists():
        raise error(f"{target} exists and is not a virtualenv; refusing to use it")
    if not venv_python(target).exists():
        base = find_base()
        echo(f"  creating a virtualenv with {base}{note}")
        made = subprocess.run([base, "-m", "venv", str(target)], capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise error(f"could not create a virtualenv at {target}:\n{tail(made.stderr)}")
    return str(venv_python(target))


def pip_install(python: str, requirement: str, echo: Callable[[str], None], error: type[HermesReferenceError], *,
                constraints: Path | None = None, no_deps: bool = False) -> None:
    """``pip install`` into the venv, pinned to ``constraints`` if given, its output passed to ``echo`` as it
    comes; ``error`` when pip fails."""
    options = ["-c", str(constraints)] if constraints is not None else []
    options += ["--no-deps"] if no_deps else []
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *options, requirement]
    returncode, output = run_streamed(command, echo)
    if returncode != 0:
        shown = "pip install --no-deps" if no_deps else "pip install"
        raise error(f"{shown} {requirement} failed (exit code {returncode}); is the package index reachable?\n"
                    f"{output}")


def write_marker(target: Path, requirement: str, started: float, **extra: object) -> None:
    """Record a finished install (written last, so only a complete one is ever marked)."""
    marker = {"requirement": requirement, "complete": True, **extra,
              "install_seconds": round(time.perf_counter() - started, 1),
              "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (target / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def tail(text: str, lines: int = 25) -> str:
    """The last ``lines`` lines of a tool's output, enough to show why it failed."""
    return "\n".join(text.strip().splitlines()[-lines:])
