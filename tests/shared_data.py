"""What the slow tests need from outside the repository: the shared recordings and the reference venvs.

The recordings live in ``../shared/datasets`` beside the project root; the
reference Hermes and OpenHands installs in their own virtualenvs, which only
``hermeslab reference install`` creates. Tests that need either skip when it
is missing on a developer's machine (the reason names what to run), but fail
under ``CI=true``: a green CI must have run them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def hermes_venv() -> Path:
    """The installed reference Hermes virtualenv, or a skip naming the command that installs it (a failure
    under CI, which installs it first)."""
    from hermeslab.reference.venv import ReferenceNotInstalledError
    from hermeslab.reference.venv import hermes_venv as installed

    try:
        return installed()
    except ReferenceNotInstalledError as exc:
        _missing(str(exc))
        raise


def openhands_venv(release) -> Path:
    """The installed virtualenv of one OpenHands release, or a skip naming the command that installs it (a
    failure under CI)."""
    from hermeslab.reference.openhands.venv import OpenHandsNotInstalledError, installed_venv

    try:
        return installed_venv(release)
    except OpenHandsNotInstalledError as exc:
        _missing(str(exc))
        raise


def zoo_venv(package) -> Path:
    """The installed virtualenv of a zoo agent's package, or a skip naming the command that installs it (a
    failure under CI)."""
    from hermeslab.reference.venv import ReferenceNotInstalledError
    from hermeslab.reference.zoo.venv import installed_venv

    try:
        return installed_venv(package)
    except ReferenceNotInstalledError as exc:
        _missing(str(exc))
        raise
