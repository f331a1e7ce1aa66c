"""What every source format's importer is: a name, a way to recognise its files, and a reader.

A reader yields, for each conversation a file holds, either a `Recording` in
the recorded-session format or a `Skip` saying where and why it could not be
taken. Readers never raise for bad content: a broken line or a session that
breaks the format is one `Skip`, and the file's other conversations are still
read. Recognising looks only at a `Sample` (the file's first bytes and, when
it is JSON, its parsed start), so detection stays cheap on large logs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermeslab.recordings import Recording, json_kind

if TYPE_CHECKING:
    from hermeslab.core.config import Config


@dataclass(frozen=True)
class Skip:
    """One file, line or session that was not imported, and why, in words a user can act on."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True)
class Sample:
    """The part of a file detection looks at.

    ``head`` is its first bytes; ``lines`` its first JSON Lines values when the
    file is JSONL (one value per non-blank line); ``document`` the whole file as
    one JSON value when it is one (a one-line file has both).
    """

    path: Path
    head: bytes
    lines: tuple[Any, ...] = ()
    document: Any = None

    @property
    def first(self) -> Any:
        """The first JSONL value, or the whole JSON document."""
        return self.lines[0] if self.lines else self.document


@dataclass(frozen=True)
class ImportOptions:
    """Choices a user makes for formats that need them: which session of a store, which config's tools."""

    session: str | None = None
    config: Config | None = None


@dataclass(frozen=True)
class SourceFormat:
    """One format hermeslab imports."""

    name: str
    #: What the format is, for ``--help`` and the report.
    description: str
    recognises: Callable[[Sample], bool]
    read: Callable[[Path, ImportOptions], Iterable[Recording | Skip]]
    #: For formats kept as a folder of files (an event stream): whether a folder is one.
    recognises_folder: Callable[[Path], bool] | None = None


def json_lines(path: Path, unreadable: str = "") -> Iterator[tuple[int, Any] | Skip]:
    """Each non-blank line of a JSON Lines file as ``(line number, value)``, or a `Skip` for a line that is not
    JSON (``unreadable`` is added to its reason) so the reader can go on without it."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                yield Skip(f"{path}:{number}", f"not a JSON line ({exc}){unreadable}")


def json_object_lines(path: Path, kind: str, unreadable: str) -> tuple[list[dict[str, Any]], list[Skip]]:
    """The objects of a JSON Lines file whose every line is one, and a `Skip` for each line that is not JSON or
    not an object (``kind`` names the file's lines in its reason)."""
    objects: list[dict[str, Any]] = []
    skipped: list[Skip] = []
    for item in json_lines(path, unreadable):
        if isinstance(item, Skip):
            skipped.append(item)
        elif not isinstance(item[1], dict):
            skipped.append(Skip(f"{path}:{item[0]}", f"a {kind} line is an object, got {json_kind(item[1])}"))
        else:
            objects.append(item[1])
    return objects, skipped


def json_document(path: Path) -> Any:
    """The file as one JSON value, or a `Skip` saying why it is not one."""
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return Skip(str(path), f"not a JSON document: {exc}")
