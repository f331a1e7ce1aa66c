"""Readable result tables: a unit in every label, each figure rounded to its metric's decimals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermeslab.eval.tables import default_price_note, readable_comparison, readable_means, unchanged_metrics, unit_of

COMPARISON = pd.DataFrame(
    {"n_pairs": [9, 9, 9, 8], "mean_a": [74297.78, 3.0, 0.086220, 1.0], "mean_b": [78698.33, 5.333333, 0.105307, 1.0],
     "mean_diff": [4400.556, 2.333333, 0.019087, 0.0], "ci_low": [-7005.81, 1.111111, 0.011414, np.nan],
     "ci_high": [22684.98, 3.333333, 0.025022, np.nan], "ratio": [1.059229, 1.777778, 1.221, 1.0],
     "b_lower_share": [0.777778, 0.111111, 0.0, 0.0]},
    index=pd.Index(["prompt_tokens", "compressions", "cost_cached_usd", "retention"], name="metric"))


@pytest.mark.parametrize(("metric", "expected"), [
    ("prompt_tokens", ("tokens", 0)), ("peak_prompt_tokens", ("tokens", 0)), ("cost_cached_usd", ("USD", 4)),
    ("retention", ("share", 3)), ("cached_share", ("share", 3)), ("compressions", ("count", 2)),
    ("refused_calls", ("count", 2)),
])
def test_a_metric_s_unit_follows_from_its_name(metric, expected):
    assert unit_of(metric) == expected


def test_each_row_of_a_comparison_reads_in_its_own_unit():
    table = readable_comparison(COMPARISON)
    assert list(table.index) == ["prompt_tokens (tokens)", "compressions (count)", "cost_cached_usd (USD)",
                                 "retention (share)"]
    assert table.loc["prompt_tokens (tokens)", ["mean_a", "ci_low"]].tolist() == ["74,298", "-7,006"]
    assert table.loc["compressions (count)", "mean_b"] == "5.33"
    assert table.loc["cost_cached_usd (USD)", "mean_diff"] == "0.0191"
    assert table.loc["retention (share)", "ci_low"] == ""  # no interval: an empty cell, not "nan"
    assert table["ratio (x)"].tolist() == [1.06, 1.78, 1.22, 1.0]
    assert table["n_pairs"].tolist() == [9, 9, 9, 8]


def test_concatenated_comparisons_keep_their_outer_level():
    table = readable_comparison(pd.concat({"40%": COMPARISON, "75%": COMPARISON}, names=["threshold"]))
    assert table.index.names == ["threshold", "metric"]
    assert table.loc[("75%", "compressions (count)"), "mean_a"] == "3.00"


def test_a_frame_that_is_not_a_comparison_is_refused():
    with pytest.raises(ValueError, match="lacks"):
        readable_comparison(COMPARISON.drop(columns="ratio"))


def test_means_per_config_in_the_given_order_with_units():
    results = pd.DataFrame({"config": ["a", "a", "b"], "prompt_tokens": [100, 201, 400],
                            "retention": [0.5, np.nan, 1 / 3], "compressions": [1, 2, 2]})
    means = readable_means(results, ["prompt_tokens", "retention", "compressions"], order=["b", "a"])
    assert list(means.columns) == ["prompt_tokens (tokens)", "retention (share)", "compressions (count)"]
    assert means.loc["a"].tolist() == [150, 0.5, 1.5] and means.loc["b"].tolist() == [400, 0.333, 2.0]
    assert str(means["prompt_tokens (tokens)"].dtype) == "Int64"
    with pytest.raises(ValueError, match="no metric column 'cost'"):
        readable_means(results, ["cost"])


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False),
       st.sampled_from(["prompt_tokens", "compressions", "cost_usd", "retention"]))
def test_a_shown_figure_is_within_half_a_last_digit_of_the_value(value, metric):
    row = COMPARISON.iloc[[0]].assign(mean_a=value).rename(index={"prompt_tokens": metric})
    shown = readable_comparison(row).iloc[0]["mean_a"]
    decimals = unit_of(metric)[1]
    assert abs(float(shown.replace(",", "")) - value) <= 0.5 * 10 ** -decimals + 1e-9 * abs(value)


def test_a_metric_is_unchanged_only_when_every_session_has_one_value_under_every_config():
    results = pd.DataFrame({
        "session_id": ["s1", "s1", "s2", "s2"], "config": ["A", "B", "A", "B"], "status": "ok",
        "same": [3, 3, 7, 7], "moved": [3, 3, 7, 8], "shares": [np.nan, np.nan, 1.0, 1.0],
        "defined_once": [np.nan, 1.0, 1.0, 1.0]})
    assert unchanged_metrics(results, ["same", "moved", "shares", "defined_once"]) == ["same", "shares"]
    failed = results.assign(status=["ok", "ok", "ok", "error"])
    assert unchanged_metrics(failed, ["moved"]) == ["moved"]  # the differing cell did not finish


def test_the_default_price_is_said_in_words_and_only_when_used():
    results = pd.DataFrame({"session_id": ["s1", "s1", "s2"], "price_is_default": [1, 1, 0]})
    assert "of 1 session(s) use the default price" in default_price_note(results)
    assert default_price_note(results.assign(price_is_default=0)) is None
