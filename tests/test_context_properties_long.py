"""The long property run of the ``hermes-0.19`` preset, in a file of its own so a parallel test run can give it a
worker while the other compression properties (``test_context_properties``) run on another."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings

import test_context_properties as properties
from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import CompressionState, compress
from test_context_conversations import FixedSummariser, conversations


@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.data_too_large])
@given(messages=conversations(), window=properties.WINDOWS)
def test_thorough_hermes_preset_invariants(messages, window):
    """The long run, on the cheaper rough estimator."""
    cfg = properties._cfg("hermes-0.19")
    snapshot = copy.deepcopy(messages)
    result = compress(messages, cfg=cfg, budgets=derive_budgets(cfg, window), state=CompressionState(),
                      summariser=FixedSummariser())
    properties.check_result("hermes-0.19", messages, snapshot, result, cfg, properties.opening_task(messages))
