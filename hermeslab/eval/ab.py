"""A/B runs: every config over every recorded session, resumable and reproducible.

A *cell* is one (session, config) pair. A cell function turns it into one flat
row of numbers; the default replays the recording through the agent loop
under the config and measures the run. ``run_ab`` plans the cells, skips the
ones a results file already holds (same session id, config hash and cell
function), sends the rest to an executor in chunks, stores each outcome as it
arrives, and returns the rows in a fixed order — configs in the order given,
sessions in input order — so a rerun, a resumed run and a run on another
executor give the same frame. A cell that raises becomes a row with status
``error`` and the error text; the run goes on. A cell may also keep its row
with a note on how to read it (a mapping with a ``note`` string attribute,
``eval.checked.NotedRow``), stored in the row's ``note`` column.

Two guards keep a comparison honest. Every row carries ``failed_turns`` (turns
that ended without an answer), which ``stats.paired_compare`` counts and can
exclude, since a config that gave up looks cheaper. And configs that differ
only in budget settings that the floors (``min_threshold_tokens``,
``summary_min_tokens``) override at their window are named in a warning
before anything runs: such a sweep is flat by construction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import inspect
import itertools
import json
import numbers
import platform
import secrets
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hermeslab import __version__
from hermeslab.context.hermes_texts import texts_in_use
from hermeslab.core.config import CompressionConfig, Config
from hermeslab.policies.loading import load_config, preset_values
from hermeslab.policies.running import budgets_of, resolution_of, threshold_sentence
from hermeslab.recordings import Recording, RecordingProblem, validate_recording

from .executors import CHUNKS_PER_WORKER, ChunkDone, endpoint_slots, make_executor, plan_chunks
from .recording import read_recordings
from .results import ROW_COLUMNS, CellRow, ResultsFile, RunInfo, config_records, utcnow

Cell = Callable[[Recording, Config], Mapping[str, float | int]]
ConfigSpec = Config | str | Path
#: Seconds between writes of finished cells to the results file (a run kept in memory writes them once, at the end).
FLUSH_SECONDS = 1.0
#: Compression settings that act only through the trigger threshold and the summary budget derived for a window.
BUDGET_SETTINGS = ("threshold", "small_window_limit", "small_window_threshold", "min_threshold_tokens",
                   "min_trigger_ratio", "max_trigger_ratio", "summary_ratio", "summary_min_tokens",
                   "summary_max_tokens", "summary_context_share")


# ---------------------------------------------------------------- cells


@dataclass(frozen=True)
class ReplayCell:
    """The default cell: replay the recording through the agent loop under the config, then measure it.

    ``summariser`` None takes the one the config names; pass e.g.
    ``FixedSummariser()`` to time the loop and compression without a model.
    ``exam`` (``eval.exam.ExamSettings``) adds the recall exam, asked of the
    endpoint the config names (a config without one is a ValueError).
    ``counter`` is the unit every config is billed in (``replay(counter=...)``;
    None: exact counts in the recorded model's encoding). A run whose
    summariser fell back fails (``eval.checked.SummaryFallbackError``) unless
    ``allow_summary_fallback``, which keeps its row with a note; an exam that
    scored no question always keeps the row, with a note.
    """

    summariser: Any = None
    exam: Any = None
    counter: str | None = None
    allow_summary_fallback: bool = False

    def __post_init__(self) -> None:
        # Load the agent stack here, in the process that plans the run: forked workers then inherit it
        # instead of each importing it again (a second or more per worker).
        from . import metrics, replay  # noqa: F401
        from .exam import ExamSettings

        if self.exam is not None and not isinstance(self.exam, ExamSettings):
            raise TypeError(f"exam must be an ExamSettings or None, got {type(self.exam).__name__}")
        if not isinstance(self.allow_summary_fallback, bool):
            raise TypeError(f"allow_summary_fallback must be True or False, got {self.allow_summary_fallback!r}")

    def __call__(self, recording: Recording, config: Config) -> dict[str, float | int]:
        from .checked import checked_row

        if self.exam is not None:
            from .exam import answering, require_endpoint

            require_endpoint(answering(config, self.exam))
        run = self.replay(recording, config)
        return checked_row(run, config, exam=self.exam, allow_summary_fallback=self.allow_summary_fallback)

    def replay(self, recording: Recording, config: Config) -> Any:
        """The replay this cell measures: the fast one, the same loop and decisions (tests/test_one_engine.py)
        without the events no row reads."""
        from .replay import replay

        return replay(recording, config, summariser=self.summariser, counter=self.counter, fast=True)

    @property
    def identity(self) -> str:
        """Kept and failed fallbacks are named apart, so a resumed run never reuses a row the other policy made."""
        source = "config" if self.summariser is None else describe(self.summariser)
        exam = "" if self.exam is None else f", exam={self.exam.identity}"
        counter = "" if self.counter is None else f", counter={self.counter}"
        kept = ", summary_fallback=kept" if self.allow_summary_fallback else ""
        return f"hermeslab.eval.ab.ReplayCell(summariser={source}{exam}{counter}{kept})"


def cell_replay(recordings: Any, config: ConfigSpec, session_id: str, *, cell: ReplayCell | None = None) -> Any:
    """The replay behind one row of ``run_ab``: session ``session_id`` of ``recordings`` under ``config``, as
    ``cell`` (default ``ReplayCell()``) ran it, so its compactions can be looked at one by one
    (``hermeslab.notebook.timeline.show_timeline``). ValueError, in one line, for a session none of them holds."""
    found, _ = gather_recordings(recordings)
    for recording in found:
        if recording.id == session_id:
            return (cell if cell is not None else ReplayCell()).replay(recording, load_config(config))
    sample = ", ".join(recording.id for recording in found[:3])
    raise ValueError(f"no session {session_id!r} in these recordings ({len(found)} sessions, e.g. {sample})")


def describe(obj: Any) -> str:
    """A stable text naming an object by its class and its attributes (hashed when long).

    Raises ValueError for an object whose attributes are not plain data,
    since its text would change from one process to the next.
    """
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    try:
        state = json.dumps(vars(obj), sort_keys=True)
    except (TypeError, ValueError):
        raise ValueError(f"cannot name a {name} stably: its attributes are not plain data; give it an "
                         "'identity' string attribute") from None
    if len(state) > 120:
        state = "sha256:" + hashlib.sha256(state.encode()).hexdigest()[:16]
    return f"{name}({state})"


def cell_identity(cell: Callable[..., Any]) -> str:
    """What identifies a cell function across runs and processes (stored with each result).

    An ``identity`` string attribute wins; otherwise a function is named by
    module and qualified name, a ``functools.partial`` by its function and
    arguments, and any other callable by its class and attributes.
    """
    identity = getattr(cell, "identity", None)
    if isinstance(identity, str) and identity:
        return identity
    if isinstance(cell, functools.partial):
        arguments = json.dumps({"args": list(cell.args), "kwargs": cell.keywords}, sort_keys=True, default=describe)
        return f"{cell_identity(cell.func)}{arguments}"
    if inspect.isfunction(cell) or inspect.isbuiltin(cell):
        if "<lambda>" in cell.__qualname__ or "<locals>" in cell.__qualname__:
            raise ValueError(f"the cell function {cell.__qualname__} has no stable name; define it at the top "
                             "level of a module")
        return f"{cell.__module__}.{cell.__qualname__}"
    if not callable(cell):
        raise TypeError(f"cell must be callable as cell(recording, config), got {type(cell).__name__}")
    return describe(cell)


@dataclass(frozen=True)
class CellOutcome:
    session_id: str
    config_hash: str
    metrics: dict[str, float | int | None] | None = None
    error: str | None = None
    #: What a kept row must be read with (the row's ``note`` attribute).
    note: str | None = None


def run_cell(cell: Cell, recording: Recording, config: Config, config_hash: str) -> CellOutcome:
    """One cell; what it raises, or a row that is not flat numbers, becomes an error outcome."""
    try:
        with _collector_paused():
            row = cell(recording, config)
        metrics = flat_metrics(row)
        note = row_note(row)
    except Exception as exc:
        return CellOutcome(recording.id, config_hash, error=error_text(exc))
    return CellOutcome(recording.id, config_hash, metrics, note=note)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a cell runs, and one pass over the young objects after it.

    A replay keeps every prompt it sent (a list per call) until it is measured,
    and the collector's passes walked those lists again and again while they
    grew: 15-20% of a replay sweep's CPU. A cell's own cyclic garbage is small
    (its agent's object graph) and all of it is young, so the pass after the
    cell frees it; the collector is left as found when the caller had it off.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def row_note(row: Any) -> str | None:
    """The ``note`` attribute of a cell's row: None, or a non-empty string (anything else is a TypeError)."""
    note = getattr(row, "note", None)
    if note is not None and (not isinstance(note, str) or not note.strip()):
        raise TypeError(f"a row's note must be a non-empty string or None, got {note!r:.60}")
    return note


def flat_metrics(row: Any) -> dict[str, float | int | str | None]:
    """A cell's row as plain Python numbers (and unit names, in ``*_unit`` columns); errors name the entry."""
    if not isinstance(row, Mapping):
        raise TypeError(f"the cell returned a {type(row).__name__}, not a mapping of metric names to numbers")
    metrics: dict[str, float | int | None] = {}
    for name, value in row.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"metric names must be non-empty strings, got {name!r}")
        if name in ROW_COLUMNS:
            raise ValueError(f"the metric name {name!r} is reserved for the results' key columns")
        kind = type(value)  # plain ints and floats first: a row holds dozens of them
        if kind is int or kind is float:
            metrics[name] = value
        elif value is None:
            metrics[name] = None
        elif isinstance(value, (bool, numbers.Integral)):
            metrics[name] = int(value)
        elif isinstance(value, numbers.Real):
            metrics[name] = float(value)
        elif isinstance(value, str) and name.endswith("_unit"):
            metrics[name] = value
        else:
            raise TypeError(f"metric {name!r} is a {type(value).__name__} ({value!r:.60}), not a number")
    return metrics


def error_text(exc: BaseException) -> str:
    """``Type: message`` and where it was raised (the innermost frame)."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        text += f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
    return text


# ---------------------------------------------------------------- chunks of work


@dataclass(frozen=True)
class Shared:
    """What every worker needs once: the cell function and the configs by hash."""

    cell: Cell
    configs: Mapping[str, Config]


@dataclass(frozen=True)
class Chunk:
    """Recordings and, for each, the config hashes still to run on it."""

    recordings: tuple[Recording, ...]
    hashes: tuple[tuple[str, ...], ...]

    @property
    def cells(self) -> list[tuple[str, str]]:
        return [(r.id, h) for r, hashes in zip(self.recordings, self.hashes) for h in hashes]


def run_chunk(shared: Shared, chunk: Chunk) -> list[CellOutcome]:
    """Every cell of one chunk (runs inside a worker).

    Config by config, so consecutive cells share a config and whatever a cell
    function derives from one (a hash, a compiled policy) can be reused.
    """
    return [run_cell(shared.cell, recording, shared.configs[config_hash], config_hash)
            for config_hash in shared.configs
            for recording, hashes in zip(chunk.recordings, chunk.hashes) if config_hash in hashes]


def recording_weight(recording: Recording) -> int:
    """A cheap stand-in for a replay's cost: the characters of the recorded messages."""
    return sum(len(m["content"]) for m in recording.messages if isinstance(m.get("content"), str)) + 1


# ---------------------------------------------------------------- configs


def config_label(spec: ConfigSpec) -> str:
    """The name a config gets when none is given: a file's stem, or the text itself."""
    if isinstance(spec, Path):
        return spec.stem
    if isinstance(spec, str) and "," not in spec and spec.endswith((".yaml", ".yml")):
        return Path(spec).stem
    if isinstance(spec, Config):
        return spec.digest()
    return str(spec)


# ---------------------------------------------------------------- sweeps the floors make flat


class FlatSweepWarning(UserWarning):
    """Configs of one run that cannot differ in effect (a ``UserWarning``, so default filters show it)."""


def budget_effect(config: Config) -> dict[str, int | float]:
    """What the budget settings of ``config`` come to at its window: the numbers compression acts on.

    ``threshold_tokens`` is where automatic compression fires. The summary
    budget is ``summary_ratio`` of the summarised tokens within
    [``summary_min_tokens``, ``summary_cap_tokens``]; when the minimum is not
    below the cap every summary gets the minimum, and only that is reported.
    """
    cfg = config.compression
    budgets = resolution_of(config).budgets
    effect: dict[str, int | float] = {"threshold_tokens": budgets.threshold_tokens}
    if cfg.summary_min_tokens >= budgets.max_summary_tokens:
        effect["summary_tokens"] = cfg.summary_min_tokens
    else:
        effect.update(summary_ratio=cfg.summary_ratio, summary_min_tokens=cfg.summary_min_tokens,
                      summary_cap_tokens=budgets.max_summary_tokens)
    return effect


def equivalent_configs(configs: Mapping[str, Config]) -> list[str]:
    """One sentence per group of configs that differ only in ``BUDGET_SETTINGS`` with the same ``budget_effect``.

    Configs with the same digest are one config (run once) and are not reported.
    A config no budgets can be derived from is left out here: its cells report
    the error, as they do for any cell function.
    """
    neutral = {f"compression.{name}": getattr(CompressionConfig(), name) for name in BUDGET_SETTINGS}
    groups: dict[tuple[str, str], list[str]] = {}
    effects: dict[str, dict[str, int | float]] = {}
    for name, config in configs.items():
        try:
            effects[name] = budget_effect(config)
        except ValueError:
            continue
        key = (config.with_overrides(neutral).digest(), json.dumps(effects[name], sort_keys=True))
        groups.setdefault(key, []).append(name)
    notes = []
    for names in groups.values():
        if len({configs[name].digest() for name in names}) < 2:
            continue
        differing = []
        for setting in BUDGET_SETTINGS:
            values = {name: getattr(configs[name].compression, setting) for name in names}
            if len(set(values.values())) > 1:
                shown = ", ".join(f"{name}: {value}" for name, value in values.items())
                differing.append(f"compression.{setting} ({shown})")
        effect = ", ".join(f"{key}={value:,}" for key, value in effects[names[0]].items())
        reasons = dict.fromkeys(reason for name in names for reason in _why_flat(configs[name]))
        window = configs[names[0]].model.context_length
        notes.append(f"configs {', '.join(repr(n) for n in names)} differ only in {'; '.join(differing)}, but at a "
                     f"window of {window:,} tokens they all come to {effect} ({'; '.join(reasons)}): their "
                     "results will not differ.")
    return notes


def _why_flat(config: Config) -> list[str]:
    """Which rules set the effective values of ``config`` (its resolution's threshold rule, and the summary's
    when the minimum leaves the summary settings nothing to decide)."""
    resolution = resolution_of(config)
    reasons = [resolution.threshold_rule]
    if config.compression.summary_min_tokens >= resolution.budgets.max_summary_tokens:
        reasons.append(resolution.summary_rule)
    return reasons


# ---------------------------------------------------------------- configs that compressed nothing


class NothingCompressedWarning(UserWarning):
    """A config that compressed no session of a run: its rows say nothing about its compression."""


class CompactingEveryCallWarning(UserWarning):
    """A config that compacted before nearly every model call: its window leaves a turn too little room."""


def nothing_compressed(frame: pd.DataFrame, configs: Mapping[str, Config]) -> list[str]:
    """One line per config that compressed no session it finished: the peak prompt, the threshold, a window.

    A run in which a config never compressed measures the recordings, not the
    config, and its comparison prints rows of zeros that look like a verdict.
    The line names the largest prompt (in the billing unit) and where that
    config fires (in its estimator's unit), and suggests a window at which
    compression would fire for at least half of the sessions: the largest
    window, in steps of 1,000 tokens, whose threshold under the config's own
    rules lies below the median session's peak. Frames without the replay's
    ``compressions`` and ``peak_prompt_tokens`` columns get no lines.
    """
    if not {"compressions", "peak_prompt_tokens"} <= set(frame.columns):
        return []
    lines = []
    for name, config in configs.items():
        rows = frame[(frame["config"] == name) & (frame["status"] == "ok")]
        if rows.empty or rows["compressions"].fillna(0).sum() > 0 or not config.compression.enabled:
            continue
        peaks = rows["peak_prompt_tokens"].dropna()
        if peaks.empty:
            continue
        window, max_tokens = config.model.context_length, config.model.max_tokens
        threshold = budgets_of(config.compression, window, max_tokens).threshold_tokens
        unit = _unit(rows, "token_unit")
        decision = _unit(rows, "decision_unit")
        line = (f"{name} compressed none of {len(rows)} session(s): peak prompt {int(peaks.max()):,} tokens{unit}, "
                f"threshold {threshold:,} tokens{decision} at its {window:,}-token window")
        median = int(peaks.median())
        suggested = window_to_compress(config, median)
        if suggested is None:
            line += f"; no smaller window brings its threshold below the median session's peak of {median:,}"
        else:
            below = budgets_of(config.compression, suggested, max_tokens).threshold_tokens
            line += (f"; try model.context_length={suggested} (threshold {below:,}, below the median session's peak "
                     f"of {median:,})")
        lines.append(line)
    return lines


#: Compressions per model call from which a config is said to compact before nearly every call.
THRASH_PER_CALL = 0.5


def compacting_every_call(frame: pd.DataFrame, configs: Mapping[str, Config]) -> list[str]:
    """One line per config that compressed at least ``THRASH_PER_CALL`` times per model call over the run.

    Such a config has less room than a turn needs at its window (an output
    reserve or a trigger that leaves the prompt almost nothing), so its rows
    measure compaction on every call, not its policy: the line says where it
    fires and why (``threshold_sentence``).
    """
    if not {"compressions", "api_calls"} <= set(frame.columns):
        return []
    lines = []
    for name, config in configs.items():
        rows = frame[(frame["config"] == name) & (frame["status"] == "ok")]
        compressions, calls = int(rows["compressions"].fillna(0).sum()), int(rows["api_calls"].fillna(0).sum())
        if calls and compressions >= THRASH_PER_CALL * calls:
            lines.append(f"{name} compressed {compressions:,} times in {calls:,} model calls, so its rows measure "
                         f"compaction on nearly every call: {threshold_sentence(config)}")
    return lines


def window_to_compress(config: Config, peak: int, *, step: int = 1_000) -> int | None:
    """The largest window (a multiple of ``step`` below the config's) whose threshold is under ``peak`` tokens.

    None when no such window exists (a trigger that does not fall with the
    window, or an output cap that leaves no window small enough).
    """
    compression, max_tokens = config.compression, config.model.max_tokens
    for window in range((config.model.context_length - 1) // step * step, 0, -step):
        if max_tokens is not None and window <= max_tokens:
            break
        if budgets_of(compression, window, max_tokens).threshold_tokens < peak:
            return window
    return None


def _unit(rows: pd.DataFrame, column: str) -> str:
    """`` (unit)`` from a unit column of the rows, or nothing when the column is absent or mixed."""
    if column not in rows.columns:
        return ""
    units = rows[column].dropna().unique()
    return f" ({units[0]})" if len(units) == 1 else ""


# ---------------------------------------------------------------- recordings


def gather_recordings(recordings: Any, *, limit: int | None = None) -> tuple[list[Recording], list[RecordingProblem]]:
    """Recordings from objects, parsed dicts, or JSONL paths, and the problems of what was skipped.

    A file contributes its good lines (at most ``limit`` of them) and a
    problem for each bad one, with its path and line. A session id seen
    before is a problem too and its later copy is skipped: the id is what
    pairs a session's results across configs and runs.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    if isinstance(recordings, (str, Path, Mapping, Recording)):
        recordings = [recordings]
    gathered: list[Recording] = []
    problems: list[RecordingProblem] = []
    for item in recordings:
        if isinstance(item, Recording):
            gathered.append(item)
        elif isinstance(item, Mapping):
            found = validate_recording(dict(item))
            problems.extend(found)
            if not found:
                gathered.append(Recording.from_dict(item))
        elif isinstance(item, (str, Path)):
            loaded = read_recordings(item)
            gathered.extend(itertools.islice(loaded, limit))
            problems.extend(loaded.problems)
        else:
            raise TypeError(f"recordings must be Recording objects, dicts or JSONL paths, got {type(item).__name__}")
    seen: set[str] = set()
    unique: list[Recording] = []
    for recording in gathered:
        if recording.id in seen:
            problems.append(RecordingProblem("the session id appears more than once; later copies are skipped",
                                             recording_id=recording.id))
            continue
        seen.add(recording.id)
        unique.append(recording)
    return unique, problems


def no_usable_recording(recordings: Any, problems: list[RecordingProblem]) -> str:
    """Why a run has nothing to replay: the input held no recording, or only lines that were skipped."""
    items = [recordings] if isinstance(recordings, (str, Path, Mapping, Recording)) else list(recordings)
    files = [str(item) for item in items if isinstance(item, (str, Path))]
    given = ", ".join(files) if files else "the recordings given"
    if not problems:
        return f"{given}: no recording to replay (empty, or only blank lines)"
    return (f"{given}: no usable recording, {len(problems)} malformed line(s) or recording(s) skipped; "
            f"the first: {problems[0]}")


# ---------------------------------------------------------------- the run


def run_ab(recordings: Any, configs: Mapping[str, ConfigSpec], *, out: str | Path | None = None,
           executor: Any = "processes", workers: int | None = None, cell: Cell | None = None,
           progress: bool = True, limit: int | None = None) -> pd.DataFrame:
    """Run ``cell`` on every (session, config) and return one row per cell.

    ``recordings``: Recording objects, parsed JSONL dicts, or paths of JSONL
    files (bad lines are skipped and reported). ``configs``: name → Config,
    YAML path, preset name or ``BASE,key=value`` text (see
    ``hermeslab.policies.loading.load_config``). ``out``: a DuckDB results file; cells it already
    holds for this cell function are returned without being run again (failed
    ones are retried). ``executor``: ``processes`` (default), ``serial``,
    ``dask``, a ``dask.distributed.Client`` or an Executor; ``workers`` sizes a
    pool made here. ``cell`` defaults to ``ReplayCell()``. ``limit`` takes
    only the first sessions of each file.

    The frame has ``session_id``, ``config``, ``config_hash``, ``run_id``
    (of the run that computed the row), ``cell``, ``status`` (``ok`` or
    ``error``), ``error``, ``note`` (what an ``ok`` row must be read with,
    such as summaries its summariser's fallback wrote) and one column per
    metric, ``failed_turns`` always among them (empty where the cell function
    does not report it, or for cells reused from a file written before the
    column existed).
    ``frame.attrs`` holds ``run_id``, ``problems`` (``RecordingProblem``s
    of what was skipped: path, line, reason) and ``nothing_compressed``: one
    line per config that compressed no session, with the peak prompt, its
    threshold and a window that would make it compress (``nothing_compressed``),
    each also given as a ``NothingCompressedWarning``, and ``hermes_texts``:
    per config, whose wording it wrote into the context (Hermes's own, read
    from an installed hermes-agent, or hermeslab's), and
    ``deviations_from_preset``: per config, the compression settings it changed
    from the preset it names (``preset_deviations``), such as a summary cap
    lowered for a small local model, so that its rows are not read as the
    preset's.

    Configs that differ only in ``BUDGET_SETTINGS`` and come to the same
    ``budget_effect`` at their window get one ``FlatSweepWarning`` (a
    ``UserWarning``) per run, naming the settings and the effective values.
    A config that compressed at least every other model call gets a line in
    ``frame.attrs["compacting_every_call"]`` with where it fires and why
    (``compacting_every_call``), each also a ``CompactingEveryCallWarning``.
    """
    cell = cell if cell is not None else ReplayCell()
    identity = cell_identity(cell)
    named = _resolve_configs(configs)
    flat = equivalent_configs(named)
    if flat:
        warnings.warn(" ".join(flat) + " To sweep these settings, lower the floors (compression.min_threshold_tokens, "
                      "compression.summary_min_tokens) or use a larger window.", FlatSweepWarning, stacklevel=2)
    chosen = make_executor(executor, workers,
                           slots=endpoint_slots(named.values(), exam=getattr(cell, "exam", None) is not None))
    found, problems = gather_recordings(recordings, limit=limit)
    if not found:
        raise ValueError(no_usable_recording(recordings, problems))
    if problems:
        shown = "\n".join(str(p) for p in problems[:10])
        more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
        warnings.warn(f"skipped recordings, {len(problems)} problem(s):\n{shown}{more}", stacklevel=2)

    hashes = {name: config.digest() for name, config in named.items()}
    wanted = pd.DataFrame([(recording.id, name, hashes[name]) for name in named for recording in found],
                          columns=["session_id", "config", "config_hash"])
    wanted.insert(0, "position", range(len(wanted)))
    name_of: dict[str, str] = {}  # two names for one config run once; the stored row carries the first name
    for name, config_hash in hashes.items():
        name_of.setdefault(config_hash, name)
    store = ResultsFile(out)
    try:
        stored = store.finished(wanted, identity)
        done = set(zip(stored.loc[stored["status"] == "ok", "session_id"],
                       stored.loc[stored["status"] == "ok", "config_hash"]))
        store.forget(stored[stored["status"] != "ok"], identity)
        chunks = plan_work(found, list(name_of), done, chosen.workers * CHUNKS_PER_WORKER)
        run = RunInfo(run_id=new_run_id(), started_at=utcnow(), hermeslab_version=__version__,
                      host=platform.node(), python=sys.version.split()[0], cell=identity, executor=chosen.name,
                      workers=chosen.workers, configs=config_records(named), sessions=len(found),
                      cells=len(wanted), problems=[dataclasses.asdict(p) for p in problems])
        store.start_run(run)
        computed = failed = 0
        status = "interrupted"
        try:
            shared = Shared(cell, {h: named[name] for h, name in name_of.items()})
            for outcome in _execute(chosen, shared, chunks, progress):
                store.add([CellRow(outcome.session_id, name_of[outcome.config_hash], outcome.config_hash,
                                   run.run_id, identity, "error" if outcome.error else "ok", outcome.error,
                                   outcome.metrics or {}, outcome.note)])
                computed += 1
                failed += outcome.error is not None
                if out is not None and store.due(FLUSH_SECONDS):  # in memory, rows are only read at the end
                    store.flush()
            status = "finished"
        finally:
            store.finish_run(run.run_id, status, computed=computed, reused=len(done), failed=failed)
        frame = store.rows(wanted, identity)
    finally:
        store.close()
    quiet = nothing_compressed(frame, named)
    frame.attrs.update(run_id=run.run_id, problems=problems, nothing_compressed=quiet,
                       hermes_texts={name: texts_in_use(config.compression) for name, config in named.items()},
                       deviations_from_preset=preset_deviations(named))
    for line in quiet:
        warnings.warn(line, NothingCompressedWarning, stacklevel=2)
    busy = compacting_every_call(frame, named)
    frame.attrs["compacting_every_call"] = busy
    for line in busy:
        warnings.warn(line, CompactingEveryCallWarning, stacklevel=2)
    return frame


def preset_deviations(configs: Mapping[str, Config]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per config, each compression setting whose value is not its preset's: ``{key: {"preset": ..., "used": ...}}``
    (empty for a config that is its preset)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for name, config in configs.items():
        changed = {}
        for key, preset in preset_values(config.compression.preset).items():
            used = getattr(config.compression, key.split(".", 1)[1])
            if _comparable(used) != _comparable(preset):
                changed[key] = {"preset": preset, "used": used}
        found[name] = changed
    return found


def _comparable(value: Any) -> Any:
    """A value as settings compare: a tuple and a list of the same items are the same setting."""
    return list(value) if isinstance(value, (list, tuple)) else value


def plan_work(recordings: list[Recording], hashes: list[str], done: set[tuple[str, str]],
              target_chunks: int) -> list[Chunk]:
    """Chunks of the cells not yet ``done``; each recording appears in one chunk with all its pending configs."""
    todo = [(recording, tuple(h for h in hashes if (recording.id, h) not in done)) for recording in recordings]
    todo = [(recording, pending) for recording, pending in todo if pending]
    groups = plan_chunks([recording_weight(recording) * len(pending) for recording, pending in todo], target_chunks)
    return [Chunk(tuple(todo[i][0] for i in group), tuple(todo[i][1] for i in group)) for group in groups]


def _resolve_configs(configs: Mapping[str, ConfigSpec]) -> dict[str, Config]:
    if not isinstance(configs, Mapping) or not configs:
        raise ValueError("configs must be a non-empty mapping of names to configs")
    named = {}
    for name, spec in configs.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"config names must be non-empty strings, got {name!r}")
        named[name] = load_config(spec)
    return named


def _execute(chosen: Any, shared: Shared, chunks: list[Chunk], progress: bool) -> Iterable[CellOutcome]:
    """Outcomes of every cell as chunks finish; a chunk whose task failed yields an error for each of its cells."""
    bar = None
    if progress:  # tqdm is imported only when a bar is shown
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(c.cells) for c in chunks), unit="cell", desc="A/B cells")
    try:
        done: ChunkDone
        for done in chosen.run(run_chunk, shared, chunks):
            if done.error is not None:
                outcomes = [CellOutcome(sid, h, error=f"the worker running this cell failed: {done.error}")
                            for sid, h in chunks[done.index].cells]
            else:
                outcomes = done.result
            yield from outcomes
            if bar is not None:
                bar.update(len(outcomes))
    finally:
        if bar is not None:
            bar.close()


def failure_line(frame: pd.DataFrame) -> str | None:
    """Why a run did not finish clean, in one line (None when it did).

    Failed cells are counted by the kind of error (the exception type that
    opens each error text), and the first is quoted whole; lines of the input
    that were skipped are counted.
    """
    failed = frame[frame["status"] != "ok"]
    problems = frame.attrs.get("problems", [])
    parts = []
    if len(failed):
        kinds = Counter(str(error).split(":", 1)[0] for error in failed["error"])
        counted = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
        first = failed.iloc[0]
        parts.append(f"{len(failed)} of {len(frame)} cell(s) failed ({counted}); the first, {first['session_id']} "
                     f"under {first['config']}: {first['error']}")
    if problems:
        parts.append(f"{len(problems)} recording(s) or line(s) skipped")
    return "; ".join(parts) or None


def new_run_id() -> str:
    return f"ab-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
