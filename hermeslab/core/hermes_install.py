"""Where the reference hermes-agent 0.19.0 virtualenv lives and how a finished install is marked.

Both the reference harness (which installs it) and the compression pipeline
(which reads Hermes's texts from it) need this; it lives in ``core`` so the
pipeline never imports the harness, which imports the pipeline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HERMES_REQUIREMENT = "hermes-agent==0.19.0"
VENV_ENV_VAR = "HERMESLAB_HERMES_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "hermeslab" / "hermes-agent-0.19.0"
MARKER_NAME = "hermeslab-venv.json"


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
