"""Named starting points for the compression knobs, and the check that every knob is usable.

A preset is a full list of dotted overrides, not a diff: applying ``seed`` to a
config that had ``hermes-0.19`` applied restores every compression value, so
the order in which presets and overrides are applied is never ambiguous.
"""

from __future__ import annotations

from typing import Any

from .config import CompressionConfig, Config, ConfigError
from .openhands_presets import STRATEGIES as OPENHANDS_STRATEGIES, openhands_presets, validate_openhands_settings
from .zoo_presets import STRATEGIES as ZOO_STRATEGIES, zoo_presets

_SEED: dict[str, Any] = {
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

_HERMES_0_19: dict[str, Any] = {
    **_SEED,
    "compression.preset": "hermes-0.19",
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

#: Dotted config overrides per preset name.
PRESETS: dict[str, dict[str, Any]] = {"seed": _SEED, "hermes-0.19": _HERMES_0_19}
PRESETS.update(openhands_presets(_SEED))
PRESETS.update(zoo_presets(_SEED))

_CHOICES = {
    "estimator": ("tiktoken", "rough"),
    "missing_results": ("stub", "drop"),
    "strategy": ("summary", "observation_masking", "sliding_window", *OPENHANDS_STRATEGIES, *ZOO_STRATEGIES),
    "summariser": ("llm", "extractive"),
}


def apply_preset(config: Config, name: str) -> Config:
    """A copy of ``config`` with every compression value taken from preset ``name``."""
    updated = config.with_overrides({"compression.preset": name})
    validate_compression_config(updated.compression)
    return updated


def validate_compression_config(cfg: CompressionConfig) -> None:
    """Raise ConfigError naming the first compression value the pipeline cannot use."""
    for key, allowed in _CHOICES.items():
        value = getattr(cfg, key)
        if value not in allowed:
            raise ConfigError(f"compression.{key}: expected one of {', '.join(allowed)}, got {value!r}")
    for key in ("threshold", "small_window_threshold", "min_trigger_ratio", "target_ratio", "summary_ratio",
                "summary_context_share"):
        value = getattr(cfg, key)
        if not 0 < value <= 1:
            raise ConfigError(f"compression.{key}: expected a fraction in (0, 1], got {value!r}")
    ceiling = cfg.max_trigger_ratio
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float))
                                or not 0 < ceiling <= 1):
        raise ConfigError(f"compression.max_trigger_ratio: expected a fraction in (0, 1] or null, got {ceiling!r}")
    if not 0 <= cfg.min_saving < 1:
        raise ConfigError(f"compression.min_saving: expected a fraction in [0, 1), got {cfg.min_saving!r}")
    if cfg.soft_tail_factor < 1:
        raise ConfigError(f"compression.soft_tail_factor: must be at least 1, got {cfg.soft_tail_factor!r}")
    for key in ("protect_first_n", "protect_last_n", "tail_floor_cap", "min_threshold_tokens", "prune_min_chars",
                "shrink_args_over", "shrink_leaf_chars", "summary_min_tokens", "summary_max_tokens",
                "max_overflow_attempts"):
        value = getattr(cfg, key)
        if value < 0:
            raise ConfigError(f"compression.{key}: must not be negative, got {value!r}")
    validate_openhands_settings(cfg)
    if cfg.ineffective_limit < 1:
        raise ConfigError(f"compression.ineffective_limit: must be at least 1, got {cfg.ineffective_limit!r}")
    if cfg.small_window_limit is not None and (isinstance(cfg.small_window_limit, bool)
                                               or not isinstance(cfg.small_window_limit, int)):
        raise ConfigError(f"compression.small_window_limit: expected an integer or null, got {cfg.small_window_limit!r}")
