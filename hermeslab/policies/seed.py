"""hermeslab's own policy: Hermes's four-phase summary pipeline with hermeslab's fixes (the ``seed`` preset).

A preset is a full list of dotted overrides, not a diff: ``seed``'s list names
every value a preset may set, every other preset is laid over it, and so
applying ``seed`` to a config that had another preset applied restores every
compression value, whatever the order presets and overrides came in.
"""

from __future__ import annotations

from typing import Any

from .base import Policy, Preset

NAME = "seed"

VALUES: dict[str, Any] = {
    "compression.preset": "seed",
    "compression.threshold": 0.50,
    "compression.min_threshold_tokens": 64_000,
    # One rule for every window size keeps the trigger monotonic in the window.
    "compression.small_window_limit": None,
    "compression.small_window_threshold": 0.75,
    # Exact counts read 6-9% under chars/4, so 0.80 of the window in exact tokens is about where
    # Hermes's 0.85 in chars/4 fires; the ceiling keeps the floor from firing later than that.
    "compression.min_trigger_ratio": 0.80,
    "compression.max_trigger_ratio": 0.80,
    "compression.target_ratio": 0.20,
    "compression.soft_tail_factor": 1.5,
    "compression.protect_first_n": 3,
    "compression.protect_last_n": 20,
    "compression.tail_floor_cap": 8,
    "compression.estimator": "tiktoken",
    "compression.prune_min_chars": 200,
    "compression.shrink_args_over": 500,
    "compression.shrink_leaf_chars": 200,
    "compression.summary_ratio": 0.20,
    "compression.summary_min_tokens": 2_000,
    "compression.summary_max_tokens": 12_000,
    # At 0.05 every window under 40K capped the summary under its 2,000-token minimum, so a small
    # window's summary could not grow with what it replaces.
    "compression.summary_context_share": 0.10,
    "compression.min_saving": 0.10,
    "compression.ineffective_limit": 2,
    "compression.in_place": False,
    "compression.summary_aware_head": True,
    "compression.cap_reply_anchor": True,
    "compression.fit_tail_to_budget": True,
    "compression.keep_latest_user": True,
    "compression.prune_head": False,
    "compression.abort_keeps_original": True,
    "compression.keep_original_task": True,
    "compression.missing_results": "stub",
    "compression.system_note": False,
    "compression.strip_old_images": False,
    "compression.rewrite_unshrunk_args": False,
    "compression.name_duplicate_source": True,
    "compression.tail_after_fixed_cost": True,
    "compression.summarise_whole_span": True,
    "compression.fit_on_overflow": True,
    "compression.retry_overflow_that_fits": True,
    "compression.overflow_allowance_per_call": True,
    "compression.system_in_pipeline": True,
    "compression.reinsert_latest_user": True,
    "compression.refuse_no_gain": True,
    "compression.breaker_rearms": False,
    "compression.overflow_obeys_breaker": False,
    "compression.ground_task_snapshot": False,
    "compression.apply_any_change": False,
    "compression.judge_by_estimate": True,
    "compression.merged_summary_last": False,
    "compression.usage_gap_settles_verdict": False,
    "compression.summary_fits_window": True,
    "compression.drop_when_summary_cannot_fit": True,
    "compression.strike_when_nothing_to_summarise": False,
    "compression.withdraw_unanswered_input": True,
    "compression.long_summary_frame": False,
    "compression.hermes_texts": False,
    "compression.normalise_requests": False,
    "compression.defer_to_real_usage": False,
    "compression.pressure_every_call": False,
    "compression.pressure_counts_against_overflow": False,
    "compression.preflight_gate": False,
    "compression.preflight_system_as_text": False,
    "compression.summary_fact_context": True,
}


POLICY = Policy(
    agent="hermeslab",
    source="hermeslab (this repository): the pipeline of hermeslab.context, defaults of core.compression_config",
    presets=(Preset(NAME, VALUES, "Hermes's four-phase summary pipeline with hermeslab's fixes; fires at 50% of the "
                                  "window, floored at 64K tokens, never above 80% of the window."),),
    fidelity="parity",
)
