"""Pictures of an A/B comparison: paired differences with their intervals, and sessions A against B.

Both functions return a matplotlib Figure (drawn on a given Axes when one is
passed), so notebooks show it and scripts save it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .stats import COMPARISON_COLUMNS, paired_values

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _axes(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, layout="constrained")
    return figure, figure.add_subplot()


def plot_paired_differences(comparison: pd.DataFrame, *, relative: bool = True, a: str = "A", b: str = "B",
                            ax: Axes | None = None) -> Figure:
    """A forest plot: each metric's mean paired difference B − A as a point with its confidence interval.

    ``comparison`` is what ``paired_compare`` returns. Metrics differ in scale
    (millions of tokens beside a handful of compressions), so by default each
    difference is shown as a percentage of A's mean; a metric whose A mean is
    zero has no such percentage and is labelled instead of drawn. Intervals
    that exclude zero are drawn solid.
    """
    missing = [c for c in COMPARISON_COLUMNS if c not in comparison.columns]
    if missing:
        raise ValueError(f"comparison lacks {missing}; pass the frame paired_compare returns")
    if comparison.empty:
        raise ValueError("the comparison has no metrics to plot")
    figure, ax = _axes(ax, (7.0, 0.45 * len(comparison) + 1.4))
    scale = comparison["mean_a"].abs() / 100.0 if relative else pd.Series(1.0, index=comparison.index)
    drawable = np.isfinite(scale) & (scale > 0) & comparison["mean_diff"].notna()
    labels = []
    # Notes sit mid-panel (x in axes fractions) and are clipped to it: at x = 0 in data they spilled into the
    # next panel whenever zero was near an edge.
    beside = ax.get_yaxis_transform()
    for row, (metric, values) in enumerate(comparison.iloc[::-1].iterrows()):
        labels.append(f"{metric} (n={values['n_pairs']})")
        if not drawable[metric]:
            ax.text(0.5, row, "no A mean to compare against" if relative else "no pairs", va="center", ha="center",
                    fontsize="small", color="0.4", transform=beside, clip_on=True)
            continue
        centre = values["mean_diff"] / scale[metric]
        low, high = values["ci_low"] / scale[metric], values["ci_high"] / scale[metric]
        excludes_zero = np.isfinite(low) and np.isfinite(high) and (low > 0 or high < 0)
        if np.isfinite(low) and np.isfinite(high):
            ax.hlines(row, low, high, color="C0", linewidth=2, linestyle="-" if excludes_zero else ":")
        ax.plot(centre, row, "o", color="C0" if excludes_zero else "0.5")
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.set_xlabel(f"{b} − {a}" + (f", % of {a}'s mean" if relative else ""))
    title = f"Paired differences, {b} vs {a}"
    ax.set_title(title if len(title) <= 36 else f"Paired differences,\n{b} vs {a}", fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    return figure


def plot_session_scatter(results: pd.DataFrame, a: str, b: str, metric: str, *, log: bool = False,
                         ax: Axes | None = None) -> Figure:
    """Each session as one point: its ``metric`` under config ``a`` (x) and under ``b`` (y).

    Points below the diagonal are sessions where B is lower. Only sessions both
    configs finished are drawn; ``log`` uses logarithmic axes (token sums span
    orders of magnitude).
    """
    if metric not in results.columns:
        raise ValueError(f"no metric column {metric!r} in the results")
    pairs = paired_values(results, a, b, metric)
    if pairs.empty:
        raise ValueError(f"no session has a value for {metric!r} under both {a!r} and {b!r}")
    figure, ax = _axes(ax, (5.0, 5.0))
    below = pairs["b"] < pairs["a"]
    ax.scatter(pairs.loc[~below, "a"], pairs.loc[~below, "b"], s=14, alpha=0.7, color="C1",
               label=f"{b} ≥ {a} ({int((~below).sum())})")
    ax.scatter(pairs.loc[below, "a"], pairs.loc[below, "b"], s=14, alpha=0.7, color="C0",
               label=f"{b} < {a} ({int(below.sum())})")
    low = float(min(pairs["a"].min(), pairs["b"].min()))
    high = float(max(pairs["a"].max(), pairs["b"].max()))
    if log:
        positive = pairs[(pairs > 0).all(axis=1)]
        if positive.empty:
            raise ValueError(f"log axes need positive values; {metric!r} has none under both configs")
        low = float(positive.min().min())
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.plot([low, high], [low, high], color="0.3", linewidth=0.8, label="equal")
    ax.set_xlabel(f"{metric} under {a}")
    ax.set_ylabel(f"{metric} under {b}")
    ax.set_title(f"{metric}: {len(pairs)} sessions")
    ax.legend(loc="upper left", fontsize="small")
    return figure
