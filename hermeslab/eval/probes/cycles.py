"""Repeated compaction within one session: what each cycle frees, what it keeps verbatim, and when it stops helping.

A long session is compacted again and again. Each cycle keeps some messages
as they were (the protected head, the recent tail, messages a policy pins)
and replaces the rest; what it keeps verbatim tends to grow from cycle to
cycle, so each cycle frees less, until a compaction leaves the prompt at or
above the config's threshold and the next call asks for another one. These
figures come from a replay's compressions, not from an exam: one row per
compaction that changed the context, in order.

* ``freed_tokens``: the context's tokens before the compaction minus after
  (messages only, in the replay's billing unit ``token_unit``);
* ``verbatim_tokens``: tokens of the non-system messages the compaction kept
  unchanged (handoff summaries are not verbatim), and ``verbatim_growth`` its
  change since the session's previous cycle;
* ``prompt_after``: the prompt of the next answered call in the unit the
  config's threshold is measured in (``decision_unit``), and
  ``over_threshold`` when it is at or above ``threshold_tokens``. A
  compaction not followed by an answered call before another compaction (or
  at all) has no such prompt: NaN, and ``over_threshold`` is NA.

A session is *stuck* (``stuck_sessions``) when its last compaction with a
prompt after it left that prompt at or above the threshold: compaction could
no longer get it under.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from hermeslab.context.types import is_summary_message
from hermeslab.core.config import Config
from hermeslab.policies.running import budgets_of

from ..metrics import message_text
from ..replay import ReplayRun

CYCLE_COLUMNS = ("recording_id", "config", "cycle", "call", "trigger", "strategy", "tokens_before", "tokens_after",
                 "freed_tokens", "verbatim_tokens", "verbatim_growth", "prompt_after", "threshold_tokens",
                 "over_threshold", "token_unit", "decision_unit")


def _verbatim(before: list[dict], after: list[dict]) -> list[dict]:
    """Non-system, non-summary messages of ``after`` that are in ``before`` unchanged."""
    same = {id(message) for message in before}
    texts = {message_text(message) for message in before if message.get("role") != "system"}
    return [message for message in after
            if message.get("role") != "system" and not is_summary_message(message)
            and (id(message) in same or message_text(message) in texts)]


def run_cycles(run: ReplayRun, config: Config, label: str | None = None) -> pd.DataFrame:
    """One row per compaction of ``run`` that changed the context (``CYCLE_COLUMNS``; see the module docstring).

    ``config`` is the config the run replayed (its threshold); ``label`` names
    it in the ``config`` column (default: its preset).
    """
    if not isinstance(run, ReplayRun):
        raise TypeError(f"run_cycles() needs a ReplayRun, got {type(run).__name__}")
    if not isinstance(config, Config):
        raise TypeError(f"config must be a hermeslab Config, got {type(config).__name__}")
    threshold = budgets_of(config.compression, run.context_length, config.model.max_tokens).threshold_tokens
    count = run.counter.count_messages
    changed = [record for record in run.compressions if record.changed]
    last_at_call = {record.call: number for number, record in enumerate(changed)}
    rows, previous = [], None
    for number, record in enumerate(changed):
        before, after = count(record.before), count(record.after)
        verbatim = count(_verbatim(record.before, record.after))
        decided = None
        if last_at_call[record.call] == number and record.call < len(run.calls):
            decided = run.calls[record.call].decision_tokens
        rows.append({"recording_id": run.recording_id, "config": label or config.compression.preset,
                     "cycle": number + 1, "call": record.call, "trigger": record.trigger,
                     "strategy": record.strategy, "tokens_before": before, "tokens_after": after,
                     "freed_tokens": before - after, "verbatim_tokens": verbatim,
                     "verbatim_growth": None if previous is None else verbatim - previous,
                     "prompt_after": decided, "threshold_tokens": threshold,
                     "over_threshold": None if decided is None else decided >= threshold,
                     "token_unit": run.counter.encoding, "decision_unit": run.decision_unit})
        previous = verbatim
    table = pd.DataFrame(rows, columns=list(CYCLE_COLUMNS))
    return table.astype({"verbatim_growth": "Int64", "prompt_after": "Int64", "over_threshold": "boolean"})


def cycles(runs: Iterable[tuple[ReplayRun, Config, str]]) -> pd.DataFrame:
    """``run_cycles`` of every ``(run, config, label)``, one frame."""
    frames = [run_cycles(run, config, label) for run, config, label in runs]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(CYCLE_COLUMNS))


def stuck_sessions(table: pd.DataFrame) -> pd.DataFrame:
    """Per (config, session): cycles, tokens freed by the first and the last cycle, the verbatim part's growth
    from first to last, and ``stuck`` (its last compaction with a measured prompt left it at or over the
    threshold)."""
    missing = [column for column in CYCLE_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"not a cycles table: it lacks {missing}; pass what cycles() returns")
    rows = {}
    for (config, recording), part in table.groupby(["config", "recording_id"], sort=False):
        measured = part[part["over_threshold"].notna()]
        rows[(config, recording)] = {
            "cycles": len(part), "first_freed": int(part["freed_tokens"].iloc[0]),
            "last_freed": int(part["freed_tokens"].iloc[-1]),
            "verbatim_growth": int(part["verbatim_tokens"].iloc[-1] - part["verbatim_tokens"].iloc[0]),
            "stuck": bool(measured["over_threshold"].iloc[-1]) if len(measured) else pd.NA}
    result = pd.DataFrame.from_dict(rows, orient="index")
    if rows:
        result.index = pd.MultiIndex.from_tuples(list(rows), names=["config", "recording_id"])
    return result
