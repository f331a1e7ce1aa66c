"""Dataset files of recorded sessions: read one line at a time, written atomically.

The format of a line is `hermeslab.recordings` (`Recording`); this module
handles whole JSONL files of them. Reading streams the file one line at a
time (a large file is never held in memory as text), yields every good
recording and keeps a `RecordingProblem` for every bad line, so one broken
session never hides the others.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, RecordingError, RecordingProblem, validate_recording

# ---------------------------------------------------------------- reading

#: Turns one parsed JSON line into the dict of a recording, or raises ValueError saying why it cannot.
LineParser = Callable[[Any, int], dict[str, Any]]


class RecordingsFile:
    """The good recordings of a JSONL file, read lazily; the bad lines end up in ``problems``.

    Each pass over the object reads the file again from the start and rebuilds
    ``problems``, ``lines`` and ``loaded``, which are complete once the pass has
    finished. A line is a problem when it is not UTF-8 or JSON, when ``parse``
    rejects it, when the result breaks the format, or when its id repeats an
    earlier line's; blank lines are skipped.
    """

    def __init__(self, path: str | Path, parse: LineParser | None = None):
        self.path = Path(path).expanduser()
        if not self.path.exists():
            raise FileNotFoundError(f"no recordings file at {self.path}")
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path} is a directory; give a .jsonl file")
        self.parse = parse
        self.problems: list[RecordingProblem] = []
        self.lines = 0
        self.loaded = 0

    def __iter__(self) -> Iterator[Recording]:
        self.problems, self.lines, self.loaded = [], 0, 0
        first_line_of: dict[str, int] = {}
        name = str(self.path)
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                self.lines = number
                data, problems = self._parse_line(raw, number)
                if data is None and not problems:
                    continue
                problems = [replace(p, path=name, line=number) for p in problems]
                if not problems and data["id"] in first_line_of:
                    problems = [RecordingProblem(f"duplicate id {data['id']!r} (first used on line "
                                                 f"{first_line_of[data['id']]})", name, number,
                                                 recording_id=data["id"])]
                if problems:
                    self.problems += problems
                    continue
                first_line_of[data["id"]] = number
                self.loaded += 1
                yield Recording.from_dict(data)

    def _parse_line(self, raw: bytes, number: int) -> tuple[dict[str, Any] | None, list[RecordingProblem]]:
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            return None, [RecordingProblem(f"not valid UTF-8 (byte {exc.start})")]
        if not text.strip():
            return None, []
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, [RecordingProblem(f"broken JSON: {exc.msg} at column {exc.colno}")]
        if self.parse is not None:
            try:
                data = self.parse(data, number)
            except ValueError as exc:
                return None, [RecordingProblem(str(exc))]
        problems = validate_recording(data)
        return (None, problems) if problems else (data, [])


def read_recordings(path: str | Path) -> RecordingsFile:
    """The recordings of a JSONL file in the recorded-session format (iterate it; see `RecordingsFile`)."""
    return RecordingsFile(path)


def load_recordings(path: str | Path) -> list[Recording]:
    """Every recording of a file, or a RecordingError listing every bad line: for files that must be clean."""
    recordings = read_recordings(path)
    loaded = list(recordings)
    if recordings.problems:
        raise RecordingError(recordings.problems)
    return loaded


# ---------------------------------------------------------------- writing


def write_recordings(path: str | Path, recordings: Iterable[Recording], *,
                     problems: list[RecordingProblem] | None = None) -> int:
    """Write ``recordings`` as a JSONL file; returns how many were written.

    Without ``problems`` an invalid recording (or a repeated id) raises a
    RecordingError and the file is left as it was: it is written to a temporary
    neighbour and moved into place only at the end. With a ``problems`` list,
    invalid recordings are left out and their problems appended to it.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a directory; give a file path such as {target / 'sessions.jsonl'}")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    count, ids = 0, set()
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            for recording in recordings:
                found = validate_recording(recording.to_dict())
                if not found and recording.id in ids:
                    found = [RecordingProblem(f"duplicate id {recording.id!r}", recording_id=recording.id)]
                if found and problems is None:
                    raise RecordingError(found)
                if found:
                    problems.extend(found)
                    continue
                ids.add(recording.id)
                out.write(json.dumps(recording.to_dict(), ensure_ascii=False) + "\n")
                count += 1
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
    return count
