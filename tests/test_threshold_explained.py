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
