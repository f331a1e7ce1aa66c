"""The one-line account of where compression fires, which the chat front ends print when a config changes."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.budget import derive_budgets, explain_threshold
from hermeslab.core.config import load_config
from hermeslab.core.presets import PRESETS


@settings(max_examples=150, deadline=None)
@given(preset=st.sampled_from(sorted(PRESETS)), window=st.integers(2_000, 400_000),
       threshold=st.sampled_from([0.3, 0.5, 0.6, 0.9]), max_tokens=st.one_of(st.none(), st.integers(1, 40_000)))
def test_the_line_states_the_threshold_derive_budgets_uses(preset, window, threshold, max_tokens):
    config = load_config(preset).with_overrides({"model.context_length": window, "model.max_tokens": max_tokens,
                                                 "compression.threshold": threshold})
    line = explain_threshold(config)
    budgets = derive_budgets(config.compression, window, max_tokens)
    stated = int(re.match(r"compression fires at ([\d,]+) tokens?", line).group(1).replace(",", ""))
    assert stated == budgets.threshold_tokens
    assert f"of the {window:,}-token window): " in line and len(line.splitlines()) == 1


def test_a_fraction_the_floor_overrides_is_named_with_the_window_where_it_starts_to_act():
    below = load_config("seed,model.context_length=100000,compression.threshold=0.3")
    assert explain_threshold(below).endswith("seed's min_threshold_tokens floor of 64,000 wins over 0.3 of the "
                                             "window below windows of 213,334 tokens")
    above = below.with_overrides({"model.context_length": 213_334})
    assert explain_threshold(above).endswith("compression.threshold 0.3 of the window decides")
    ceiling = load_config("seed,model.context_length=65536,compression.threshold=0.3")
    assert "seed's max_trigger_ratio ceiling holds compression at 0.8" in explain_threshold(ceiling)
    off = load_config("seed,compression.enabled=false")
    assert explain_threshold(off) == "automatic compression is off (compression.enabled is false)"
