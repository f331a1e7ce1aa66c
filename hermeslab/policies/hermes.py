"""Hermes Agent 0.19.0's own compaction decisions, faults included (the ``hermes-0.19`` preset).

Every switch of ``CompressionConfig`` below its "behaviour switches" line
chooses between Hermes's behaviour and hermeslab's fix; this preset takes
Hermes's side of each. Parity is measured against the installed package
(``hermeslab reference``, ``benchmarks/session_parity.py``).
"""

from __future__ import annotations

from typing import Any

from .base import Policy, Preset

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
)
