"""The A/B results file: a DuckDB database of its own with a ``runs`` and a ``results`` table.

``results`` is wide — one row per (session, config hash, cell function), one
column per metric — because that is the shape every analysis wants: the
frame ``SELECT * FROM results`` returns is already one observation per row,
``paired_compare`` reads it as is, ``groupby("config").mean()`` and SQL
aggregates work column by column with their real types, and pairing two
configs is one merge on ``session_id``. A long (metric, value) layout would
need a pivot before any of that and would force every metric into one
type. Metrics a cell function adds later become new columns
(``ALTER TABLE``); an integer column that meets a fraction is widened to
DOUBLE. A NaN metric is stored as NULL (both mean "not defined").

``failed_turns`` is a column of every results table, and of every frame read
from one, even when no row has a value: a config whose turns failed did less
work and looks cheaper, so comparisons need the count beside every cell.
Opening a file written before the column existed adds it (NULL in its rows:
not known). Likewise ``note``, the text an ``ok`` row must be read with (a
summariser that fell back, an exam that scored nothing): NULL when there is
none, or in rows written before it existed.

``runs`` records each invocation: its id, start and end, the configs (name,
hash, YAML) and cell function, the hermeslab version and the host, counts,
and the recording problems that were skipped.

Rows are written by the runner's process only, buffered and flushed about
once a second, so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

#: Columns of ``results`` that identify and describe a cell; every other column is a metric.
ROW_COLUMNS = ("session_id", "config", "config_hash", "run_id", "cell", "status", "error", "note")
#: Key columns added after the first files were written (added to older files when they are opened).
LATER_ROW_COLUMNS = {"note": "VARCHAR"}
#: Metric columns every results table has (added to older files when they are opened), with their types.
STANDARD_METRICS = {"failed_turns": "BIGINT"}
TABLES = ("runs", "results")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMP,
    finished_at TIMESTAMP,
    status VARCHAR,
    hermeslab_version VARCHAR,
    host VARCHAR,
    python VARCHAR,
    cell VARCHAR,
    executor VARCHAR,
    workers INTEGER,
    configs VARCHAR,
    sessions INTEGER,
    cells INTEGER,
    computed INTEGER,
    reused INTEGER,
    failed INTEGER,
    problems VARCHAR
);
CREATE TABLE IF NOT EXISTS results (
    session_id VARCHAR NOT NULL,
    config VARCHAR,
    config_hash VARCHAR NOT NULL,
    run_id VARCHAR,
    cell VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    error VARCHAR,
    note VARCHAR
);
"""


@dataclass
class CellRow:
    """One cell's outcome as stored: ``status`` is ``ok`` (with metrics) or ``error`` (with its text)."""

    session_id: str
    config: str
    config_hash: str
    run_id: str
    cell: str
    status: str
    error: str | None = None
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    note: str | None = None


@dataclass
class RunInfo:
    run_id: str
    started_at: datetime
    hermeslab_version: str
    host: str
    python: str
    cell: str
    executor: str
    workers: int
    #: ``[{"name", "hash", "yaml"}]``
    configs: list[dict[str, str]]
    sessions: int
    cells: int
    problems: list[dict[str, Any]]


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def column_values(raw: list[Any]) -> tuple[list[Any], str]:
    """One metric's values as stored (``_plain``) and their SQL type (``sql_type``).

    A column of plain ints, or of ints and floats with one that is a number,
    is stored as it is (a run's columns nearly all are): the check is one
    pass over the value types instead of a call per value.
    """
    kinds = set(map(type, raw))
    if kinds <= _INT_KINDS:
        return raw, "BIGINT"
    if kinds <= _NUMBER_KINDS and any(value == value for value in raw if type(value) is float):
        return raw, "DOUBLE"  # a NaN among them is stored as NULL, as _plain would make it
    values = [_plain(value) for value in raw]
    return values, sql_type(values)


_INT_KINDS = frozenset({int, type(None)})
_NUMBER_KINDS = frozenset({int, float, type(None)})


def sql_type(values: Sequence[Any]) -> str:
    """VARCHAR for unit names, BIGINT when every present value is a whole number type, else DOUBLE."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, str) for v in present):
        return "VARCHAR"
    if all(type(v) is int or isinstance(v, numbers.Integral) for v in present):
        return "BIGINT"
    return "DOUBLE"


class ResultsFile:
    """An open results database (``path`` None: in memory, for runs that keep nothing)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        try:
            # One thread: the tables hold a row per cell, where DuckDB's workers cost more than they give.
            self.con = duckdb.connect(str(self.path) if self.path is not None else ":memory:", config={"threads": 1})
        except duckdb.Error as exc:
            raise ValueError(f"could not open the results file {self.path}: {exc}") from None
        self._check_foreign_tables()
        self.con.execute(_SCHEMA)
        missing = [c for c in ROW_COLUMNS if c not in self._read_columns() and c not in LATER_ROW_COLUMNS]
        if missing:
            raise ValueError(f"{self.path}: its results table lacks {missing}; it is not an A/B results file")
        for name, kind in {**LATER_ROW_COLUMNS, **STANDARD_METRICS}.items():  # files written before a column existed
            self.con.execute(f"ALTER TABLE results ADD COLUMN IF NOT EXISTS {_quote(name)} {kind}")
        self._columns = self._read_columns()
        self._buffer: list[CellRow] = []
        self._flushed_at = time.monotonic()

    def _check_foreign_tables(self) -> None:
        names = {row[0] for row in self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        foreign = sorted(names - set(TABLES))
        if foreign:
            self.con.close()
            raise ValueError(f"{self.path} holds other tables ({', '.join(foreign)}), so it is not an A/B results "
                             "file (a lab database?); give the A/B results a file of their own")

    def _read_columns(self) -> dict[str, str]:
        rows = self.con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_schema = 'main' AND table_name = 'results' "
                                "ORDER BY ordinal_position").fetchall()
        return {name: kind for name, kind in rows}

    @property
    def metric_columns(self) -> list[str]:
        return [c for c in self._columns if c not in ROW_COLUMNS]

    # ------------------------------------------------------------ runs

    def start_run(self, run: RunInfo) -> None:
        self.con.execute(
            "INSERT INTO runs (run_id, started_at, status, hermeslab_version, host, python, cell, executor, workers, "
            "configs, sessions, cells, problems) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run.run_id, run.started_at, run.hermeslab_version, run.host, run.python, run.cell, run.executor,
             run.workers, json.dumps(run.configs), run.sessions, run.cells, json.dumps(run.problems)])

    def finish_run(self, run_id: str, status: str, *, computed: int, reused: int, failed: int) -> None:
        self.flush()
        self.con.execute("UPDATE runs SET finished_at = ?, status = ?, computed = ?, reused = ?, failed = ? "
                         "WHERE run_id = ?", [utcnow(), status, computed, reused, failed, run_id])

    def runs(self) -> pd.DataFrame:
        return self.con.execute("SELECT * FROM runs ORDER BY started_at").df()

    # ------------------------------------------------------------ cells

    def finished(self, keys: pd.DataFrame, cell: str) -> pd.DataFrame:
        """The ``(session_id, config_hash)`` pairs of ``keys`` already stored for ``cell``, with their status."""
        with self._registered("wanted_keys", keys[["session_id", "config_hash"]].drop_duplicates()):
            return self.con.execute(
                "SELECT r.session_id, r.config_hash, r.status FROM results r JOIN wanted_keys w "
                "ON r.session_id = w.session_id AND r.config_hash = w.config_hash WHERE r.cell = ?", [cell]).df()

    def forget(self, keys: pd.DataFrame, cell: str) -> None:
        """Delete the stored rows of these ``(session_id, config_hash)`` pairs (before they are recomputed)."""
        if keys.empty:
            return
        with self._registered("doomed_keys", keys[["session_id", "config_hash"]].drop_duplicates()):
            self.con.execute("DELETE FROM results WHERE cell = ? AND (session_id, config_hash) IN "
                             "(SELECT session_id, config_hash FROM doomed_keys)", [cell])

    def add(self, rows: Sequence[CellRow]) -> None:
        """Queue rows; ``flush`` writes them."""
        self._buffer.extend(rows)

    def due(self, seconds: float) -> bool:
        """True when the last flush is at least ``seconds`` ago."""
        return time.monotonic() - self._flushed_at >= seconds

    def flush(self) -> None:
        """Write the queued rows in one transaction, adding or widening metric columns first."""
        self._flushed_at = time.monotonic()
        if not self._buffer:
            return
        rows, self._buffer = self._buffer, []
        metrics = [row.metrics for row in rows]
        names = list(dict.fromkeys(name for row_metrics in metrics for name in row_metrics))
        batch: dict[str, Any] = {c: [getattr(row, c) for row in rows] for c in ROW_COLUMNS}
        self.con.execute("BEGIN TRANSACTION")
        try:
            for name in names:
                values, declared = column_values([row_metrics.get(name) for row_metrics in metrics])
                kind = self._ensure_column(name, declared)
                if kind == "VARCHAR":
                    batch[name] = pd.array(values, dtype="string")
                elif kind == "BIGINT":
                    batch[name] = pd.array(values, dtype="Int64")
                else:
                    batch[name] = np.array(values, dtype=float)  # None becomes NaN, stored as NULL
            with self._registered("cell_batch", pd.DataFrame(batch)):
                self.con.execute("INSERT INTO results BY NAME SELECT * FROM cell_batch")
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            self._columns = self._read_columns()
            raise

    def _ensure_column(self, name: str, kind: str) -> str:
        existing = self._columns.get(name)
        if name in ROW_COLUMNS:
            raise ValueError(f"a cell returned the metric {name!r}, which is the name of a key column")
        if existing is None:
            self.con.execute(f"ALTER TABLE results ADD COLUMN {_quote(name)} {kind}")
            self._columns[name] = kind
        elif (existing == "VARCHAR") != (kind == "VARCHAR"):
            raise ValueError(f"the metric {name!r} holds {existing} values in this file and {kind} values now")
        elif existing == "BIGINT" and kind == "DOUBLE":
            self.con.execute(f"ALTER TABLE results ALTER COLUMN {_quote(name)} TYPE DOUBLE")
            self._columns[name] = "DOUBLE"
        return self._columns[name]

    def rows(self, wanted: pd.DataFrame, cell: str) -> pd.DataFrame:
        """Stored rows for ``wanted`` (``position``, ``session_id``, ``config``, ``config_hash``), in position order.

        The config name comes from ``wanted``, so a cell reused from a run that
        named the same config differently is reported under today's name.
        Metric columns that are empty for every returned row are left out, except
        the standard ones (``STANDARD_METRICS``).
        """
        self.flush()
        metrics = ", ".join(f"r.{_quote(c)}" for c in self.metric_columns)
        with self._registered("wanted_cells", wanted[["position", "session_id", "config", "config_hash"]]):
            frame = self.con.execute(
                "SELECT w.session_id, w.config, w.config_hash, r.run_id, r.cell, r.status, r.error, r.note"
                f"{', ' + metrics if metrics else ''} FROM wanted_cells w JOIN results r "
                "ON r.session_id = w.session_id AND r.config_hash = w.config_hash AND r.cell = ? "
                "ORDER BY w.position", [cell]).df()
        empty = [c for c in self.metric_columns if c not in STANDARD_METRICS and frame[c].isna().all()]
        return frame.drop(columns=empty)

    @contextmanager
    def _registered(self, name: str, frame: pd.DataFrame) -> Iterator[None]:
        self.con.register(name, frame)
        try:
            yield
        finally:
            self.con.unregister(name)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str | Path) -> pd.DataFrame:
    """Every stored cell row of a results file, as a frame (``runs`` via ``ResultsFile(path).runs()``)."""
    with ResultsFile(path) as store:
        return store.con.execute("SELECT * FROM results ORDER BY run_id, config, session_id").df()


def config_records(configs: Mapping[str, Any]) -> list[dict[str, str]]:
    """``[{"name", "hash", "yaml"}]`` for the ``runs`` table from a name → Config mapping."""
    import yaml

    return [{"name": name, "hash": config.digest(), "yaml": yaml.safe_dump(_without_secrets(config.to_dict()),
                                                                           sort_keys=False)}
            for name, config in configs.items()]


def _without_secrets(data: dict[str, Any]) -> dict[str, Any]:
    data["model"].pop("api_key", None)
    for entry in data.get("recovery", {}).get("fallback_providers", []):
        entry.pop("api_key", None)
    return data


def _plain(value: Any) -> float | int | str | None:
    kind = type(value)  # plain ints and floats first: a run stores one per metric and cell
    if kind is int:
        return value
    if kind is float:
        return None if math.isnan(value) else value
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return None if value is None else int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return None if math.isnan(value) else float(value)
    raise TypeError(f"metric values must be numbers, unit names or None, got {type(value).__name__}")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
