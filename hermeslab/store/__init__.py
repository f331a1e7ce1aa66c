"""The lab database: every session, turn, model call and tool call, in one DuckDB file.

``StoreWriter`` records the event stream; ``open()`` gives a ``Lab`` of pandas
views over the same file. Neither keeps the file open between uses, so many
processes can write to and read from one lab at the same time.
"""

from __future__ import annotations

from pathlib import Path

from hermeslab.store.lab import Lab, default_lab_path
from hermeslab.store.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    LabLockedError,
    Migration,
    SchemaError,
    StoreError,
    ensure_schema,
    schema_version,
)
from hermeslab.store.writer import StoreWriteError, StoreWriter

__all__ = [
    "Lab",
    "LabLockedError",
    "MIGRATIONS",
    "Migration",
    "SCHEMA_VERSION",
    "SchemaError",
    "StoreError",
    "StoreWriteError",
    "StoreWriter",
    "default_lab_path",
    "ensure_schema",
    "open",
    "schema_version",
]


def open(path: str | Path | None = None, *, lock_timeout: float = 30.0) -> Lab:  # noqa: A001
    """The lab at ``path`` (default: ``hermeslab.home.default_lab_path()``); a missing file reads as an empty lab."""
    return Lab(path, lock_timeout=lock_timeout)
