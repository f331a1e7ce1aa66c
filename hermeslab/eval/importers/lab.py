"""hermeslab's own lab (DuckDB): one conversation, picked by any of its sessions.

The lab keeps no tool schemas; with a config in the options, the built-in
tools that config offers (and any the session called) are attached.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hermeslab.recordings import Recording

from .base import ImportOptions, Sample, Skip, SourceFormat
from .transcript import finished

#: Where a DuckDB database file says what it is.
DUCKDB_MAGIC_AT, DUCKDB_MAGIC = 8, b"DUCK"


def _recognises(sample: Sample) -> bool:
    return sample.head[DUCKDB_MAGIC_AT:DUCKDB_MAGIC_AT + len(DUCKDB_MAGIC)] == DUCKDB_MAGIC


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    from hermeslab.recordings.lab import builtin_tool_schemas, import_lab

    if not options.session:
        yield Skip(str(path), "a hermeslab lab holds many conversations: give --session ID to pick one")
        return
    try:
        recording = import_lab(path, options.session)
    except ValueError as exc:
        yield Skip(str(path), str(exc))
        return
    if options.config is not None:
        recording.tools = builtin_tool_schemas(options.config, recording.messages)
    yield finished(recording, f"{path}: session {recording.id}")


FORMAT = SourceFormat("lab", "a hermeslab lab (DuckDB): the conversation of --session ID", _recognises, _read)
