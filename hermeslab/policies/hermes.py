"""Hermes Agent 0.19.0's own compaction decisions, faults included (the ``hermes-0.19`` preset).

Every switch of ``CompressionConfig`` below its "behaviour switches" line
chooses between Hermes's behaviour and hermeslab's fix; this preset takes
Hermes's side of each. Parity is measured against the installed package
(``hermeslab reference``, ``benchmarks/session_parity.py``).
"""

from __future__ import annotations

from typing import Any

from .base import Citation, Policy, Preset

NAME = "hermes-0.19"
VERSION = "0.19.0"

_OVERRIDES: dict[str, Any] = {
    "compression.small_window_limit": 512_000,
    "compression.min_trigger_ratio": 0.85,
    "compression.max_trigger_ratio": None,
    "compression.estimator": "rough",
    "compression.summary_max_tokens": 10_000,
    "compression.summary_context_share": 0.05,
    # Hermes judges a compaction only by the next real prompt reading.
    "compression.min_saving": 0.0,
    "compression.in_place": True,
    "compression.summary_aware_head": False,
    "compression.cap_reply_anchor": False,
    "compression.fit_tail_to_budget": False,
    "compression.keep_latest_user": False,
    "compression.prune_head": True,
    "compression.abort_keeps_original": False,
    "compression.keep_original_task": False,
    "compression.missing_results": "drop",
    "compression.system_note": True,
    "compression.strip_old_images": True,
    "compression.rewrite_unshrunk_args": True,
    "compression.name_duplicate_source": False,
    "compression.tail_after_fixed_cost": False,
    "compression.summarise_whole_span": False,
    "compression.fit_on_overflow": False,
    "compression.retry_overflow_that_fits": False,
    "compression.overflow_allowance_per_call": False,
    "compression.system_in_pipeline": False,
    "compression.reinsert_latest_user": False,
    "compression.refuse_no_gain": False,
    "compression.breaker_rearms": True,
    "compression.overflow_obeys_breaker": True,
    "compression.ground_task_snapshot": True,
    "compression.apply_any_change": True,
    "compression.judge_by_estimate": False,
    "compression.merged_summary_last": True,
    "compression.usage_gap_settles_verdict": True,
    "compression.summary_fits_window": False,
    "compression.drop_when_summary_cannot_fit": False,
    "compression.strike_when_nothing_to_summarise": True,
    "compression.withdraw_unanswered_input": False,
    "compression.long_summary_frame": True,
    "compression.hermes_texts": True,
    "compression.normalise_requests": True,
    "compression.defer_to_real_usage": True,
    "compression.pressure_every_call": True,
    "compression.pressure_counts_against_overflow": True,
    "compression.preflight_gate": True,
    "compression.preflight_system_as_text": True,
    "compression.summary_fact_context": False,
}


POLICY = Policy(
    agent="Hermes Agent",
    source=f"NousResearch/hermes-agent {VERSION} (hermes-agent on PyPI)",
    presets=(Preset(NAME, _OVERRIDES, "Hermes's own decisions, faults included: head, pruned middle summarised, "
                                      "token-budget tail."),),
    fidelity="parity",
    citations=(
        Citation("Compaction fires at 50% of the window by default", "seed's compression.threshold: 0.50",
                 "agent/context_compressor.py 1309"),
        Citation("The threshold is floored at 64,000 tokens", "seed's compression.min_threshold_tokens: 64_000",
                 "agent/model_metadata.py 194; agent/context_compressor.py 1296-1297"),
        Citation("Windows under 512,000 tokens fire at no less than 75%",
                 "compression.small_window_limit: 512_000, seed's small_window_threshold: 0.75",
                 "agent/context_compressor.py 316-317, 1261-1262"),
        Citation("When the floor meets the input window, fire at 85% of it (below the window), with no ceiling",
                 "compression.min_trigger_ratio: 0.85, max_trigger_ratio: None",
                 "agent/context_compressor.py 1229, 1302-1304"),
        Citation("The input window is the context length less max_tokens, when that is positive",
                 "threshold over the effective window", "agent/context_compressor.py 1293-1295"),
        Citation("Head: 3 messages after the system prompt; tail floor 20 for the prune, capped at 8 for the cut",
                 "seed's protect_first_n: 3, protect_last_n: 20, tail_floor_cap: 8",
                 "agent/context_compressor.py 1310-1311, 307, 3205"),
        Citation("Tail budget: 20% of the threshold, with a 1.5x soft ceiling in the tail cut",
                 "seed's target_ratio: 0.20, soft_tail_factor: 1.5",
                 "agent/context_compressor.py 1312, 1375-1376, 3214"),
        Citation("Tokens estimated as characters over four, rounded up", "compression.estimator: rough",
                 "agent/model_metadata.py 2600-2609; agent/context_compressor.py 281"),
        Citation("Summary budget: 20% of what is summarised, at least 2,000 tokens",
                 "seed's summary_ratio: 0.20, summary_min_tokens: 2_000",
                 "agent/context_compressor.py 269, 271, 1815-1824"),
        Citation("Summary cap: the smaller of 5% of the context length and 10,000 tokens",
                 "compression.summary_context_share: 0.05, summary_max_tokens: 10_000",
                 "agent/context_compressor.py 275, 1377-1379"),
        Citation("Prune: outputs under 200 characters are left alone; call arguments over 500 characters have "
                 "their string leaves cut to 200", "seed's prune_min_chars, shrink_args_over, shrink_leaf_chars",
                 "agent/context_compressor.py 1737, 1775-1776, 1800, 515"),
        Citation("The prune's one-liners and argument shrinking run over every message before the boundary, "
                 "the protected head included", "compression.prune_head: True",
                 "agent/context_compressor.py 1748, 1791"),
        Citation("Two ineffective (or fallback) compactions in a row block automatic compaction",
                 "seed's compression.ineffective_limit: 2", "agent/context_compressor.py 1629-1631"),
        Citation("Too few messages (the head and four more at most) is a no-op that counts as a strike",
                 "compression.strike_when_nothing_to_summarise: True", "agent/context_compressor.py 3370-3379"),
        Citation("An aborted summary returns the pruned list, not the original",
                 "compression.abort_keeps_original: False", "agent/context_compressor.py 3393, 3501-3538"),
        Citation("Compaction rewrites the conversation in place by default", "compression.in_place: True",
                 "hermes_cli/config.py 1515"),
    ),
)
