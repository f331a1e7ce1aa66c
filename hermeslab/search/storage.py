"""The search index file: an SQLite database beside the lab.

Why SQLite rather than DuckDB or files of our own: the index must take a few
small writes after every turn from several processes at once and answer
point lookups (one term's blocks) in microseconds. SQLite in WAL mode lets
any number of processes read while one writes, needs nothing beyond the
standard library, and never locks the lab itself. DuckDB stays the system of
record; this file can always be rebuilt from it.

Tables: ``terms`` (term → id, document frequency of merged messages),
``blocks`` (impact-ordered posting blocks, keyed ``term_id << 20 | block
id``), ``docs`` (one row per message, with its searchable text for phrases,
snippets), ``pending`` (the postings of each batch of messages not merged
into blocks yet, grouped by term: see ``hermeslab.search.delta``), ``chunks``
(message lengths and sessions packed 1,024 to a row, so a process loads them
in a few reads) and ``sessions``.
``meta`` holds the collection counters. ``Connection`` follows the file across
a rebuild, which swaps a new file in at the same path.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

FORMAT = 1
MMAP_BYTES = 1 << 31
CHUNK_DOCS = 1_024
BLOCK_ID_BITS = 20
#: Keys bound in one ``IN (...)`` list, well below SQLite's limit on host parameters.
_SQL_VARIABLES = 500

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS terms (term TEXT PRIMARY KEY, id INTEGER NOT NULL, df INTEGER NOT NULL)"
    " WITHOUT ROWID",
    # Columns before the blobs, so reading a block's head does not touch its overflow pages.
    "CREATE TABLE IF NOT EXISTS blocks (key INTEGER PRIMARY KEY, bound REAL NOT NULL, avgdl REAL NOT NULL,"
    " size INTEGER NOT NULL, docs BLOB NOT NULL, tfs BLOB NOT NULL, nexts BLOB)",
    "CREATE TABLE IF NOT EXISTS docs (doc INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE,"
    " session INTEGER NOT NULL, seq INTEGER, role TEXT, created_at REAL, length INTEGER NOT NULL,"
    " text TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS docs_by_session ON docs (session, seq)",
    "CREATE TABLE IF NOT EXISTS pending (first INTEGER PRIMARY KEY, upto INTEGER NOT NULL, terms TEXT NOT NULL,"
    " counts BLOB NOT NULL, docs BLOB NOT NULL, tfs BLOB NOT NULL, nexts BLOB)",
    "CREATE TABLE IF NOT EXISTS chunks (chunk INTEGER PRIMARY KEY, lengths BLOB NOT NULL, sessions BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions (idx INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, parent TEXT,"
    " title TEXT, started_at REAL, source TEXT)",
)

#: Columns added since the format began; a file without them gets them (empty: older rows have none).
_ADDED_COLUMNS = (("blocks", "nexts"), ("pending", "nexts"))

#: Counters in ``meta`` and their value in an empty index.
COUNTERS = {
    "format": FORMAT,
    "docs": 0,
    "total_length": 0,
    "terms": 0,
    "sessions": 0,
    #: Messages below this number have their postings in ``blocks``; the rest in ``pending``.
    "merged_docs": 0,
    #: Bumped by every merge, so other processes drop their in-memory postings of the merged messages.
    "merges": 0,
    #: Bumped whenever a session row changes, so readers know to recompute lineage roots.
    "sessions_version": 0,
    #: The highest ``rowid`` of the lab's ``messages`` table that a sync has read.
    "lab_rowid": -1,
}


class SearchIndexError(RuntimeError):
    """The search index file cannot be used."""


def connect(path: Path, *, timeout: float, bulk: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) the index at ``path``.

    ``bulk`` is for building a fresh file that nobody else sees yet: no journal, no syncs.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise SearchIndexError(f"cannot open the search index {path}: {exc}") from exc
    try:
        if bulk:
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
        else:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")
        con.execute("PRAGMA cache_size = -65536")
        # Reads through a memory map: a search's scattered reads of blocks and texts cost a memory access
        # each instead of a system call, and the pages are shared with every other process.
        con.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        with transaction(con):
            for statement in _SCHEMA:
                con.execute(statement)
            for table, column in _ADDED_COLUMNS:
                if column not in {row[1] for row in con.execute(f"PRAGMA table_info({table})")}:
                    con.execute(f"ALTER TABLE {table} ADD COLUMN {column} BLOB")
            con.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", COUNTERS.items())
        version = read_meta(con)["format"]
    except sqlite3.DatabaseError as exc:
        con.close()
        raise SearchIndexError(f"{path} is not a usable search index ({exc}); delete it and rebuild") from exc
    if version != FORMAT:
        con.close()
        raise SearchIndexError(f"{path} has index format {version}, this hermeslab reads {FORMAT}; rebuild it")
    return con


class Connection:
    """A connection to the index file that reopens itself when the file was replaced (a rebuild)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self.con = connect(path, timeout=timeout)
        self.file = _file_id(path)

    def current(self) -> bool:
        """Whether this is still the file at the path; reopens (and returns False) when it is not."""
        if _file_id(self.path) == self.file:
            return True
        self.reopen()
        return False

    def reopen(self) -> None:
        self.con.close()
        self.con = connect(self.path, timeout=self.timeout)
        self.file = _file_id(self.path)


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction; ``IMMEDIATE`` so two writers queue instead of failing on upgrade."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def read_meta(con: sqlite3.Connection) -> dict[str, Any]:
    return dict(con.execute("SELECT key, value FROM meta").fetchall())


def write_meta(con: sqlite3.Connection, values: dict[str, Any]) -> None:
    con.executemany("UPDATE meta SET value = ? WHERE key = ?", [(value, key) for key, value in values.items()])


def select_in(con: sqlite3.Connection, query: str, keys: Iterable[Any]) -> dict[Any, Any]:
    """``query`` (with ``{}`` for the placeholders) over ``keys`` in slices, as a dict of its two columns."""
    keys = list(keys)
    found: dict[Any, Any] = {}
    for start in range(0, len(keys), _SQL_VARIABLES):
        part = keys[start:start + _SQL_VARIABLES]
        found.update(con.execute(query.format(",".join("?" * len(part))), part).fetchall())
    return found


def block_key(term_id: int, block_id: int) -> int:
    if not 0 <= block_id < 1 << BLOCK_ID_BITS:
        raise SearchIndexError(f"block id {block_id} out of range")
    return term_id << BLOCK_ID_BITS | block_id


def block_range(term_id: int) -> tuple[int, int]:
    """The first and last block key of a term."""
    return term_id << BLOCK_ID_BITS, (term_id << BLOCK_ID_BITS) | ((1 << BLOCK_ID_BITS) - 1)


def append_chunks(con: sqlite3.Connection, first: int, lengths: np.ndarray, sessions: np.ndarray) -> None:
    """Write the lengths and sessions of messages ``first, first+1, ...`` into their chunks."""
    position = 0
    while position < len(lengths):
        chunk, offset = divmod(first + position, CHUNK_DOCS)
        take = min(CHUNK_DOCS - offset, len(lengths) - position)
        row = con.execute("SELECT lengths, sessions FROM chunks WHERE chunk = ?", (chunk,)).fetchone()
        old_lengths, old_sessions = (row if row else (b"", b""))
        con.execute("INSERT OR REPLACE INTO chunks (chunk, lengths, sessions) VALUES (?, ?, ?)",
                    (chunk, old_lengths[:offset * 4] + lengths[position:position + take].astype("<u4").tobytes(),
                     old_sessions[:offset * 4] + sessions[position:position + take].astype("<i4").tobytes()))
        position += take
