"""Whole-file updates that several processes can make at once without losing any.

A writer holds ``<file>.lock`` (``filelock``, so it works across processes
and threads) while it reads, changes and rewrites the file; the new text goes
to a temporary file in the same folder that is then renamed over the old one,
so a reader sees the old text or the new text, never half of either.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

#: Seconds a writer waits for another writer before giving up.
LOCK_TIMEOUT_SECONDS = 10.0


class BusyError(RuntimeError):
    """Another writer held the file for longer than the lock timeout."""


@contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the lock of ``path`` (creating its folder) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path) + ".lock", timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise BusyError(f"{path.name} is being written by another process; try again") from None
    try:
        yield
    finally:
        lock.release()


def read_text(path: Path) -> str:
    """The file's text, or "" when it does not exist yet."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (call it while holding ``locked(path)``)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
