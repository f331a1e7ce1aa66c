"""Derived budgets (Hermes 0.19.0's measured table) and presets."""

from __future__ import annotations

import pytest

from hermeslab.core.config import Config, ConfigError
from hermeslab.context.budget import derive_budgets, summary_budget
from hermeslab.policies.loading import apply_preset, preset_values


def hermes():
    return apply_preset(Config(), "hermes-0.19").compression


def seed():
    return apply_preset(Config(), "seed").compression


# context, max_tokens, percent, threshold, tail budget, soft cap, max summary — Hermes 0.19.0's measured table
HERMES_TABLE = [
    (32_000, None, 0.75, 27_200, 5_440, 8_160, 1_600),
    (64_000, None, 0.75, 54_400, 10_880, 16_320, 3_200),
    (128_000, None, 0.75, 96_000, 19_200, 28_800, 6_400),
    (200_000, None, 0.75, 150_000, 30_000, 45_000, 10_000),
    (200_000, 65_536, 0.75, 100_848, 20_169, 30_253, 10_000),
    (400_000, None, 0.75, 300_000, 60_000, 90_000, 10_000),
    (512_000, None, 0.50, 256_000, 51_200, 76_800, 10_000),
    (1_000_000, None, 0.50, 500_000, 100_000, 150_000, 10_000),
]


@pytest.mark.parametrize("context, max_tokens, percent, threshold, tail, soft, max_summary", HERMES_TABLE)
def test_hermes_preset_reproduces_every_measured_row(context, max_tokens, percent, threshold, tail, soft, max_summary):
    b = derive_budgets(hermes(), context, max_tokens)
    assert (b.threshold_percent, b.threshold_tokens, b.tail_token_budget, b.soft_tail_tokens, b.max_summary_tokens) \
        == (percent, threshold, tail, soft, max_summary)


def test_small_windows_trigger_at_85_percent():
    b = derive_budgets(hermes(), 16_000)
    assert (b.threshold_tokens, b.tail_token_budget, b.soft_tail_tokens) == (13_600, 2_720, 4_080)


def test_the_2000_token_summary_floor_beats_a_smaller_cap():
    b = derive_budgets(hermes(), 32_000)
    assert summary_budget(hermes(), b, 100) == 2_000
    assert summary_budget(hermes(), b, 1_000_000) == 2_000  # cap 1,600 < floor


def test_summary_budget_is_a_share_of_the_summarised_tokens_within_the_cap():
    b = derive_budgets(hermes(), 200_000)
    assert summary_budget(hermes(), b, 30_000) == 6_000
    assert summary_budget(hermes(), b, 80_000) == 10_000
    assert summary_budget(hermes(), b, -5) == 2_000


def test_output_cap_that_leaves_no_room_is_ignored():
    assert derive_budgets(hermes(), 32_000, 40_000).effective_window == 32_000
    assert derive_budgets(hermes(), 32_000, 0).effective_window == 32_000
    assert derive_budgets(hermes(), 32_000, 8_000).effective_window == 24_000


def test_target_ratio_is_clamped():
    cfg = apply_preset(Config(), "hermes-0.19").with_overrides({"compression.target_ratio": 0.95}).compression
    assert derive_budgets(cfg, 200_000).tail_token_budget == int(150_000 * 0.80)


def test_hermes_threshold_jumps_at_512k_but_the_seed_is_monotonic():
    """A 400K window compresses later than a 512K one under Hermes; the seed has one rule."""
    assert derive_budgets(hermes(), 400_000).threshold_tokens > derive_budgets(hermes(), 512_000).threshold_tokens
    windows = range(16_000, 1_200_000, 8_000)
    thresholds = [derive_budgets(seed(), w).threshold_tokens for w in windows]
    assert thresholds == sorted(thresholds)
    assert all(t < w for t, w in zip(thresholds, windows))


@pytest.mark.parametrize("window", [16_000, 64_000, 65_000, 70_000, 75_000, 80_000, 100_000, 200_000])
def test_the_seed_never_triggers_above_80_percent_of_the_window(window):
    """Hermes's 64K floor fires at 98% of a 65K window; the seed's ceiling holds it at 80% of every window."""
    assert derive_budgets(seed(), window).threshold_tokens <= 0.80 * window
    assert derive_budgets(seed(), window, 8_000).threshold_tokens <= 0.80 * (window - 8_000)
    assert derive_budgets(hermes(), 65_000).threshold_tokens == 64_000



@pytest.mark.parametrize("bad", [0, -1, 1.5, "128000", True])
def test_bad_context_length_is_named(bad):
    with pytest.raises(ValueError, match="context_length must be a positive integer"):
        derive_budgets(seed(), bad)


def test_the_seed_sizes_the_tail_from_what_the_fixed_cost_leaves():
    """7K of system prompt and tool schemas in a 16K window: the tail is a share of the 5.8K left for history."""
    plain, fixed = derive_budgets(seed(), 16_000), derive_budgets(seed(), 16_000, fixed_tokens=7_000)
    assert (plain.threshold_tokens, plain.tail_token_budget) == (12_800, 2_560)
    assert (fixed.threshold_tokens, fixed.tail_token_budget, fixed.soft_tail_tokens) == (12_800, 1_160, 1_740)
    assert fixed.as_record()["fixed_tokens"] == 7_000
    assert derive_budgets(seed(), 16_000, fixed_tokens=20_000).tail_token_budget == 0


def test_the_hermes_preset_ignores_the_fixed_cost():
    assert derive_budgets(hermes(), 16_000, fixed_tokens=7_000).tail_token_budget == 2_720


@pytest.mark.parametrize("bad", [-1, 1.5, "7000", True, None])
def test_bad_fixed_cost_is_named(bad):
    with pytest.raises(ValueError, match="fixed_tokens must be a non-negative integer"):
        derive_budgets(seed(), 16_000, fixed_tokens=bad)


def test_presets_are_complete_and_restore_each_other():
    assert set(preset_values("seed")) == set(preset_values("hermes-0.19"))
    there_and_back = apply_preset(apply_preset(Config(), "hermes-0.19"), "seed")
    assert there_and_back.compression == Config().compression
    assert apply_preset(Config(), "hermes-0.19").compression.preset == "hermes-0.19"


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown compression preset 'hermes-1\.0' \(known: .*hermes-0\.19, .*seed[,)]"):
        apply_preset(Config(), "hermes-1.0")


@pytest.mark.parametrize("key, value, message", [
    ("estimator", "chars", "compression.estimator: expected one of tiktoken, rough, got 'chars'"),
    ("missing_results", "keep", "compression.missing_results: expected one of stub, drop"),
    ("threshold", 1.5, r"compression.threshold: expected a fraction in \(0, 1\]"),
    ("soft_tail_factor", 0.5, "compression.soft_tail_factor: must be at least 1"),
    ("protect_last_n", -1, "compression.protect_last_n: must not be negative"),
    ("ineffective_limit", 0, "compression.ineffective_limit: must be at least 1"),
    ("small_window_limit", "big", "compression.small_window_limit: expected an integer or null"),
    ("max_trigger_ratio", 1.5, r"compression.max_trigger_ratio: expected a fraction in \(0, 1\] or null"),
])
def test_unusable_values_are_named(key, value, message):
    cfg = Config().with_overrides({f"compression.{key}": value}).compression
    with pytest.raises(ConfigError, match=message):
        derive_budgets(cfg, 64_000)
