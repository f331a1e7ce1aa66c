"""Result tables for reading: every figure rounded to what it can resolve, every label carrying its unit.

The frames ``run_ab`` and ``paired_compare`` return keep full precision for
further work; these functions make the copies a notebook shows. A metric's
unit and decimals follow from its name (``*_usd`` dollars, ``*tokens*``
tokens, shares, and the rest counts), so a new metric needs no entry here.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

#: Metrics that are shares of something (0 to 1) without ``share`` in their name.
SHARES = frozenset({"retention", "task_survival", "b_lower_share"})
#: Columns of a paired comparison that are in the metric's own unit.
IN_METRIC_UNIT = ("mean_a", "mean_b", "mean_diff", "ci_low", "ci_high")
#: Shares and the counts they are made of: the counts are kept for pooling runs, the share is what to compare
#: (a share of 1 makes its two counts equal in every session, which reads as two identical metrics).
SHARE_PARTS = {"task_survival": ("task_kept", "task_judged"), "retention": ("facts_retained", "facts_at_risk")}
#: Comparison columns under names a reader can take in at a glance, and what each means.
PLAIN_COLUMNS = {"ratio": "B/A", "b_lower_share": "B lower"}
LEGEND = ("B/A: B's mean over A's; B lower: share of the sessions in which B's value is below A's; "
          "task_survival = task_kept / task_judged (compressions that kept the latest user message verbatim), "
          "retention = facts_retained / facts_at_risk (facts a compression took out and a later reply used, "
          "still in that call's context)")


def unchanged_metrics(results: pd.DataFrame, metrics: Sequence[str]) -> list[str]:
    """The ``metrics`` whose value no config changes: in every session, every config's value is the same.

    Their comparison rows are zeros by construction (a rule that never fired,
    a count the config cannot touch); a reader is better told how many there
    are than shown each. Only finished cells count; a missing value equals
    only a missing value.
    """
    finished = results[results["status"] == "ok"] if "status" in results.columns else results
    unchanged = []
    for metric in metrics:
        values = finished[["session_id", metric]].astype({metric: "float64"}).fillna({metric: float("inf")})
        if (values.groupby("session_id")[metric].nunique() <= 1).all():
            unchanged.append(metric)
    return unchanged


def default_price_note(results: pd.DataFrame) -> str | None:
    """What ``price_is_default`` = 1 means, in one line (None when every session's model has a listed price)."""
    if "price_is_default" not in results.columns:
        return None
    sessions = results.loc[results["price_is_default"] == 1, "session_id"].nunique()
    if not sessions:
        return None
    return (f"cost_usd and cost_cached_usd of {sessions} session(s) use the default price: their recorded model is "
            "not in the price table (hermeslab.eval.prices)")


def unit_of(metric: str) -> tuple[str, int]:
    """``(unit, decimals)`` for a metric name.

    Means over a handful of sessions resolve counts to hundredths; token sums
    and the prices of a few thousand tokens need no more than shown here.
    """
    if metric.endswith("_usd"):
        return "USD", 4
    if metric.endswith("_share") or metric in SHARES:
        return "share", 3
    if "tokens" in metric:
        return "tokens", 0
    return "count", 2


def labelled(metric: str) -> str:
    """``prompt_tokens`` → ``prompt_tokens (tokens)``."""
    return f"{metric} ({unit_of(metric)[0]})"


def readable_means(results: pd.DataFrame, metrics: Sequence[str], *, by: str = "config",
                   order: Sequence[str] | None = None) -> pd.DataFrame:
    """The mean of each metric per ``by`` group (in ``order`` when given), rounded, with units in the headers."""
    missing = [metric for metric in metrics if metric not in results.columns]
    if missing:
        raise ValueError(f"no metric column {missing[0]!r} in the results")
    means = results.groupby(by, sort=False)[list(metrics)].mean()
    if order is not None:
        means = means.loc[list(order)]
    for metric in metrics:
        decimals = unit_of(metric)[1]
        means[metric] = means[metric].round(decimals).astype("Int64" if decimals == 0 else float)
    return means.rename(columns=labelled)


def readable_comparison(comparison: pd.DataFrame, columns: Sequence[str] = (
        "n_pairs", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "ratio", "b_lower_share")) -> pd.DataFrame:
    """A ``paired_compare`` table (or several concatenated) with each row written in its metric's unit.

    The metric is the last level of the index and gets its unit in its label.
    Rows mix units (tokens beside dollars), so the means, the difference and
    its interval become text, each row to its own decimals; ``ratio`` (B's
    mean over A's) keeps two decimals and ``b_lower_share`` three.
    """
    missing = [column for column in columns if column not in comparison.columns]
    if missing:
        raise ValueError(f"comparison lacks {missing}; pass the frame paired_compare returns")
    table = comparison[list(columns)].copy()
    metrics = [str(metric) for metric in table.index.get_level_values(-1)]
    for column in IN_METRIC_UNIT:
        if column in table.columns:
            table[column] = [_figure(value, unit_of(metric)[1]) for value, metric in zip(table[column], metrics)]
    table = table.round({"ratio": 2, "b_lower_share": 3})
    labels = [labelled(metric) for metric in metrics]
    if isinstance(table.index, pd.MultiIndex):
        table.index = pd.MultiIndex.from_arrays(
            [*(table.index.get_level_values(level) for level in range(table.index.nlevels - 1)), labels],
            names=table.index.names)
    else:
        table.index = pd.Index(labels, name=table.index.name)
    return table.rename(columns={"ratio": "ratio (x)", "b_lower_share": "b_lower_share (share)"})


def _figure(value: float, decimals: int) -> str:
    """One number as text with thousands separators; a missing one as an empty cell."""
    return "" if pd.isna(value) else f"{value:,.{decimals}f}"
