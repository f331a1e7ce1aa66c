"""Paired comparison of two configs over the same sessions, with bootstrap confidence intervals.

Sessions differ far more from each other than two configs differ on one
session, so every statistic here is computed on the per-session difference
B − A: the session's own difficulty cancels out and small effects become
visible with a few hundred sessions. Only sessions that both configs finished
are paired; a session that failed under either is left out of every metric.

A pair in which either config had a failed turn (``failed_turns`` > 0) is not a
fair one: the side that gave up did less work and looks cheaper. Such pairs
are counted in every comparison (``n_failed_pairs``) and, on request, left out.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from .metrics import UNIT_COLUMNS
from .results import ROW_COLUMNS

COMPARISON_COLUMNS = ("n_pairs", "n_failed_pairs", "mean_a", "mean_b", "mean_diff", "ratio", "ci_low", "ci_high",
                      "b_lower_share", "ci_method")
#: What ``paired_compare`` does with pairs that had a failed turn on either side.
FAILED_PAIRS = ("keep", "exclude")


def metric_columns(results: pd.DataFrame) -> list[str]:
    """The numeric measurement columns of a results frame, in frame order."""
    return [c for c in results.columns
            if c not in ROW_COLUMNS and pd.api.types.is_numeric_dtype(results[c]) and
            not pd.api.types.is_bool_dtype(results[c])]


def unit_column(metric: str) -> str | None:
    """The column naming the unit ``metric`` is counted in (None for a figure without one)."""
    return next((unit for unit, figures in UNIT_COLUMNS.items() if metric in figures), None)


def mixed_unit_metrics(results: pd.DataFrame, a: str, b: str, metrics: Sequence[str]) -> dict[str, tuple]:
    """The ``metrics`` counted in one unit under ``a`` and another under ``b``: metric → (units of a, units of b)."""
    mixed = {}
    for metric in metrics:
        unit = unit_column(metric)
        if unit is None or unit not in results.columns:
            continue
        units = {name: sorted(set(results.loc[results["config"] == name, unit].dropna())) for name in (a, b)}
        if len(set(units[a]) | set(units[b])) > 1:
            mixed[metric] = (units[a], units[b])
    return mixed


def paired_values(results: pd.DataFrame, a: str, b: str, metric: str) -> pd.DataFrame:
    """One row per session both configs finished with a value for ``metric``: columns ``a`` and ``b``."""
    _check_frame(results)
    finished = results[results["status"] == "ok"] if "status" in results.columns else results
    wide = {}
    for side, name in (("a", a), ("b", b)):
        rows = finished[finished["config"] == name]
        duplicated = rows["session_id"][rows["session_id"].duplicated()]
        if not duplicated.empty:
            raise ValueError(f"config {name!r} has more than one row for session {duplicated.iloc[0]!r}")
        wide[side] = rows.set_index("session_id")[metric].astype("float64")
    pairs = pd.concat(wide, axis=1, join="inner").dropna()
    pairs.index.name = "session_id"
    return pairs


def sessions_with_failed_turns(results: pd.DataFrame, configs: Sequence[str]) -> set[str]:
    """Sessions that one of ``configs`` finished with at least one failed turn.

    A frame without a ``failed_turns`` column (a cell function that does not
    report it), or a row where it is empty, counts as no failed turn.
    """
    _check_frame(results)
    if "failed_turns" not in results.columns:
        return set()
    rows = results[results["config"].isin(list(configs))]
    if "status" in rows.columns:
        rows = rows[rows["status"] == "ok"]
    failed = pd.to_numeric(rows["failed_turns"], errors="coerce").astype("float64") > 0
    return set(rows.loc[failed, "session_id"])


def bootstrap_mean_ci(differences: np.ndarray, *, confidence: float, n_resamples: int,
                      seed: int) -> tuple[float, float, str]:
    """A confidence interval for the mean of ``differences``, and the method that produced it.

    BCa corrects the percentile interval for skew, which per-session token
    differences usually have; when it is undefined (all differences equal, or
    too few distinct values for its acceleration estimate) the percentile
    interval is used. A constant sample has the zero-width interval at its value.
    """
    if len(differences) < 2:
        return float("nan"), float("nan"), "none"
    if np.all(differences == differences[0]):
        return float(differences[0]), float(differences[0]), "constant"
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = scipy_stats.bootstrap((differences,), np.mean, n_resamples=n_resamples, vectorized=True,
                                           confidence_level=confidence, method=method,
                                           rng=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return low, high, method.lower()
    return float("nan"), float("nan"), "none"


def paired_compare(results: pd.DataFrame, a: str, b: str, metrics: Sequence[str] | None = None, *,
                   n_resamples: int = 9_999, confidence: float = 0.95, seed: int = 0,
                   failed_pairs: str = "keep") -> pd.DataFrame:
    """Per metric: means under A and B, the mean paired difference B − A with its bootstrap CI, and more.

    ``results`` is a frame as ``run_ab`` returns it (``session_id``, ``config``,
    ``status`` and metric columns). ``metrics`` defaults to every numeric metric
    column. The answer is indexed by metric with the columns ``n_pairs`` (the
    pairs compared), ``n_failed_pairs``, ``mean_a``, ``mean_b``, ``mean_diff``
    (B − A), ``ratio`` (mean B / mean A; NaN when mean A is 0),
    ``ci_low``/``ci_high`` (the ``confidence`` interval of ``mean_diff``),
    ``b_lower_share`` (share of pairs where B < A) and ``ci_method``. Each metric's resampling starts from ``seed``, so the same
    input gives the same intervals whichever metrics are asked for.

    A token figure counted in one unit under A and another under B cannot be
    compared: asked for by name, it is a ValueError; among the defaults it is
    left out (``decision_prompt_tokens`` of two presets with different
    estimators, typically), and ``table.attrs["left_out"]`` says which and why.

    ``n_failed_pairs`` counts the metric's pairs in which A or B had a failed
    turn. With ``failed_pairs="keep"`` (the default) they stay in the
    comparison and that count flags them; with ``"exclude"`` they are left out,
    so ``n_pairs`` counts only the pairs where both configs finished every turn.
    """
    _check_frame(results)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if failed_pairs not in FAILED_PAIRS:
        raise ValueError(f"failed_pairs must be one of {', '.join(FAILED_PAIRS)}, got {failed_pairs!r}")
    configs = list(dict.fromkeys(results["config"]))
    for name in (a, b):
        if name not in configs:
            raise ValueError(f"no config named {name!r} in the results; they hold {configs}")
    available = metric_columns(results)
    chosen = available if metrics is None else list(metrics)
    unknown = [m for m in chosen if m not in available]
    if unknown:
        raise ValueError(f"not numeric metric columns of the results: {unknown}; available: {available}")
    mixed = mixed_unit_metrics(results, a, b, chosen)
    if mixed and metrics is not None:
        metric, (units_a, units_b) = next(iter(mixed.items()))
        raise ValueError(f"{metric} is counted in {units_a} under {a!r} and in {units_b} under {b!r}; "
                         "replay both in one unit (replay(counter=...)) to compare them")
    chosen = [m for m in chosen if m not in mixed]
    failed = sessions_with_failed_turns(results, (a, b))
    rows = {}
    for metric in chosen:
        pairs = paired_values(results, a, b, metric)
        flagged = pairs.index.isin(list(failed))
        if failed_pairs == "exclude":
            pairs = pairs[~flagged]
        rows[metric] = _compare_pairs(pairs["a"].to_numpy(), pairs["b"].to_numpy(), confidence=confidence,
                                      n_resamples=n_resamples, seed=seed)
        rows[metric]["n_failed_pairs"] = int(flagged.sum())
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(COMPARISON_COLUMNS))
    table.index.name = "metric"
    table = table.astype({"n_pairs": "int64", "n_failed_pairs": "int64"})
    table.attrs["left_out"] = {metric: f"counted in {units_a} under {a!r} and in {units_b} under {b!r}"
                               for metric, (units_a, units_b) in mixed.items()}
    return table


def _compare_pairs(a: np.ndarray, b: np.ndarray, *, confidence: float, n_resamples: int, seed: int) -> dict:
    n = len(a)
    if n == 0:
        nan = float("nan")
        return {"n_pairs": 0, "mean_a": nan, "mean_b": nan, "mean_diff": nan, "ratio": nan, "ci_low": nan,
                "ci_high": nan, "b_lower_share": nan, "ci_method": "none"}
    differences = b - a
    mean_a, mean_b = float(a.mean()), float(b.mean())
    low, high, method = bootstrap_mean_ci(differences, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return {"n_pairs": n, "mean_a": mean_a, "mean_b": mean_b, "mean_diff": float(differences.mean()),
            "ratio": mean_b / mean_a if mean_a != 0 else float("nan"), "ci_low": low, "ci_high": high,
            "b_lower_share": float(np.mean(b < a)), "ci_method": method}


def _check_frame(results: pd.DataFrame) -> None:
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"results must be a pandas DataFrame, got {type(results).__name__}")
    missing = [c for c in ("session_id", "config") if c not in results.columns]
    if missing:
        raise ValueError(f"results lack the column(s) {missing}; pass the frame run_ab returns")
