"""hermes-0.21-lean and hermes-0.21-legacy decide what lean-era Hermes decides.

Sources: NousResearch/hermes-agent ``agent/context_compressor.py`` and
``website/docs/developer-guide/context-compression-and-caching.md`` at 042431a7,
``hermes_cli/config_defaults.py`` at 00067189 (0.21.3). Each test names the
symbol or section it reproduces and, for the compressor and the guide, its
line(s), counted in the whole stored text of the file at 042431a7
(``config_defaults.py`` is cited by key). The rules are checked against a restatement of
Hermes's arithmetic and on hermeslab's own pipeline, policy and driver; there
is no installable package of this version to run.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.anchor_index import HEADING as ANCHOR_HEADING
from hermeslab.context.budget import derive_budgets
from hermeslab.context.compactor import Compactor
from hermeslab.context.driver import ContextDriver
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.lean_summary import RECOVERY_HEADING, USER_MESSAGES_HEADING
from hermeslab.context.lean_tail import STUB_MARK
from hermeslab.context.pipeline import CompressionState, compress
from hermeslab.context.policy import CompressionPolicy
from hermeslab.context.types import SummaryOutcome, is_summary_message
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.messages import text_of
from hermeslab.policies import hermes_lean
from hermeslab.policies.hermes_lean import LEAN, LEAN_OVERRIDES, LEGACY, LEGACY_OVERRIDES, POLICY
from hermeslab.policies.loading import load_config, preset_values

NEW_SWITCHES = ("tail_mode", "tail_max_context_share", "max_threshold_tokens", "floor_trigger_ratio",
                "lean_summary_sections", "summary_input_sampling", "demote_stale_tail_tools",
                "failure_cooldown_ladder", "fallback_summary_rule", "usage_anchor")


def cfg_of(overrides: dict) -> CompressionConfig:
    return dataclasses.replace(CompressionConfig(), **{key.split(".", 1)[1]: value for key, value in overrides.items()})


LEAN_CFG = cfg_of(LEAN_OVERRIDES)
LEGACY_CFG = cfg_of(LEGACY_OVERRIDES)


def hermes_trigger(window: int, max_tokens: int | None) -> int:
    """Hermes's trigger, restated: _effective_threshold_percent (2648-2653), _compute_threshold_tokens
    (2655-2690), then _apply_threshold_tokens_cap (2637-2646) with the 256,000 default of the guide's
    parameter table (259; config_defaults.py at 00067189 has 'threshold_tokens': None, line 539)."""
    percent = max(0.50, 0.75) if window < 512_000 else 0.50
    effective = window - (max_tokens or 0)
    if effective <= 0:
        effective = window
    proportional = int(effective * percent)
    floored = max(proportional, 64_000)
    cap85 = int(effective * 0.85)
    if floored > proportional and floored > cap85:
        floored = max(proportional, cap85)
    trigger = max(1, min(cap85, effective - 1)) if floored >= effective else floored
    return min(trigger, min(256_000, window))


# ---------------------------------------------------------------- the presets


def test_both_presets_are_listed_with_their_source_commit():
    assert [preset.name for preset in POLICY.presets] == [LEAN, LEGACY]
    assert POLICY.agent == "Hermes Agent" and hermes_lean.HERMES_COMMIT[:8] in POLICY.source
    assert hermes_lean.HERMES_VERSION == "0.21.3" and LEAN == "hermes-0.21-lean"
    assert all(citation.where for citation in POLICY.citations)


def test_the_presets_resolve_through_the_registry_over_seed():
    values = preset_values(LEAN)
    assert values["compression.preset"] == LEAN and values["compression.tail_mode"] == "lean"
    assert preset_values(LEGACY)["compression.tail_mode"] == "ratio"
    config = load_config(f"{LEAN},model.context_length=16000")
    assert config.compression.usage_anchor and config.compression.in_place


def test_seed_and_hermes_0_19_keep_every_new_switch_off():
    """The new switches default to today's behaviour, so seed and hermes-0.19 decide as before."""
    for preset in ("seed", "hermes-0.19"):
        cfg = load_config(preset).compression
        defaults = CompressionConfig()
        assert all(getattr(cfg, name) == getattr(defaults, name) for name in NEW_SWITCHES), preset
    assert CompressionConfig().tail_mode == "ratio" and CompressionConfig().fallback_summary_rule == "always"


def test_lean_and_legacy_differ_only_in_the_tail_mode_and_its_summary_rules():
    """tail_mode: 'lean' (__init__, 2699) adds _augment_summary_lean (3597-3608), _sample_summary_records
    (3665-3785) and _demote_stale_tail_tools (3536-3562)."""
    differing = {key for key in LEAN_OVERRIDES if LEAN_OVERRIDES[key] != LEGACY_OVERRIDES[key]}
    assert differing == {"compression.tail_mode", "compression.lean_summary_sections",
                         "compression.summary_input_sampling", "compression.demote_stale_tail_tools"}


def test_in_place_by_default():
    """config_defaults 'in_place': True (628); the guide's 'In-place compaction' (275-284): rows archived under the
    same id."""
    assert LEAN_CFG.in_place and LEGACY_CFG.in_place


# ---------------------------------------------------------------- when it fires


@pytest.mark.parametrize("window, trigger", [(16_000, 13_600), (64_000, 54_400), (70_000, 59_500),
                                             (128_000, 96_000), (200_000, 150_000), (400_000, 256_000),
                                             (1_000_000, 256_000)])
def test_trigger_at_known_windows(window, trigger):
    """_SMALL_CTX_THRESHOLD_PERCENT 0.75 (1204) below _SMALL_CTX_WINDOW_LIMIT 512K (1203); the 64K floor held
    to _MIN_CTX_TRIGGER_RATIO 0.85 (2612) where it binds; threshold_tokens 256,000 caps it."""
    assert derive_budgets(LEAN_CFG, window).threshold_tokens == trigger == hermes_trigger(window, None)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1_000, max_value=3_000_000), st.one_of(st.none(), st.integers(1, 200_000)))
def test_trigger_matches_hermes_arithmetic_for_any_window_and_output_cap(window, max_tokens):
    """_compute_threshold_tokens (effective window = context - max_tokens, 2676-2678) then the cap, for both
    modes."""
    for cfg in (LEAN_CFG, LEGACY_CFG):
        assert derive_budgets(cfg, window, max_tokens).threshold_tokens == hermes_trigger(window, max_tokens)


# ---------------------------------------------------------------- what stays verbatim


@pytest.mark.parametrize("window, lean, legacy", [(16_000, 3_200, 2_720), (128_000, 10_000, 19_200),
                                                  (1_000_000, 25_000, 51_200)])
def test_tail_budgets(window, lean, legacy):
    """tail_token_budget (2173-2184): lean max(10,000, min(25,000, 2.5% of the window)), legacy threshold
    x 0.20, both at most TAIL_MAX_CONTEXT_FRACTION 0.20 (946) of the window."""
    assert derive_budgets(LEAN_CFG, window).tail_token_budget == lean
    assert derive_budgets(LEGACY_CFG, window).tail_token_budget == legacy


@given(st.integers(min_value=1_000, max_value=3_000_000))
def test_neither_tail_nor_its_overshoot_passes_a_fifth_of_the_window(window):
    """The guide's Phase 2 (514-519): the budget and its 1.5x soft ceiling (_tail_soft_ceiling, 3105-3113)
    are capped at 20% of the window."""
    for cfg in (LEAN_CFG, LEGACY_CFG):
        budgets = derive_budgets(cfg, window)
        assert budgets.tail_token_budget <= max(1, int(window * 0.20))
        assert budgets.soft_tail_tokens <= max(1, int(window * 0.20))


def _round(n: int, size: int) -> list[dict]:
    return [{"role": "assistant", "content": f"step {n}", "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"output {n} " + "x" * size}]


def _session() -> list[dict]:
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "Fix issue #31337 in src/app/main.py please."}]
    for n in range(30):
        messages += _round(n, 8_000)
        if n == 3:
            messages.append({"role": "user", "content": "Also keep commit deadbeef12 and issue #4242 in mind."})
        if n == 25:
            messages.append({"role": "user", "content": "Now read the rest."})
    for n in range(30, 40):
        messages += _round(n, 2_000)
    return messages


def _compress(cfg: CompressionConfig, window: int, summariser=None, state=None):
    return compress(_session(), cfg=cfg, budgets=derive_budgets(cfg, window), state=state or CompressionState(),
                    summariser=summariser or ExtractiveSummariser())


def test_lean_summary_ends_with_index_user_words_and_a_way_back():
    """_augment_summary_lean (3597-3608): anchor index, the user messages verbatim, the session_search footer."""
    result = _compress(LEAN_CFG, 1_000_000)
    assert result.record["outcome"] == "compressed"
    summary = next(text_of(m) for m in result.messages if is_summary_message(m))
    assert ANCHOR_HEADING in summary and USER_MESSAGES_HEADING in summary and RECOVERY_HEADING in summary
    index = summary[summary.index(ANCHOR_HEADING):summary.index(USER_MESSAGES_HEADING)]
    assert "#4242" in index and "deadbeef12" in index
    assert "> Also keep commit deadbeef12 and issue #4242 in mind." in summary


def test_legacy_summary_has_none_of_it():
    result = _compress(LEGACY_CFG, 1_000_000)
    summary = next(text_of(m) for m in result.messages if is_summary_message(m))
    assert ANCHOR_HEADING not in summary and RECOVERY_HEADING not in summary
    assert "tail_demoted_indices" not in result.record


def test_lean_tail_keeps_the_newest_six_tool_rounds_and_stubs_older_long_ones():
    """_demote_stale_tail_tools (3536-3562) with _LEAN_TAIL_KEEP_TOOL_ROUNDS 6 (954) and
    _LEAN_TAIL_DEMOTE_MIN_CHARS 1,500 (955)."""
    result = _compress(LEAN_CFG, 1_000_000)
    assert result.record["tail_demoted_indices"]
    tools = [m for m in result.messages if m.get("role") == "tool"]
    assert all("x" * 2_000 in text_of(m) for m in tools[-6:])
    assert any(STUB_MARK in text_of(m) for m in tools[:-6])


def test_an_oversized_input_is_sampled_in_one_request():
    """_sample_summary_records (3665-3785): one summary call whose input is an even sample with gap markers."""
    seen = []

    class Recorder:
        def summarise(self, request):
            seen.append(request)
            return SummaryOutcome(body="## Goal\nfix")

    _compress(LEAN_CFG, 1_000_000, Recorder())
    assert len(seen) == 1 and seen[0].sampled_input
    _compress(LEGACY_CFG, 1_000_000, Recorder())
    assert not seen[1].sampled_input


# ---------------------------------------------------------------- when the summary fails


class Failed:
    """A summariser whose model calls failed with ``categories``; its deterministic fallback answered."""

    def __init__(self, *categories: str):
        self.categories = categories

    def summarise(self, request):
        return SummaryOutcome(body="## Goal\nfallback", fallback_used=True, error="failed",
                              failure_categories=self.categories)


@pytest.mark.parametrize("category", ["auth", "quota", "network", "overloaded", "empty_response"])
def test_terminal_failures_keep_the_transcript(category):
    """_TERMINAL_SUMMARY_FAILURES (769-805) and the guide (207-214): auth/quota, network, empty content,
    overload abort unchanged."""
    result = _compress(LEAN_CFG, 1_000_000, Failed(category))
    assert result.aborted and result.messages == _session()


def test_a_first_stall_keeps_the_transcript_and_a_repeated_one_takes_the_fallback():
    """The guide's 'Repeated stall -> deterministic fallback' (194-206; DETERMINISTIC_SUMMARY_ROUTE, 99)."""
    assert _compress(LEAN_CFG, 1_000_000, Failed("timeout")).aborted
    again = _compress(LEAN_CFG, 1_000_000, Failed("timeout"), CompressionState(stall_streak=1))
    assert again.record["outcome"] == "compressed" and again.fallback_used
    assert _compress(LEAN_CFG, 1_000_000, Failed("bad_request")).record["outcome"] == "compressed"


def test_seed_takes_the_fallback_whatever_failed():
    assert _compress(CompressionConfig(), 1_000_000, Failed("overloaded")).record["outcome"] == "compressed"


def test_cooldowns_climb_60_300_900_and_a_compaction_starts_them_again():
    """_TIMEOUT_COOLDOWN_LADDER (60, 300, 900) (811) per session (CompressionState), reset by a committed
    compaction."""
    now = [0.0]
    state = CompressionState()
    policy = CompressionPolicy(LEAN_CFG, derive_budgets(LEAN_CFG, 128_000), state, clock=lambda: now[0])
    aborted = _compress(LEAN_CFG, 1_000_000, Failed("timeout"))
    waits = []
    for _ in range(4):
        policy.record(aborted, "preflight")
        waits.append(state.cooldown_until - now[0])
        assert not policy.allows("preflight") and policy.allows("overflow")
    assert waits == [60.0, 300.0, 900.0, 900.0] and state.stall_streak == 4
    policy.record(_compress(LEAN_CFG, 1_000_000), "manual")
    assert state.failure_streak == 0 and state.stall_streak == 0


def test_seed_cools_down_a_flat_minute():
    now = [0.0]
    state = CompressionState()
    cfg = CompressionConfig()
    policy = CompressionPolicy(cfg, derive_budgets(cfg, 128_000), state, clock=lambda: now[0])
    aborted = _compress(LEAN_CFG, 1_000_000, Failed("timeout"))
    for _ in range(3):
        policy.record(aborted, "preflight")
        assert state.cooldown_until == 60.0


# ---------------------------------------------------------------- the usage anchor


def _driver(preset: str = LEAN, window: int = 16_000) -> ContextDriver:
    config = load_config(f"{preset},model.context_length={window}")
    return ContextDriver(Compactor(config, ExtractiveSummariser()), context_length=window)


def _chat(turns: int, words: int = 150) -> list[dict]:
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Audit the code."}]
    for n in range(turns):
        messages += _round(n, words * 4)[:1] + [{"role": "tool", "tool_call_id": f"c{n}", "content": "w " * words}]
    return messages


def test_without_a_reading_an_estimate_over_the_threshold_waits_one_request():
    """The guide (118-125): without an anchor, a whole-context estimate over the threshold waits one request."""
    context = _driver()
    history = _chat(150)
    assert context.measure(history, None) >= context.compactor.budgets.threshold_tokens
    context.begin_turn("Audit the code.")
    assert context.preflight(history, None) is None
    assert context.before_call(history, None) is None


def test_the_anchor_is_the_reading_plus_only_what_was_added_since():
    """The guide (109-112, 136-138): last prompt + completion tokens plus a rough estimate of the messages
    appended since (the first appended assistant already counted by the completion tokens)."""
    context = _driver()
    history = _chat(2)
    context.observe(100, 1_000, completion=50, history_length=len(history))
    assert context.anchored(history) == 1_050
    reply = {"role": "assistant", "content": "long reply " * 200}
    assert context.anchored(history + [reply]) == 1_050
    tool = {"role": "user", "content": "more " * 400}
    added = context.compactor.estimate_request([tool], None)
    assert context.anchored(history + [reply, tool]) == 1_050 + added
    assert context.anchored(history[:-1]) is None  # a rewound history is not the one priced


def test_an_anchor_over_the_threshold_compresses_and_a_compaction_clears_it():
    context = _driver()
    history = _chat(150)
    threshold = context.compactor.budgets.threshold_tokens
    context.begin_turn("Audit the code.")
    context.observe(100, threshold + 10, completion=0, history_length=len(history))
    compaction = context.before_call(history, None, first=False)
    assert compaction is not None and compaction.changed
    assert context.anchored(compaction.messages) is None
    assert context.before_call(compaction.messages + _chat(150)[2:], None) is None  # waits for a reading again


def test_a_provider_that_reports_no_usage_is_measured_by_estimate():
    """The guide (127-128): once a response omits usage, the heuristic fallback remains available."""
    context = _driver()
    history = _chat(150)
    context.begin_turn("Audit the code.")
    context.observe(100, None)
    assert context.before_call(history, None) is not None


def test_an_under_threshold_anchor_holds_back_a_noisy_estimate():
    context = _driver()
    history = _chat(150)
    assert context.measure(history, None) >= context.compactor.budgets.threshold_tokens
    context.observe(100, 500, completion=10, history_length=len(history))
    assert context.before_call(history, None) is None


def test_the_trigger_rule_is_named_when_the_cap_or_the_floor_rule_decides():
    """explain_threshold names max_threshold_tokens and floor_trigger_ratio when they set the trigger."""
    from hermeslab.context.budget import explain_threshold
    from hermeslab.policies.running import resolution_of

    def rule(window: int) -> str:
        return explain_threshold(resolution_of(load_config(f"{LEAN},model.context_length={window}")))

    assert "max_threshold_tokens cap of 256,000" in rule(1_000_000)
    assert "floor_trigger_ratio holds it at 0.85" in rule(16_000)
    assert "small-window rule" in rule(128_000)
