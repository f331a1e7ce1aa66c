"""Hermes Agent as it compacts today: the lean tail mode (its default) and the legacy one, beside 0.19.

Lean-era Hermes still runs the four-phase pipeline hermeslab reproduces for
0.19 (prune, head, tail, summary), with different rules for what the model
sees and when:

* the verbatim tail is 2.5% of the window, clamped to 10,000..25,000 tokens
  (lean) or ``target_ratio`` of the trigger (legacy), and in both modes never
  over 20% of the window; in lean mode long tool output in the tail older than
  its newest six tool rounds becomes a stub;
* in lean mode every summary ends with an anchor index of exact identifiers,
  the summarised user messages verbatim and a pointer to the session's
  history, and an oversized summariser input is sampled evenly (one call per
  compaction);
* it fires at 50% of the window, at least 75% below 512K windows, with the
  64K floor held to 85% of the window where it binds, and never above 256K;
  every automatic check measures the provider's last reading plus only what
  was added since, and waits one request when there is no reading to go by;
* a failed summary keeps the transcript on a terminal failure or a first
  stall, takes the deterministic fallback on a repeated stall or any other
  failure, and cools compaction down for 60, then 300, then 900 seconds;
  an overflow the provider proves is compressed past the cooldown;
* compaction rewrites the session in place, the old rows archived under the
  same session id.

Everything else is carried over from ``hermes-0.19`` unchanged: those
switches were not re-read at this commit. The sources are read, not run: no
installable package of this version is reachable here, so Hermes's own texts
cannot be read at run time and every added text is hermeslab's own wording
(``hermes_texts`` off). ``docs/presets.md`` cites every rule and number.
"""

from __future__ import annotations

from typing import Any

from .base import Citation, Policy, Preset
from .hermes import POLICY as HERMES_0_19

#: The release the newest readable sources are closest to (``hermes_cli/__init__.py`` at ``VERSION_COMMIT``).
HERMES_VERSION = "0.21.3"
#: The commit whose ``agent/context_compressor.py`` and compression guide were read for the lean rules.
HERMES_COMMIT = "042431a70ce97d7fdeb706f2c79b3df7543a97a0"
#: The commit whose ``pyproject.toml``, ``hermes_cli/__init__.py`` and ``hermes_cli/config_defaults.py`` were read.
VERSION_COMMIT = "00067189dfecf833d4d009c2dd977ae85cf800e0"
LEAN = "hermes-0.21-lean"
LEGACY = "hermes-0.21-legacy"
SOURCE = (f"NousResearch/hermes-agent @ {HERMES_COMMIT[:8]} (agent/context_compressor.py, "
          f"website/docs/developer-guide/context-compression-and-caching.md); "
          f"{HERMES_VERSION} defaults @ {VERSION_COMMIT[:8]} (hermes_cli/config_defaults.py)")

_COMPRESSOR = f"agent/context_compressor.py @ {HERMES_COMMIT[:8]}"
_GUIDE = f"website/docs/developer-guide/context-compression-and-caching.md @ {HERMES_COMMIT[:8]}"
_DEFAULTS = f"hermes_cli/config_defaults.py @ {VERSION_COMMIT[:8]}, DEFAULT_CONFIG['compression']"

#: Switches of ``hermes-0.19`` this version is taken to keep, with 0.19's values: not re-read at ``HERMES_COMMIT``.
#: The rules below replace the ones that were re-read. Among those kept, Hermes's summary frame is longer still at
#: this commit; 0.19's length is the nearer of hermeslab's two.
CARRIED_FROM_0_19: dict[str, Any] = dict(HERMES_0_19.presets[0].overrides)

#: What both tail modes share at ``HERMES_COMMIT``: triggers, failure handling, storage.
_SHARED: dict[str, Any] = {
    **CARRIED_FROM_0_19,
    "compression.threshold": 0.50,
    "compression.small_window_limit": 512_000,
    "compression.small_window_threshold": 0.75,
    "compression.min_threshold_tokens": 64_000,
    "compression.floor_trigger_ratio": 0.85,
    "compression.min_trigger_ratio": 0.85,
    "compression.max_trigger_ratio": None,
    "compression.max_threshold_tokens": 256_000,
    "compression.target_ratio": 0.20,
    "compression.protect_first_n": 3,
    "compression.protect_last_n": 20,
    "compression.tail_floor_cap": 8,
    "compression.tail_max_context_share": 0.20,
    "compression.summary_max_tokens": 10_000,
    "compression.summary_context_share": 0.05,
    "compression.usage_anchor": True,
    "compression.defer_to_real_usage": False,
    "compression.failure_cooldown_ladder": [60.0, 300.0, 900.0],
    "compression.fallback_summary_rule": "after_repeated_stall",
    "compression.abort_keeps_original": True,
    "compression.overflow_obeys_breaker": False,
    "compression.max_overflow_attempts": 3,
    "compression.in_place": True,
    # No installable package of this version: hermeslab's wording throughout.
    "compression.hermes_texts": False,
}

#: The lean preset's dotted overrides, laid over ``seed``'s full list.
LEAN_OVERRIDES: dict[str, Any] = {
    **_SHARED,
    "compression.tail_mode": "lean",
    "compression.lean_summary_sections": True,
    "compression.summary_input_sampling": True,
    "compression.demote_stale_tail_tools": True,
}

#: The legacy preset's: the ratio tail, and none of lean mode's summary sections, sampling or stubs.
LEGACY_OVERRIDES: dict[str, Any] = {
    **_SHARED,
    "compression.tail_mode": "ratio",
    "compression.lean_summary_sections": False,
    "compression.summary_input_sampling": False,
    "compression.demote_stale_tail_tools": False,
}


def _c(rule: str, hermeslab: str, where: str) -> Citation:
    return Citation(rule, hermeslab, where)


CITATIONS: tuple[Citation, ...] = (
    _c("Lean is the default tail mode; legacy keeps threshold x target_ratio", "compression.tail_mode",
       f"{_DEFAULTS} 'tail_mode': 'lean' 546, 'target_ratio' 541; {_COMPRESSOR} ContextCompressor.__init__ 2692-2700 (tail_mode='lean' "
       "at 2699, 2704), tail_token_budget property 2173-2188"),
    _c("Lean tail: 2.5% of the window clamped to 10,000..25,000 tokens", "context.lean_tail.lean_tail_tokens",
       f"{_COMPRESSOR} LEAN_TAIL_FLOOR_TOKENS 941, LEAN_TAIL_CAP_TOKENS 942, tail_token_budget property "
       "2173-2188 (0.025 at 2178)"),
    _c("Either tail never over 20% of the window, nor its 1.5x overshoot", "compression.tail_max_context_share",
       f"{_COMPRESSOR} TAIL_MAX_CONTEXT_FRACTION 946, tail_token_budget property 2181-2182, "
       f"_tail_soft_ceiling 3105-3113; {_GUIDE} Phase 2, 501-523"),
    _c("Tail tool results older than the newest 6 rounds and >= 1,500 chars become a stub",
       "context.lean_tail.demote_stale_tail_tools",
       f"{_COMPRESSOR} _LEAN_TAIL_KEEP_TOOL_ROUNDS 954, _LEAN_TAIL_DEMOTE_MIN_CHARS 955, "
       "_demote_stale_tail_tools 3536-3562"),
    _c("Anchor index: 7 pattern categories, per-category caps, 7,000-char budget, most frequent first",
       "context.anchor_index", f"{_COMPRESSOR} _LEAN_ANCHOR_BUDGET_CHARS 1079, _ANCHOR_PATTERNS "
                               "1080-1088, _ANCHOR_NOISE 1089-1091, _build_anchor_index 1094-1125"),
    _c("Every real user message verbatim, newest first, 24,000 chars, 4,000 per message",
       "context.lean_summary.user_messages_section",
       f"{_COMPRESSOR} _LEAN_USER_MESSAGES_BUDGET_CHARS 948, _LEAN_USER_MESSAGE_MAX_CHARS 949, "
       "_build_verbatim_user_section 1004-1032"),
    _c("Recovery footer naming session_search; sections appended once, in this order, lean mode only",
       "context.lean_summary.augment_summary",
       f"{_COMPRESSOR} _build_recovery_footer 1035-1049, _augment_summary_lean 3597-3608"),
    _c("One summary call per compaction; an input over 160,000 chars sampled in 8 even slices with markers",
       "context.record_sampling.sample_records",
       f"{_COMPRESSOR} _SUMMARY_INPUT_MAX_CHARS 834, _SAMPLED_INPUT_SLICES 3632, _sample_summary_records "
       "3665-3785, _bound_oversized_record 3634-3649; the comment above _SUMMARY_ROUTE_PIN, 52-68 (#96603 at 68)"),
    _c("Threshold 0.50, floored at 0.75 below 512K windows", "compression.small_window_limit",
       f"{_COMPRESSOR} _SMALL_CTX_WINDOW_LIMIT 1203, _SMALL_CTX_THRESHOLD_PERCENT 1204, "
       f"_effective_threshold_percent 2648-2653; {_DEFAULTS} 'threshold': 0.50 at 536"),
    _c("64K floor held to 85% of the window where it binds; 85% when the window is unreachable",
       "compression.floor_trigger_ratio", f"{_COMPRESSOR} _MIN_CTX_TRIGGER_RATIO 2612, "
       "_compute_threshold_tokens 2655-2690"),
    _c("Trigger capped at threshold_tokens 256,000 (clamped to the window)", "compression.max_threshold_tokens",
       f"{_GUIDE} parameter table 259 ('threshold_tokens' default 256000) and 37; {_COMPRESSOR} "
       "_effective_threshold_cap 2561-2564, "
       "_apply_threshold_tokens_cap 2637-2646"),
    _c("Usage anchor: last prompt + completion tokens plus a rough estimate of messages added since; "
       "no anchor: an estimate over the threshold waits one request", "compression.usage_anchor",
       f"{_GUIDE} 'Token accounting: provider anchors and explicit heuristic fallbacks', 107-170"),
    _c("Failed or stalled summary: cooldown 60 -> 300 -> 900 s, per session, persisted",
       "compression.failure_cooldown_ladder",
       f"{_COMPRESSOR} _TIMEOUT_COOLDOWN_LADDER 811, _next_timeout_cooldown 814-821; {_GUIDE} 'Failure "
       "cooldown and provider-proven overflow', 172-221"),
    _c("Terminal failures (auth/quota, network, empty, overloaded) abort keeping the transcript; a repeated "
       "stall takes the deterministic fallback", "compression.fallback_summary_rule",
       f"{_COMPRESSOR} _TERMINAL_SUMMARY_FAILURES 769-805, _classify_summary_failure 734-764, "
       f"DETERMINISTIC_SUMMARY_ROUTE 99; {_GUIDE} same section, 194-214"),
    _c("Provider-proven overflow: one bounded attempt past the cooldown (max_attempts 3)",
       "compression.overflow_obeys_breaker", f"{_GUIDE} same section, 215-220; {_DEFAULTS} 'max_attempts': 3 at 553"),
    _c("Summary cap min(5% of the window, 10,000)", "compression.summary_context_share",
       f"{_COMPRESSOR} _SUMMARY_TOKENS_CEILING 827, max_summary_tokens property 2190-2194"),
    _c("Compaction in place by default; compacted rows archived under the same session id",
       "compression.in_place", f"{_DEFAULTS} 'in_place': True at 628; {_GUIDE} 'In-place compaction', 275-284"),
    _c("protect_first_n 3, protect_last_n 20, 8-message tail floor", "compression.tail_floor_cap",
       f"{_DEFAULTS} 'protect_first_n' 601, 'protect_last_n' 547; {_COMPRESSOR} __init__ defaults 2693; "
       "_MAX_TAIL_MESSAGE_FLOOR 1184"),
    _c("min_tail_user_messages 1 and tail_assistant_max_chars 0 are the defaults: the single last-user anchor "
       "and no cut, which is what hermes-0.19's rules already do", "(no switch)",
       f"{_DEFAULTS} 'min_tail_user_messages' 550 (no 'tail_assistant_max_chars' key at this commit); "
       f"{_GUIDE} parameter table 256-273 (264, 265); {_COMPRESSOR} __init__ 2699-2700"),
    _c("Version 0.21.3", "HERMES_VERSION",
       f"hermes_cli/__init__.py @ {VERSION_COMMIT[:8]} __version__ 6 (__release_date__ 7); pyproject.toml"),
)


POLICY = Policy(
    agent="Hermes Agent",
    source=SOURCE,
    presets=(
        Preset(LEAN, LEAN_OVERRIDES,
               "Hermes's default today: fires at 50% (75% below 512K windows, never above 256K tokens); keeps a "
               "2.5%-of-window tail (10K-25K) and one summary ending in an anchor index, the user's own words "
               "and a way back."),
        Preset(LEGACY, LEGACY_OVERRIDES,
               "Hermes today in legacy tail mode: the same triggers and failure rules, a tail of 20% of the "
               "trigger (never over 20% of the window), a plain summary."),
    ),
    fidelity="reading",
    citations=CITATIONS,
)
