"""Forest plots side by side: every note and title stays inside its own panel."""

from __future__ import annotations

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hermeslab.eval.ab_plots import plot_paired_differences
from hermeslab.eval.stats import COMPARISON_COLUMNS


def comparison(diffs: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """A paired_compare-shaped table: metric → (A's mean, mean difference), with a tight interval."""
    rows = {metric: {"n_pairs": 12, "n_failed_pairs": 0, "mean_a": mean_a, "mean_b": mean_a + diff,
                     "mean_diff": diff, "ratio": float("nan"), "ci_low": diff - 1, "ci_high": diff + 0.5,
                     "b_lower_share": 1.0} for metric, (mean_a, diff) in diffs.items()}
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(COMPARISON_COLUMNS))


def test_notes_and_titles_stay_inside_their_panel_when_zero_sits_at_the_edge():
    # Every difference is negative, so zero is the right edge of each panel, where a note centred on it
    # used to spill into the neighbour.
    table = comparison({"prompt_tokens": (100_000.0, -30_000.0), "refused_calls": (0.0, 0.0),
                        "compressions": (3.0, -1.5)})
    figure = Figure(figsize=(16, 4), layout="constrained")
    axes = figure.subplots(1, 3, sharey=True)
    for ax, name in zip(axes, ["observation_masking", "sliding_window", "seed"]):
        plot_paired_differences(table, a="hermes-0.19", b=name, ax=ax)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in axes:
        box = ax.get_window_extent(renderer)
        (note,) = ax.texts
        extent = note.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, (extent, box)
    titles = [ax.title.get_window_extent(renderer) for ax in axes]
    assert all(left.x1 < right.x0 for left, right in zip(titles, titles[1:])), titles
    assert "\n" in axes[0].get_title()  # a long pair of names goes on a second line
