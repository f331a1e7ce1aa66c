"""What the slow tests need from outside the repository: the shared recordings and the Hermes venv.

The recordings live in ``../shared/datasets`` beside the project root; the
reference Hermes install in its own cached virtualenv. Tests that need either
skip when it is missing on a developer's machine, but fail under ``CI=true``:
a green CI must have run them.
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
    """The reference Hermes virtualenv (created once), or a skip (a failure under CI)."""
    from hermeslab.reference.errors import HermesReferenceError
    from hermeslab.reference.venv import ensure_hermes_venv

    try:
        return ensure_hermes_venv()
    except HermesReferenceError as exc:
        _missing(f"could not create the Hermes reference venv: {exc}")
        raise
