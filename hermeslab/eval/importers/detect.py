"""Which format a file is in, from its first bytes and its JSON's shape, never from its name alone.

Files are sampled, not read whole, where that is enough: binary stores by
their magic bytes, JSON Lines by their first lines. A file that is one JSON
document (a trajectory) is parsed whole, since its shape is the only sign of
what wrote it. Formats are tried in `FORMATS` order; the first that
recognises the sample takes the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hermeslab.recordings import json_kind

from . import (claude_code, codex, hermes_state, inspect_eval, lab, minisweagent, openai, openhands,
               openhands_sdk, sweagent)
from .base import Sample, SourceFormat

FORMATS: tuple[SourceFormat, ...] = (
    hermes_state.FORMAT, lab.FORMAT, inspect_eval.FORMAT, minisweagent.FORMAT, sweagent.FORMAT,
    openhands_sdk.FORMAT, openhands.FORMAT, claude_code.FORMAT, codex.FORMAT, openai.FORMAT,
)
#: How many bytes decide a binary format, and how many JSONL lines a text one.
HEAD_BYTES = 4096
SAMPLE_LINES = 5


def format_named(name: str) -> SourceFormat:
    """The format called ``name``, or a ValueError listing the names there are."""
    for source_format in FORMATS:
        if source_format.name == name:
            return source_format
    raise ValueError(f"unknown format {name!r} (formats are: {', '.join(f.name for f in FORMATS)})")


def sample_of(path: Path) -> Sample:
    """What detection needs of ``path`` (OSError when it cannot be read).

    Two or more JSON lines make JSONL (a broken later line is the reader's to
    report); a file whose first line is not JSON on its own is tried as one
    pretty-printed document; a one-line file is both.
    """
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
        if not _looks_like_text(head):
            return Sample(path, head)
        handle.seek(0)
        lines: list[Any] = []
        for raw in handle:
            if not raw.strip():
                continue
            try:
                lines.append(json.loads(raw))
            except (json.JSONDecodeError, UnicodeDecodeError):
                break
            if len(lines) == SAMPLE_LINES:
                break
        else:
            if len(lines) == 1:
                return Sample(path, head, tuple(lines), lines[0])
    if lines:
        return Sample(path, head, tuple(lines))
    try:
        return Sample(path, head, document=json.loads(path.read_bytes()))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return Sample(path, head)


def _looks_like_text(head: bytes) -> bool:
    return b"\x00" not in head


def detect(sample: Sample) -> SourceFormat | None:
    """The first format that recognises the sample, or None."""
    return next((f for f in FORMATS if f.recognises(sample)), None)


def detect_folder(folder: Path) -> SourceFormat | None:
    """The format a whole folder is in (an event stream kept as one file per event), or None."""
    return next((f for f in FORMATS if f.recognises_folder is not None and f.recognises_folder(folder)), None)


def unrecognised(sample: Sample) -> str:
    """Why no format took the file, naming what it looks like so the user can tell what it is."""
    names = ", ".join(f.name for f in FORMATS)
    value = sample.first
    container = "document" if sample.document is not None else "lines"
    if value is None and not sample.lines and sample.document is None:
        kind = "binary data" if not _looks_like_text(sample.head) else "text that is not JSON"
        return f"not a format hermeslab imports ({kind}; formats are: {names})"
    if isinstance(value, dict):
        keys = ", ".join(sorted(value)[:8]) or "none"
        shape = f"JSON {container} of objects with keys {keys}"
    else:
        shape = f"JSON {container} holding a {json_kind(value)}"
    return f"not a format hermeslab imports ({shape}; formats are: {names})"
