"""Recall against tokens retained: each config's frontier, and configs compared at the same budget.

A compaction keeps some tokens (``retained_tokens``, the exact size of the
compacted context) and its probes score something. A config that keeps more
answers more, so comparing two configs' scores at different budgets says
little about which keeps better. Two views correct for that:

* the **frontier**: per config and window, the mean retained tokens per
  compaction against the mean score of its probes (with a session-bootstrap
  interval), and whether any other point keeps no more tokens and scores at
  least as high (``dominated``);
* the **matched budget**: every compaction of every config is placed in one
  of ``bins`` budget ranges cut at the quantiles of all configs' retained
  tokens pooled, so each range holds about as many compactions; within a
  range the configs are compared at about the same budget (each row shows
  the config's own mean retained tokens there, so what is left of the
  mismatch is visible). A range where a config has fewer than ``min_probes``
  scored probes gets NaN and says so instead of a score from a handful.

Only the compacted arm is read; scores are points / 2 as in the frame.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .paired import cluster_bootstrap_ci
from .scores import check_frame

FRONTIER_COLUMNS = ("compactions", "retained_tokens", "n_probes", "score", "ci_low", "ci_high", "dominated")
BUDGET_COLUMNS = ("budget_low", "budget_high", "compactions", "retained_tokens", "n_probes", "score", "ci_low",
                  "ci_high", "note")


def _compacted(frame: pd.DataFrame) -> pd.DataFrame:
    check_frame(frame)
    units = sorted(set(frame["token_unit"].dropna().unique()))
    if len(units) > 1:
        raise ValueError(f"retained tokens are counted in more than one unit ({units}); exam every config in one")
    return frame[frame["arm"] == "compacted"]


def _point(rows: pd.DataFrame, *, confidence: float, n_resamples: int, seed: int) -> dict[str, object]:
    """Compactions, their mean retained tokens, and the mean score of their scored probes with its interval."""
    compactions = rows.drop_duplicates(["recording_id", "window", "compaction"])
    scored = rows[rows["score"].notna()]
    score, low, high, _ = cluster_bootstrap_ci(scored["score"].to_numpy(), scored["recording_id"].to_numpy(),
                                               confidence=confidence, n_resamples=n_resamples, seed=seed)
    return {"compactions": len(compactions), "retained_tokens": float(compactions["retained_tokens"].mean()),
            "n_probes": len(scored), "score": score, "ci_low": low, "ci_high": high}


def frontier(frame: pd.DataFrame, *, confidence: float = 0.95, n_resamples: int = 2_000,
             seed: int = 0) -> pd.DataFrame:
    """One row per (config, window): mean retained tokens per compaction, mean score, its interval, and
    ``dominated`` (another point keeps no more tokens and scores at least as high, one of them strictly)."""
    rows = _compacted(frame)
    points = {key: _point(part, confidence=confidence, n_resamples=n_resamples, seed=seed)
              for key, part in rows.groupby(["config", "window"], sort=False)}
    table = pd.DataFrame.from_dict(points, orient="index", columns=list(FRONTIER_COLUMNS))
    table.index = pd.MultiIndex.from_tuples(list(points), names=["config", "window"]) if points else \
        pd.MultiIndex.from_tuples([], names=["config", "window"])
    tokens, score = table["retained_tokens"].to_numpy(), table["score"].to_numpy()
    table["dominated"] = [bool(np.any((tokens <= t) & (score >= s) & ((tokens < t) | (score > s))))
                          if not math.isnan(s) else False for t, s in zip(tokens, score)]
    table.attrs["token_unit"] = _unit(rows)
    return table


def budget_edges(frame: pd.DataFrame, bins: int = 4) -> np.ndarray:
    """Edges of ``bins`` retained-token ranges at the quantiles of every config's compactions pooled."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    rows = _compacted(frame)
    retained = rows.drop_duplicates(["recording_id", "config", "window", "compaction"])["retained_tokens"].dropna()
    if retained.empty:
        raise ValueError("no compaction in the exam frame has a retained-token count")
    edges = np.unique(np.quantile(retained.to_numpy(dtype="float64"), np.linspace(0, 1, bins + 1)))
    return edges if len(edges) > 1 else np.repeat(edges, 2)  # every compaction kept the same: one range


def matched_budget(frame: pd.DataFrame, *, bins: int = 4, min_probes: int = 20, confidence: float = 0.95,
                   n_resamples: int = 2_000, seed: int = 0) -> pd.DataFrame:
    """Per budget range and config: the mean score of the probes of compactions that kept that many tokens
    (see the module docstring). Indexed by (``budget``, ``config``); ``budget`` is the range's number."""
    edges = budget_edges(frame, bins)
    rows = _compacted(frame)
    ranges = len(edges) - 1
    place = np.searchsorted(edges, rows["retained_tokens"].to_numpy(dtype="float64"), side="right") - 1
    placed = rows.assign(budget=np.clip(place, 0, ranges - 1))
    table = {}
    for budget in range(ranges):
        for config in rows["config"].dropna().unique():
            part = placed[(placed["budget"] == budget) & (placed["config"] == config)]
            point = _point(part, confidence=confidence, n_resamples=n_resamples, seed=seed)
            note = None
            if point["n_probes"] < min_probes:
                note = f"{point['n_probes']} scored probe(s) in this range, fewer than {min_probes}"
                point.update(score=math.nan, ci_low=math.nan, ci_high=math.nan)
            table[(budget, config)] = {"budget_low": float(edges[budget]), "budget_high": float(edges[budget + 1]),
                                       **point, "note": note}
    result = pd.DataFrame.from_dict(table, orient="index", columns=list(BUDGET_COLUMNS))
    result.index = pd.MultiIndex.from_tuples(list(table), names=["budget", "config"])
    result.attrs.update(token_unit=_unit(rows), how=f"{ranges} range(s) of retained tokens cut at the quantiles of "
                        "every config's compactions pooled")
    return result


def _unit(rows: pd.DataFrame) -> str | None:
    units = rows["token_unit"].dropna().unique()
    return str(units[0]) if len(units) else None
