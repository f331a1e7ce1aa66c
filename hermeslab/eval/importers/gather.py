"""Importing files and folders of mixed formats into one list of recordings, with an account of every skip.

Folders are walked in name order; hidden files and folders (a name starting
with ".") are not looked at, so a ``.git`` inside a log folder costs nothing.
A folder a format keeps as one conversation (an event stream) is read as a
whole. Every file ends up either taken (with its format and how many
recordings it gave) or skipped with a reason. A recordings file needs unique
ids: a recording whose id an earlier one has is skipped when it is the same
conversation (a copied log), and kept under the id with ``#2``, ``#3``… added
when it is another one (two runs of one benchmark task, say).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hermeslab.recordings import Recording

from .base import ImportOptions, Skip, SourceFormat
from .detect import detect, detect_folder, sample_of, unrecognised


@dataclass(frozen=True)
class Taken:
    """A file (or event-stream folder) that gave recordings."""

    path: str
    format: str
    recordings: int

    def __str__(self) -> str:
        return f"{self.path}: {self.recordings} recording(s) ({self.format})"


@dataclass
class ImportReport:
    """The recordings taken, where they came from, and everything skipped."""

    recordings: list[Recording] = field(default_factory=list)
    taken: list[Taken] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


def import_paths(paths: Iterable[str | Path], *, source_format: SourceFormat | None = None,
                 options: ImportOptions = ImportOptions()) -> ImportReport:
    """Every conversation in ``paths`` (files and folders); ``source_format`` skips detection."""
    report = ImportReport()
    first_source: dict[str, str] = {}
    taken: dict[str, Recording] = {}
    for unit in _units(paths, report.skipped, source_format):
        path, chosen = unit
        if chosen is None:
            try:
                sample = sample_of(path)
            except OSError as exc:
                report.skipped.append(Skip(str(path), f"cannot be read: {exc.strerror or exc}"))
                continue
            chosen = detect(sample)
            if chosen is None:
                report.skipped.append(Skip(str(path), unrecognised(sample)))
                continue
        count = skips = 0
        for outcome in _read(chosen, path, options):
            if isinstance(outcome, Skip):
                report.skipped.append(outcome)
                skips += 1
                continue
            if outcome.id in taken:
                if taken[outcome.id].messages == outcome.messages:
                    report.skipped.append(Skip(f"{path}: {outcome.id}", "the same conversation was already taken "
                                                                        f"from {first_source[outcome.id]}"))
                    skips += 1
                    continue
                outcome.meta["id_also_in"] = first_source[outcome.id]
                outcome.id = next(f"{outcome.id}#{n}" for n in range(2, len(taken) + 3)
                                  if f"{outcome.id}#{n}" not in taken)
            first_source[outcome.id] = str(path)
            taken[outcome.id] = outcome
            report.recordings.append(outcome)
            count += 1
        if count:
            report.taken.append(Taken(str(path), chosen.name, count))
        elif not skips:  # read as its format, yet holding nothing: say so rather than pass over it
            report.skipped.append(Skip(str(path), f"no conversation in it ({chosen.name})"))
    return report


def _units(paths: Iterable[str | Path], skipped: list[Skip],
           forced: SourceFormat | None) -> Iterator[tuple[Path, SourceFormat | None]]:
    """Each file or event-stream folder to read, with its format when that is already known."""
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            skipped.append(Skip(str(path), "no such file or folder"))
        elif path.is_dir():
            yield from _folder(path, forced)
        else:
            yield path, forced


def _folder(folder: Path, forced: SourceFormat | None) -> Iterator[tuple[Path, SourceFormat | None]]:
    as_one = detect_folder(folder)
    if as_one is not None and forced in (None, as_one):
        yield folder, as_one
        return
    for child in sorted(folder.iterdir()):
        if child.name.startswith("."):
            continue
        if child.is_dir():
            yield from _folder(child, forced)
        elif child.is_file():
            yield child, forced


def _read(source_format: SourceFormat, path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    """The reader's outcomes; a file that cannot be read at all is one Skip."""
    try:
        yield from source_format.read(path, options)
    except OSError as exc:
        yield Skip(str(path), f"cannot be read: {exc.strerror or exc}")
