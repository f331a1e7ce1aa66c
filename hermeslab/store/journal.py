"""Rows built but not yet committed, kept in a file so that killing the process does not lose them.

A DuckDB commit to the lab costs ~20 ms (attaching the file, one statement
per table, the checkpoint when it is detached), ten times a scripted turn.
Appending the same rows to a plain file costs tens of microseconds, and bytes
handed to the kernel survive the death of the process that wrote them. So the
writer appends each batch here first, lets the agent go on, and commits to the
lab in the background; once the lab has every batch appended so far, the file
is emptied, and at a clean close it is deleted.

Each writer owns its files, ``<lab>.pending/<pid>-<random>-<n>.jsonl``, and
holds an exclusive ``flock`` on each for as long as it lives. The kernel drops
that lock when the process dies, however it dies, so a file whose lock can be
taken belongs to nobody: the next writer on the lab adopts it and commits the
batches the lab does not have yet, file by file in the order they were begun.
(A file just created and not yet locked is taken for one too; its writer,
once it holds the lock, checks that the file is still there.)
A batch is committed in one transaction and always has at least one ``events``
row, so whether its first ``events`` row is in the lab says whether the whole
batch is (see ``transaction.is_committed``).

The files hold redacted rows only: the batch is built, and redacted, before it
is appended.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from hermeslab.store.batch import Batch

log = logging.getLogger(__name__)

_TIMESTAMP = "$timestamp"


def pending_dir(lab_path: Path) -> Path:
    """The folder beside the lab file that holds its writers' uncommitted batches."""
    lab_path = lab_path.expanduser().resolve()  # every writer of one file must find the same folder
    return lab_path.with_name(lab_path.name + ".pending")


def encode(batch: Batch) -> bytes:
    """One line of JSON; TIMESTAMP values (naive UTC datetimes) are tagged so they come back as such."""
    document = {
        "rows": batch.rows,
        "lifecycle": batch.lifecycle,
        "totals": batch.totals,
        "first_seen": batch.first_seen,
        "archives": batch.archives,
    }
    return (_ENCODER.encode(document) + "\n").encode()


def _tag(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_TIMESTAMP: value.isoformat()}
    raise TypeError(f"a lab row holds no {type(value).__name__} values")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_tag)


def decode(line: bytes) -> Batch:
    document = json.loads(line, object_hook=_untag)
    return Batch(
        rows=document["rows"],
        lifecycle=[(op, row) for op, row in document["lifecycle"]],
        totals=document["totals"],
        first_seen=document["first_seen"],
        archives=[(session_id, seq) for session_id, seq in document["archives"]],
    )


def _untag(document: dict[str, Any]) -> Any:
    if len(document) == 1 and _TIMESTAMP in document:
        return datetime.fromisoformat(document[_TIMESTAMP])
    return document


#: A pending file longer than this is closed to appends and a new one begun, so that a writer that
#: never catches up during a long stretch of back-to-back turns can still delete what it committed.
SEGMENT_BYTES = 1 << 20
#: How many new files a writer tries before it gives up appending (each one lost to a writer adopting
#: orphans at the moment it was created, or to a folder removed at that moment).
_BEGIN_ATTEMPTS = 5


@dataclass
class _Segment:
    path: Path
    fd: int
    size: int = 0
    last: int = 0  # number of the last batch appended to it


class Journal:
    """This writer's pending files: append a batch before committing it, forget it once committed.

    Files are created at the first append, so a writer that never writes
    leaves none behind. Thread-safe: one thread appends while another reports
    commits. Batches are numbered from 1 in the order they were appended.
    """

    def __init__(self, lab_path: Path):
        self.folder = pending_dir(lab_path)
        #: Names sort in the order the files were begun, which is the order their batches go to the lab.
        self._stem = f"{os.getpid()}-{os.urandom(4).hex()}"
        self._guard = threading.Lock()
        self._segments: list[_Segment] = []  # oldest first; appends go to the last
        self._begun = 0
        self._appended = 0
        self._committed = 0

    def append(self, batch: Batch) -> int:
        """Write ``batch`` to the file; returns its number, for ``committed()`` once it is in the lab."""
        data = encode(batch)
        with self._guard:
            if not self._segments or self._segments[-1].size >= SEGMENT_BYTES:
                self._segments.append(self._begin())
            segment = self._segments[-1]
            try:
                _write_all(segment.fd, data)
            except BaseException:
                os.ftruncate(segment.fd, segment.size)  # no half line for the next batch to run into
                raise
            segment.size += len(data)
            self._appended += 1
            segment.last = self._appended
            return self._appended

    def committed(self, through: int) -> None:
        """Batches up to number ``through`` are in the lab: delete the files that hold nothing newer, and
        empty the one appended to if nothing newer was appended."""
        with self._guard:
            self._committed = max(self._committed, through)
            while len(self._segments) > 1 and self._segments[0].last <= self._committed:
                _delete(self._segments.pop(0))
            if self._segments and self._committed >= self._appended:
                os.ftruncate(self._segments[-1].fd, 0)
                self._segments[-1].size = 0

    def close(self) -> list[Path]:
        """Let the files go, deleting those whose batches were all committed; returns those kept.

        A kept file is adopted by the next writer on the lab.
        """
        with self._guard:
            kept = []
            for segment in self._segments:
                if segment.size and segment.last > self._committed:
                    os.close(segment.fd)  # releases the lock
                    kept.append(segment.path)
                else:
                    _delete(segment)
            self._segments.clear()
            if not kept:
                with contextlib.suppress(OSError):  # still holds another writer's files, or is gone
                    self.folder.rmdir()
            return kept

    def _begin(self) -> _Segment:
        """A new file, locked by this writer and still in the folder under its name.

        A file exists for a moment before its lock is taken. A writer adopting
        orphans in that moment (this writer's own committing thread as it starts,
        or another process's) takes it for a dead writer's empty file: it holds
        its lock, then deletes it. Rows appended to a deleted file would be lost
        to a kill, so such a file is given up and the next one begun.
        """
        for _ in range(_BEGIN_ATTEMPTS):
            self._begun += 1
            path = self.folder / f"{self._stem}-{self._begun:06d}.jsonl"
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                fd = _open_locked(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            except FileNotFoundError:  # another writer closing cleanly removed the empty folder in between
                continue
            if fd is None:  # an adopting writer holds it
                continue
            if _is_named(path, fd):
                return _Segment(path, fd)
            os.close(fd)  # an adopting writer deleted it before this writer's lock
        raise OSError(f"cannot begin a pending file in {self.folder}: each new file was removed or locked "
                      f"by another writer before it could be locked ({_BEGIN_ATTEMPTS} attempts)")


def _is_named(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        return False


def _delete(segment: _Segment) -> None:
    segment.path.unlink(missing_ok=True)
    os.close(segment.fd)


@dataclass
class Orphan:
    """A pending file whose writer is gone, held locked while its batches are committed."""

    path: Path
    batches: list[Batch]
    _fd: int

    def discard(self) -> None:
        """Its batches are all in the lab now: delete the file and let go of it."""
        self.path.unlink(missing_ok=True)
        os.close(self._fd)

    def release(self) -> None:
        """Leave the file for a later writer (committing its batches failed)."""
        os.close(self._fd)


def orphans(lab_path: Path) -> Iterator[Orphan]:
    """Pending files of the lab whose writers died, each locked until discarded or released.

    A line cut short by the kill (the batch that was being appended) is dropped.
    """
    folder = pending_dir(lab_path)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.jsonl")):
        try:
            fd = _open_locked(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # another writer adopted it just now
        if fd is None:
            continue  # its writer is alive (this process's own writers included: each holds its own lock)
        try:
            batches = list(_read_batches(fd, path))
        except BaseException:
            os.close(fd)
            raise
        yield Orphan(path, batches, fd)


def _read_batches(fd: int, path: Path) -> Iterator[Batch]:
    with os.fdopen(os.dup(fd), "rb") as file:
        for number, line in enumerate(file, 1):
            if not line.endswith(b"\n"):
                log.warning("%s: dropping batch %d, cut short when its writer died", path, number)
                return
            try:
                yield decode(line)
            except (ValueError, KeyError, TypeError) as exc:
                log.error("%s: batch %d cannot be read and is skipped: %s", path, number, exc)


def _open_locked(path: Path, flags: int) -> int | None:
    """``path`` opened and exclusively locked, or None if another process holds its lock."""
    fd = os.open(path, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

