"""What the slow tests need from outside the repository: the shared recordings and the reference venvs.

The recordings live in ``../shared/datasets`` beside the project root; the
reference Hermes and OpenHands installs in their own virtualenvs, which only
``hermeslab reference install`` creates. Tests that need either skip when it
is missing on a developer's machine (the reason names what to run), but fail
under ``CI=true``: a green CI must have run them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def _missing(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message, allow_module_level=True)


def dataset(name: str) -> Path:
    """The path of one shared recording, or a skip (a failure under CI) when it is missing."""
    path = DATASETS / name
    if not path.exists():
        _missing(f"shared dataset {path} not found")
    return path


def needing_reference(run: Callable[..., T], *args: Any) -> T:
    """``run(*args)``, or a skip naming the command that installs the reference environment it found missing (a
    failure under CI, which installs them first)."""
    from hermeslab.reference.venv import ReferenceNotInstalledError

    try:
        return run(*args)
    except ReferenceNotInstalledError as exc:
        _missing(str(exc))
        raise


def hermes_venv() -> Path:
    """The installed reference Hermes virtualenv, or a skip naming the command that installs it."""
    from hermeslab.reference.venv import hermes_venv as installed

    return needing_reference(installed)


def openhands_venv(release) -> Path:
    """The installed virtualenv of one OpenHands release, or a skip naming the command that installs it."""
    from hermeslab.reference.openhands.venv import installed_venv

    return needing_reference(installed_venv, release)


def zoo_venv(package) -> Path:
    """The installed virtualenv of a zoo agent's package, or a skip naming the command that installs it."""
    from hermeslab.reference.zoo.venv import installed_venv

    return needing_reference(installed_venv, package)
