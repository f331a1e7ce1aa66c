"""A replay's metrics row, checked for what would make it measure something other than it claims.

Two failures leave a row that looks like any other:

* **summaries the configured summariser did not write.** The LLM summariser
  answers a failed call with its fallback, the extractive summariser, and a
  route that failed rests for a minute or more; with its endpoint down, a
  config that asks for the LLM summariser is measured with the extractive
  one under its own name, and a comparison mixes two summarisers without
  saying so. Such a run raises ``SummaryFallbackError`` (its cell fails)
  unless the caller keeps it (``allow_summary_fallback``); a kept row carries
  a note, and ``summary_fallbacks`` / ``summary_failures`` count the
  summaries concerned either way.
* **a recall exam that scored nothing.** When every question list, answer or
  judgement failed or could not be read, ``exam_score`` is NaN for a reason
  other than there being nothing to examine; the row is kept with a note.

``NotedRow`` is how a cell hands a note to ``eval.ab.run_ab``, which stores it
in the results' ``note`` column beside ``status = 'ok'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hermeslab.core.config import Config

from .metrics import measure
from .replay import ReplayRun

#: How the command line spells the choice to keep runs whose summaries fell back.
ALLOW_OPTION = "--allow-summary-fallback"


class SummaryFallbackError(RuntimeError):
    """A run whose summaries were not all written by the summariser it was configured with."""


class NotedRow(dict):
    """A cell's metrics and a note on what they must be read with (None: nothing)."""

    def __init__(self, metrics: Mapping[str, Any], note: str | None = None):
        super().__init__(metrics)
        self.note = note


def summary_problem(run: ReplayRun) -> str | None:
    """A sentence on the summaries of ``run`` its summariser did not write (with the first error), else None."""
    fell = sum(1 for s in run.summaries if s.fallback_used)
    lost = sum(1 for s in run.summaries if s.error is not None and not s.fallback_used)
    if not fell and not lost:
        return None
    total = len(run.summaries)
    how = [f"{fell} written by the fallback summariser"] if fell else []
    how += [f"{lost} not written at all"] if lost else []
    reached = "never reached" if fell + lost == total else f"not reached for {fell + lost} of {total} summaries"
    error = next((s.error for s in run.summaries if s.error), None) or "no error was given"
    return f"the configured summariser was {reached} ({', '.join(how)}); first error: {error}"


def checked_row(run: ReplayRun, config: Config, *, exam: Any = None,
                allow_summary_fallback: bool = False) -> NotedRow:
    """``measure(run)``, with the recall exam when ``exam`` (``ExamSettings``) is given, checked as above.

    Raises ``SummaryFallbackError`` for a run whose summariser fell back,
    before any exam is paid for, unless ``allow_summary_fallback``.
    """
    problem = summary_problem(run)
    if problem is not None and not allow_summary_fallback:
        raise SummaryFallbackError(f"{problem}. The run would compare another summariser under this config's "
                                   f"name; keep such runs, flagged, with {ALLOW_OPTION} "
                                   "(allow_summary_fallback=True)")
    notes = [] if problem is None else [problem]
    row = measure(run)
    if exam is not None:
        from .exam import exam_at_endpoint

        report = exam_at_endpoint(run, config, exam)
        row.update(report.metrics)
        if report.problem is not None:
            notes.append(report.problem)
    return NotedRow(row, "; ".join(notes) or None)
