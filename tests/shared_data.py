"""Where the shared recorded sessions live (``../shared/datasets`` beside the project root).

Tests that need them skip when they are absent on a developer's machine, but
fail under ``CI=true``: a green CI must have run them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def dataset(name: str) -> Path:
    """The path of one shared recording, or a skip (a failure under CI) when it is missing."""
    path = DATASETS / name
    if not path.exists():
        message = f"shared dataset {path} not found"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)
    return path
