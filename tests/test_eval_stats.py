"""Paired comparison statistics, checked on cases whose answers are known in advance."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermeslab.eval.stats import bootstrap_mean_ci, metric_columns, paired_compare, paired_values

RESAMPLES = 999


def frame(a: dict[str, list], b: dict[str, list], *, sessions: list[str] | None = None,
          status_b: list[str] | None = None) -> pd.DataFrame:
    """A results frame with configs A and B over the same sessions."""
    n = len(next(iter(a.values())))
    sessions = sessions or [f"s{i}" for i in range(n)]
    rows = [pd.DataFrame({"session_id": sessions, "config": "A", "status": "ok", **a}),
            pd.DataFrame({"session_id": sessions, "config": "B", "status": status_b or "ok", **b})]
    return pd.concat(rows, ignore_index=True)


def test_identical_configs_give_a_zero_width_interval_at_zero():
    values = [10, 250, 3_000, 7, 41]
    table = paired_compare(frame({"tokens": values}, {"tokens": values}), "A", "B", n_resamples=RESAMPLES)
    row = table.loc["tokens"]
    assert (row["mean_diff"], row["ci_low"], row["ci_high"]) == (0.0, 0.0, 0.0)
    assert row["ratio"] == 1.0 and row["b_lower_share"] == 0.0 and row["ci_method"] == "constant"


def test_noise_with_zero_mean_gives_an_interval_containing_zero():
    rng = np.random.default_rng(7)
    a = rng.lognormal(9, 1, 200)
    noise = rng.normal(0, 300, 100)
    b = a + np.concatenate([noise, -noise])  # paired differences average exactly zero
    row = paired_compare(frame({"tokens": a}, {"tokens": b}), "A", "B", n_resamples=RESAMPLES).loc["tokens"]
    assert abs(row["mean_diff"]) < 1e-9
    assert row["ci_low"] < 0 < row["ci_high"]
    assert row["b_lower_share"] == pytest.approx(0.5)


def test_a_constant_shift_is_recovered_exactly():
    a = [100, 2_000, 35, 900]
    row = paired_compare(frame({"tokens": a}, {"tokens": [x - 30 for x in a]}), "A", "B",
                         n_resamples=RESAMPLES).loc["tokens"]
    assert (row["mean_diff"], row["ci_low"], row["ci_high"]) == (-30.0, -30.0, -30.0)
    assert row["b_lower_share"] == 1.0
    assert row["ratio"] == pytest.approx((sum(a) - 120) / sum(a))


def test_a_noisy_shift_gets_the_normal_theory_interval():
    """400 differences ~ N(3, 1): the 95% interval is 3 ± 1.96/20 to within bootstrap error."""
    rng = np.random.default_rng(11)
    a = rng.uniform(1_000, 5_000, 400)
    b = a + 3 + rng.normal(0, 1, 400)
    row = paired_compare(frame({"x": a}, {"x": b}), "A", "B", n_resamples=4_999).loc["x"]
    differences = b - a
    half = 1.96 * differences.std(ddof=1) / np.sqrt(len(differences))
    assert row["mean_diff"] == pytest.approx(differences.mean())
    assert row["ci_low"] == pytest.approx(differences.mean() - half, abs=0.03)
    assert row["ci_high"] == pytest.approx(differences.mean() + half, abs=0.03)
    assert row["ci_low"] < 3 < row["ci_high"]


def test_only_sessions_both_configs_finished_are_paired():
    results = frame({"x": [1.0, 2.0, 3.0, 4.0]}, {"x": [2.0, 2.0, 0.0, 9.0]}, status_b=["ok", "ok", "ok", "error"])
    extra = pd.DataFrame({"session_id": ["only-a"], "config": ["A"], "status": ["ok"], "x": [100.0]})
    results = pd.concat([results, extra], ignore_index=True)
    row = paired_compare(results, "A", "B", n_resamples=RESAMPLES).loc["x"]
    assert row["n_pairs"] == 3
    assert (row["mean_a"], row["mean_b"]) == (2.0, pytest.approx(4 / 3))
    assert row["b_lower_share"] == pytest.approx(1 / 3)
    assert list(paired_values(results, "A", "B", "x").index) == ["s0", "s1", "s2"]


def test_missing_values_are_not_paired():
    results = frame({"x": pd.array([1, None, 3], dtype="Int64")}, {"x": pd.array([2, 5, None], dtype="Int64")})
    assert paired_compare(results, "A", "B", n_resamples=RESAMPLES).loc["x", "n_pairs"] == 1


def test_the_same_seed_gives_the_same_interval_and_metrics_do_not_disturb_each_other():
    rng = np.random.default_rng(3)
    a, b, c = rng.normal(50, 10, 60), rng.normal(52, 10, 60), rng.normal(0, 1, 60)
    results = frame({"x": a, "y": c}, {"x": b, "y": c + 1 + rng.normal(0, 0.1, 60)})
    first = paired_compare(results, "A", "B", n_resamples=RESAMPLES, seed=5)
    again = paired_compare(results, "A", "B", ["x"], n_resamples=RESAMPLES, seed=5)
    other = paired_compare(results, "A", "B", ["x"], n_resamples=RESAMPLES, seed=6)
    pd.testing.assert_series_equal(first.loc["x"], again.loc["x"])
    assert other.loc["x", "ci_low"] != first.loc["x", "ci_low"]


def test_too_few_pairs_give_no_interval():
    one = paired_compare(frame({"x": [1.0]}, {"x": [3.0]}), "A", "B", n_resamples=RESAMPLES).loc["x"]
    assert one["n_pairs"] == 1 and one["mean_diff"] == 2.0 and np.isnan(one["ci_low"]) and one["ci_method"] == "none"
    none = paired_compare(frame({"x": [1.0]}, {"x": [3.0]}, status_b=["error"]), "A", "B").loc["x"]
    assert none["n_pairs"] == 0 and np.isnan(none["mean_a"])


def test_ratio_is_undefined_when_a_averages_zero():
    row = paired_compare(frame({"x": [0, 0, 0]}, {"x": [1, 2, 3]}), "A", "B", n_resamples=RESAMPLES).loc["x"]
    assert np.isnan(row["ratio"]) and row["mean_diff"] == 2.0


def test_metric_columns_skip_keys_and_text():
    results = frame({"x": [1], "note": ["a"]}, {"x": [2], "note": ["b"]})
    results["config_hash"] = "abc"
    assert metric_columns(results) == ["x"]


def test_bootstrap_is_skipped_for_a_constant_sample():
    assert bootstrap_mean_ci(np.array([4.0, 4.0, 4.0]), confidence=0.9, n_resamples=10, seed=0) == (4.0, 4.0,
                                                                                                    "constant")


@pytest.mark.parametrize("call, message", [
    (lambda r: paired_compare(r, "A", "C"), "no config named 'C'"),
    (lambda r: paired_compare(r, "A", "B", ["nope"]), "not numeric metric columns"),
    (lambda r: paired_compare(r, "A", "B", ["note"]), "not numeric metric columns"),
    (lambda r: paired_compare(r, "A", "B", confidence=1.5), "confidence must be between 0 and 1"),
    (lambda r: paired_compare(r, "A", "B", n_resamples=0), "n_resamples must be a positive integer"),
    (lambda r: paired_compare(r.drop(columns="config"), "A", "B"), r"lack the column\(s\) \['config'\]"),
    (lambda r: paired_compare(pd.concat([r, r]), "A", "B"), "more than one row for session 's0'"),
])
def test_bad_requests_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(frame({"x": [1, 2], "note": ["a", "b"]}, {"x": [2, 3], "note": ["c", "d"]}))


def test_results_must_be_a_frame():
    with pytest.raises(TypeError, match="pandas DataFrame"):
        paired_compare([{"session_id": "s"}], "A", "B")


# ---------------------------------------------------------------- plots


def comparison_frame() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    a = rng.lognormal(8, 1, 40)
    return frame({"tokens": a, "compressions": np.arange(40) % 4, "zero": np.zeros(40)},
                 {"tokens": a * 0.7, "compressions": np.arange(40) % 4 + 1, "zero": np.ones(40)})


def test_forest_plot_draws_one_row_per_metric_with_its_interval(tmp_path):
    from hermeslab.eval.ab_plots import plot_paired_differences

    table = paired_compare(comparison_frame(), "A", "B", n_resamples=RESAMPLES)
    figure = plot_paired_differences(table, a="seed", b="hermes")
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["zero (n=40)", "compressions (n=40)", "tokens (n=40)"]
    assert "% of seed's mean" in ax.get_xlabel()
    points = {round(line.get_ydata()[0]): line.get_xdata()[0] for line in ax.lines if line.get_marker() == "o"}
    assert points[2] == pytest.approx(-30.0)  # tokens: B is 30% below A
    assert [t.get_text() for t in ax.texts] == ["no A mean to compare against"]
    figure.savefig(tmp_path / "forest.png")
    absolute = plot_paired_differences(table, relative=False).axes[0]
    assert not absolute.texts and "% of" not in absolute.get_xlabel()


def test_session_scatter_draws_every_paired_session(tmp_path):
    from hermeslab.eval.ab_plots import plot_session_scatter

    figure = plot_session_scatter(comparison_frame(), "A", "B", "tokens", log=True)
    ax = figure.axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 40
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "tokens under A"
    figure.savefig(tmp_path / "scatter.png")


def test_plots_name_bad_input():
    from hermeslab.eval.ab_plots import plot_paired_differences, plot_session_scatter

    with pytest.raises(ValueError, match="pass the frame paired_compare returns"):
        plot_paired_differences(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="no metric column 'nope'"):
        plot_session_scatter(comparison_frame(), "A", "B", "nope")
    with pytest.raises(ValueError, match="log axes need positive values"):
        plot_session_scatter(frame({"x": [0, 1]}, {"x": [1, 0]}), "A", "B", "x", log=True)
