"""The probe exam's statistics: raw and normalised scores, paired session-bootstrap intervals, the frontier, the
matched-budget comparison and the scorecard, on exam frames drawn by hypothesis in run_exam's shape."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.eval.probes.frontier import budget_edges, frontier, matched_budget
from hermeslab.eval.probes.paired import cluster_bootstrap_ci, paired_scores
from hermeslab.eval.probes.scorecard import caption, labels, problem, readable, scorecard
from hermeslab.eval.probes.scores import OVERALL, PROBE_TYPES, normalise, scores

BANK_TYPES = PROBE_TYPES[:5]
POINTS = st.sampled_from([0.0, 1.0, 2.0, math.nan])


def row(recording, config, window, compaction, probe, kind, arm, points, *, fittable=True, retained=1_000):
    return {"recording_id": recording, "config": config, "window": window, "compaction": compaction,
            "probe_id": probe, "probe_type": kind, "arm": arm, "answer": "x", "points": points,
            "score": points / 2, "fittable": fittable, "retained_tokens": retained, "removed_tokens": 500,
            "token_unit": "tiktoken cl100k_base", "answerer": "perfect-reader", "judge": "matcher",
            "cached": False, "error": None}


def frame_of(rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame.attrs.update(answerer="perfect-reader", judge="matcher", token_unit="tiktoken cl100k_base")
    return frame


@st.composite
def exam_frames(draw, configs=("A", "B"), same=False):
    """A frame of run_exam's shape: a few recordings, compactions and probes under each config, every arm
    scored 0/1/2 or not at all. ``same`` gives every config the same points."""
    rows = []
    for recording in range(draw(st.integers(1, 6))):
        for compaction in range(draw(st.integers(1, 2))):
            retained = {config: draw(st.integers(100, 9_000)) for config in configs}
            for probe in range(draw(st.integers(1, 4))):
                kind = draw(st.sampled_from(BANK_TYPES))
                fittable = draw(st.booleans())
                shared = [draw(POINTS) for _ in range(3)]
                for config in configs:
                    points = shared if same else [draw(POINTS) for _ in range(3)]
                    for arm, value in zip(("compacted", "ceiling", "floor"), points):
                        rows.append(row(f"r{recording}", config, 8_000, compaction, f"p{recording}-{compaction}-{probe}",
                                        kind, arm, value if fittable or arm != "ceiling" else math.nan,
                                        fittable=fittable, retained=retained[config]))
    return frame_of(rows)


# ---------------------------------------------------------------- normalisation


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_a_compacted_score_between_the_controls_normalises_into_zero_to_one(a, b, c):
    floor, compacted, ceiling = sorted((a, b, c))
    value, why = normalise(compacted, ceiling, floor)
    if ceiling > floor:
        assert why is None and -1e-9 <= value <= 1 + 1e-9
    else:
        assert math.isnan(value) and "does not exceed" in why


def test_normalisation_without_a_ceiling_above_the_floor_is_nan_with_a_reason():
    rows = [row("r", "A", 8_000, 0, "p", "recall", arm, points)
            for arm, points in (("compacted", 1.0), ("ceiling", 0.0), ("floor", 0.0))]
    table = scores(frame_of(rows))
    assert math.isnan(table.loc[("A", 8_000, "recall"), "normalised"])
    assert "does not exceed" in table.loc[("A", 8_000, "recall"), "note"]
    assert table.loc[("A", 8_000, "recall"), "raw"] == 0.5


def test_a_perfect_reader_pattern_normalises_to_the_share_kept():
    rows = []
    for n, kept in enumerate([2.0, 2.0, 0.0, 0.0]):
        for arm, points in (("compacted", kept), ("ceiling", 2.0), ("floor", 0.0)):
            rows.append(row("r", "A", 8_000, 0, f"p{n}", "recall", arm, points))
    table = scores(frame_of(rows))
    assert table.loc[("A", 8_000, "recall"), "normalised"] == pytest.approx(0.5)
    assert table.loc[("A", 8_000, "recall"), "ceiling"] == 1.0 and table.loc[("A", 8_000, "recall"), "floor"] == 0.0


@settings(max_examples=25, deadline=None)
@given(exam_frames())
def test_scores_are_nan_exactly_when_nothing_was_scored(frame):
    table = scores(frame)
    for key, values in table.iterrows():
        if values.n_scored == 0:
            assert math.isnan(values.raw) and values.note
        else:
            assert 0 <= values.raw <= 1
        if values.n_controlled == 0:
            assert math.isnan(values.normalised) and values.note
        if not math.isnan(values.normalised):
            assert values.ceiling > values.floor


def test_unfittable_probes_are_left_out_of_the_normalisation():
    rows = [row("r", "A", 8_000, 0, "p", "artifact", arm, points, fittable=False)
            for arm, points in (("compacted", 2.0), ("ceiling", math.nan), ("floor", 0.0))]
    table = scores(frame_of(rows))
    assert table.loc[("A", 8_000, "artifact"), "n_controlled"] == 0
    assert math.isnan(table.loc[("A", 8_000, "artifact"), "normalised"])
    assert table.loc[("A", 8_000, "artifact"), "raw"] == 1.0


# ---------------------------------------------------------------- paired intervals


@settings(max_examples=25, deadline=None)
@given(exam_frames(), st.integers(0, 10))
def test_every_paired_interval_contains_its_point_estimate(frame, seed):
    table = paired_scores(frame, "A", "B", n_resamples=400, seed=seed)
    for _, values in table.iterrows():
        if values.n_pairs == 0:
            assert math.isnan(values.mean_diff)
        elif not math.isnan(values.ci_low):
            assert values.ci_low - 1e-12 <= values.mean_diff <= values.ci_high + 1e-12
            assert -1 <= values.ci_low <= values.ci_high <= 1


@settings(max_examples=20, deadline=None)
@given(exam_frames(same=True))
def test_two_configs_with_the_same_answers_differ_by_an_interval_at_zero(frame):
    table = paired_scores(frame, "A", "B", n_resamples=200)
    scored = table[table.n_pairs > 0]
    assert (scored.mean_diff == 0).all()
    assert ((scored.ci_low == 0) & (scored.ci_high == 0)).all()


def test_the_bootstrap_resamples_sessions_not_probes():
    # Two sessions, each all-or-nothing: probe resampling would give a narrow interval around 0; sessions give
    # the whole range between the two session means.
    values = np.array([1.0] * 50 + [-1.0] * 50)
    clusters = np.array(["a"] * 50 + ["b"] * 50)
    mean, low, high, method = cluster_bootstrap_ci(values, clusters, n_resamples=2_000, seed=1)
    assert mean == 0 and low == -1 and high == 1 and method == "cluster percentile"
    _, probe_low, probe_high, _ = cluster_bootstrap_ci(values, np.arange(100), n_resamples=2_000, seed=1)
    assert probe_high - probe_low < 0.6


def test_the_interval_is_seeded():
    rng = np.random.default_rng(3)
    values, clusters = rng.normal(size=60), rng.integers(0, 12, 60)
    assert cluster_bootstrap_ci(values, clusters, seed=5) == cluster_bootstrap_ci(values, clusters, seed=5)
    assert cluster_bootstrap_ci(values, clusters, seed=5) != cluster_bootstrap_ci(values, clusters, seed=6)


def test_one_session_gives_no_interval_and_no_pairs_gives_nan():
    mean, low, high, method = cluster_bootstrap_ci(np.array([1.0, 0.0]), np.array(["s", "s"]))
    assert mean == 0.5 and math.isnan(low) and math.isnan(high) and method == "none"
    assert math.isnan(cluster_bootstrap_ci(np.array([]), np.array([]))[0])


def test_probes_scored_under_one_config_only_are_counted_and_left_out():
    rows = [row("r1", "A", 8_000, 0, "p1", "recall", "compacted", 2.0),
            row("r1", "B", 8_000, 0, "p1", "recall", "compacted", 0.0),
            row("r1", "A", 8_000, 0, "p2", "recall", "compacted", 2.0),
            row("r1", "B", 8_000, 0, "p3", "recall", "compacted", 2.0)]
    table = paired_scores(frame_of(rows), "A", "B")
    line = table.loc[(8_000, "recall")]
    assert (line.n_pairs, line.only_a, line.only_b, line.mean_diff) == (1, 1, 1, -1.0)


def test_a_config_paired_with_itself_or_absent_is_refused():
    frame = frame_of([row("r", "A", 8_000, 0, "p", "recall", "compacted", 2.0)])
    with pytest.raises(ValueError, match="two configs"):
        paired_scores(frame, "A", "A")
    with pytest.raises(ValueError, match="no config named 'C'"):
        paired_scores(frame, "A", "C")


# ---------------------------------------------------------------- frontier and matched budget


def budget_frame() -> pd.DataFrame:
    """Config A keeps 1,000 or 3,000 tokens, B 2,000 or 4,000; both answer a probe exactly when they keep 3,000+."""
    rows = []
    for recording in range(8):
        for config, budgets in (("A", (1_000, 3_000)), ("B", (2_000, 4_000))):
            for compaction, retained in enumerate(budgets):
                for probe in range(3):
                    rows.append(row(f"r{recording}", config, 8_000, compaction, f"p{compaction}-{probe}", "recall",
                                    "compacted", 2.0 if retained >= 3_000 else 0.0, retained=retained))
    return frame_of(rows)


def test_the_frontier_gives_each_config_its_mean_budget_and_score():
    table = frontier(budget_frame(), n_resamples=200)
    assert table.loc[("A", 8_000), "retained_tokens"] == 2_000 and table.loc[("A", 8_000), "score"] == 0.5
    assert table.loc[("B", 8_000), "retained_tokens"] == 3_000 and table.loc[("B", 8_000), "score"] == 0.5
    assert table.loc[("B", 8_000), "dominated"] and not table.loc[("A", 8_000), "dominated"]
    assert table.attrs["token_unit"] == "tiktoken cl100k_base"


def test_at_matched_budgets_the_configs_score_alike():
    table = matched_budget(budget_frame(), bins=4, min_probes=5, n_resamples=200)
    edges = budget_edges(budget_frame(), 4)
    assert list(edges) == [1_000, 1_750, 2_500, 3_250, 4_000]
    by_range = table["score"].unstack("config")
    # Each range holds one config's compactions; wherever both are present they would score alike.
    assert by_range.loc[0, "A"] == 0 and by_range.loc[3, "B"] == 1
    assert math.isnan(by_range.loc[0, "B"]) and "fewer than 5" in table.loc[(0, "B"), "note"]


def test_matched_budget_refuses_mixed_token_units():
    frame = budget_frame()
    frame.loc[frame.config == "B", "token_unit"] = "rough chars/4"
    with pytest.raises(ValueError, match="more than one unit"):
        matched_budget(frame)


# ---------------------------------------------------------------- the scorecard


@settings(max_examples=15, deadline=None)
@given(exam_frames())
def test_the_scorecard_pairs_every_config_with_the_baseline_and_names_its_measures(frame):
    table = scorecard(frame, "A", n_resamples=200)
    assert table.xs("A", level="config")["diff"].isna().all()
    for key, values in table.xs("B", level="config").iterrows():
        if not math.isnan(values["diff"]) and not math.isnan(values.ci_low):
            assert values.ci_low - 1e-12 <= values["diff"] <= values.ci_high + 1e-12
    said = labels(frame)
    assert said["answerer"] == "perfect-reader" and said["judge"] == "matcher"
    line = caption(frame)
    assert "tiktoken cl100k_base" in line and "perfect-reader" in line and "floor" in line
    assert set(readable(table).columns) >= {"probes", "raw", "normalised"}


def test_an_exam_that_scored_nothing_is_nan_and_flagged():
    rows = [row(f"r{n}", config, 8_000, 0, f"p{n}", "recall", arm, math.nan)
            for n in range(3) for config in ("A", "B") for arm in ("compacted", "ceiling", "floor")]
    frame = frame_of(rows)
    frame["error"] = "the reply was not JSON"
    table = scorecard(frame, "A")
    assert table["raw"].isna().all() and table["normalised"].isna().all() and table["diff"].isna().all()
    assert "scored none of its 18" in problem(frame) and "not JSON" in problem(frame)
    assert table.attrs["problem"] == problem(frame)
    assert (table.xs(OVERALL, level="probe_type")["note"] == "no probe of this group was scored").all()
    assert problem(frame_of([row("r", "A", 8_000, 0, "p", "recall", "compacted", 0.0)])) is None


def test_a_frame_without_the_exam_columns_is_refused_in_one_line():
    with pytest.raises(ValueError, match="lacks the column"):
        scores(pd.DataFrame({"config": ["A"]}))
    with pytest.raises(TypeError, match="DataFrame"):
        scores([])


def test_compactions_that_all_kept_the_same_budget_make_one_range():
    rows = [row(f"r{n}", config, 8_000, 0, f"p{n}", "recall", "compacted", 2.0, retained=3_000)
            for n in range(30) for config in ("A", "B")]
    table = matched_budget(frame_of(rows), bins=4, min_probes=5, n_resamples=100)
    assert list(table.index) == [(0, "A"), (0, "B")] and (table.score == 1).all()
    assert (table.budget_low == 3_000).all() and (table.budget_high == 3_000).all()
