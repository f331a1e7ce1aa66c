"""Where a lab lives when nothing names its file: ``$HERMESLAB_HOME``, else ``.hermeslab`` here.

The precedence, highest first: a command's ``--lab`` (or the notebook's
``Hermes.lab``), the config's ``store.path``, ``$HERMESLAB_HOME/lab.duckdb``,
``./.hermeslab/lab.duckdb``. Memory files (MEMORY.md, USER.md) go beside the
lab unless ``memory.path`` says otherwise, so the same variable gives them a
fixed home too. This module imports nothing heavy: ``--help`` and the CLI's
lab lookups use it without loading DuckDB.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable naming the folder for the default lab and its memory files.
HOME_ENV_VAR = "HERMESLAB_HOME"
LAB_FILE_NAME = "lab.duckdb"


def lab_home() -> Path:
    """``$HERMESLAB_HOME`` (``~`` expanded, made absolute) when set and not empty, else ``./.hermeslab``.

    Read at call time, so a later change of directory or of the variable is seen.
    """
    configured = os.environ.get(HOME_ENV_VAR, "").strip()
    return Path(configured).expanduser().absolute() if configured else Path.cwd() / ".hermeslab"


def default_lab_path() -> Path:
    """The lab file used when neither ``--lab`` nor ``store.path`` names one."""
    return lab_home() / LAB_FILE_NAME
