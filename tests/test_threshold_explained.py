"""The one-line account of where compression fires, which the chat front ends print when a config changes."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.policies.loading import load_config, preset_names
from hermeslab.policies.running import budgets_of, threshold_sentence


@settings(max_examples=150, deadline=None)
@given(preset=st.sampled_from(sorted(preset_names())), window=st.integers(2_000, 400_000),
       threshold=st.sampled_from([0.3, 0.5, 0.6, 0.9]), max_tokens=st.one_of(st.none(), st.integers(1, 40_000)))
def test_the_line_states_the_threshold_the_budgets_use(preset, window, threshold, max_tokens):
    config = load_config(preset).with_overrides({"model.context_length": window, "model.max_tokens": max_tokens,
                                                 "compression.threshold": threshold})
    line = threshold_sentence(config)
    if not config.compression.enabled:  # the no-compaction arm
        assert line == "automatic compression is off (compression.enabled is false)"
        return
    budgets = budgets_of(config.compression, window, max_tokens)
    stated = int(re.match(r"compression fires at ([\d,]+) tokens?", line).group(1).replace(",", ""))
    assert stated == budgets.threshold_tokens
    assert f"of the {window:,}-token window): " in line and len(line.splitlines()) == 1


def test_a_fraction_the_floor_overrides_is_named_with_the_window_where_it_starts_to_act():
    below = load_config("seed,model.context_length=100000,compression.threshold=0.3")
    assert threshold_sentence(below).endswith("seed's min_threshold_tokens floor of 64,000 wins over 0.3 of the "
                                             "window below windows of 213,334 tokens")
    above = below.with_overrides({"model.context_length": 213_334})
    assert threshold_sentence(above).endswith("compression.threshold 0.3 of the window decides")
    ceiling = load_config("seed,model.context_length=65536,compression.threshold=0.3")
    assert "seed's max_trigger_ratio ceiling holds compression at 0.8" in threshold_sentence(ceiling)
    off = load_config("seed,compression.enabled=false")
    assert threshold_sentence(off) == "automatic compression is off (compression.enabled is false)"


def test_one_resolution_holds_every_effective_value_with_its_rule_and_the_compactor_keeps_it():
    from hermeslab.context.extractive import ExtractiveSummariser
    from hermeslab.policies.running import make_compactor, resolution_of

    roo = load_config("roo-code-3.52.1,model.context_length=100000,model.max_tokens=4096")
    resolution = resolution_of(roo)
    assert resolution.output_reserve == 4_096 and resolution.reserve_rule == "model.max_tokens"
    assert resolution.threshold_tokens == resolution.budgets.threshold_tokens == 85_905  # 90% less the reserve, + 1
    assert threshold_sentence(roo).endswith(resolution.threshold_rule)
    assert make_compactor(roo, ExtractiveSummariser()).resolution == resolution

    unset = resolution_of(load_config("roo-code-3.52.1,model.context_length=100000"))
    assert (unset.output_reserve, unset.reserve_rule) == (8_192, "the agent's default, model.max_tokens being unset")
    codex = resolution_of(load_config("codex-cli-0100b10,model.context_length=100000"))
    assert (codex.output_reserve, codex.reserve_rule) == (0, "the agent's trigger keeps none")

    seed = resolution_of(load_config("seed,model.context_length=100000,model.max_tokens=8000"))
    assert (seed.output_reserve, seed.reserve_rule) == (8_000, "model.max_tokens")
    assert seed.budgets.effective_window == 92_000
    too_big = resolution_of(load_config("seed,model.context_length=8000,model.max_tokens=9000"))
    assert too_big.output_reserve == 0 and "leaves no room in the window, so it is ignored" in too_big.reserve_rule
    assert seed.summary_rule == ("summary_ratio 0.2 of the summarised span, within summary_min_tokens 2,000 and the "
                                 "cap of 10,000 (summary_context_share 0.1 of the window, at most summary_max_tokens "
                                 "12,000)")
    small = resolution_of(load_config("seed,model.context_length=8000"))
    assert small.summary_rule == ("summary_min_tokens 2,000 is not below the summary cap of 800, so every summary "
                                  "gets the minimum")


def test_a_window_a_provider_lowered_is_resolved_again():
    from hermeslab.context.extractive import ExtractiveSummariser
    from hermeslab.policies.running import make_compactor, resolution_of

    compactor = make_compactor(load_config("gemini-cli-0.56.0-nightly.20260806,model.context_length=100000"),
                               ExtractiveSummariser())
    compactor.lower_window(40_000)
    assert compactor.resolution == resolution_of(compactor.config, 40_000)
    assert compactor.budgets is compactor.resolution.budgets and compactor.policy.budgets is compactor.budgets
    assert compactor.resolution.threshold_tokens == 20_000
