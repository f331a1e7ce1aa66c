"""Zed's agent auto-compaction against its source: zed-industries/zed @ 00b6ce1c, crates/agent/src/thread.rs and
crates/agent_settings/src/agent_settings.rs (functions of thread.rs past its first lines are cited by name)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.errors import ConfigError
from hermeslab.policies.loading import load_config
from hermeslab.policies.zed import (NAME, OPENING, PERCENTAGE, POLICY, RETAINED_USER_BYTES, TOKENS_REMAINING,
                                    TOKENS_USED, retained_user_messages, zed_compact)
from policy_checks import Failing, Recording, checked_pass, checked_trigger, loaded_zoo_input
from test_context_conversations import conversations


def _config(window: int, **overrides):
    return load_config(NAME, {"model.context_length": window, **overrides})


def _trigger(window: int, **overrides) -> int:
    return checked_trigger(POLICY.triggers, NAME, window, overrides)


def _zoo(window: int = 1_000_000, summariser=None) -> ZooInput:
    return loaded_zoo_input(NAME, window, summariser)


def _call(call_id: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}


def _session() -> list[dict]:
    return [{"role": "system", "content": "You are the Zed agent."},
            {"role": "user", "content": "old user"}, _call("g1"),
            {"role": "tool", "tool_call_id": "g1", "content": "match"},
            {"role": "assistant", "content": "old assistant"},
            {"role": "user", "content": "second request"}, {"role": "assistant", "content": "done"}]


# ---------------------------------------------------------------- when it fires


def test_the_default_is_ninety_percent_of_the_whole_window():
    """agent_settings.rs 156 (``Percentage(0.9)``); thread.rs auto_compact_threshold_token_count
    (``ceil(max_token_count × percent)``), whose test compacts at 900,000 of 1,000,000 and not at 899,999."""
    assert _trigger(1_000_000) == 900_000
    assert _trigger(200_000) == 180_000
    assert _trigger(100_001) == 90_001  # 90,000.9 rounded up


def test_tokens_used_and_tokens_remaining():
    """agent_settings.rs 143-151 and 195-196; thread.rs auto_compact_threshold_token_count: the count itself, or
    ``max - count + 1`` (its test: 980,001 of 1,000,000 compacts with 20,000 remaining, 980,000 does not)."""
    assert _trigger(1_000_000, **{"compression.strategy": TOKENS_USED,
                                  "compression.min_threshold_tokens": 100_000}) == 100_000
    assert _trigger(1_000_000, **{"compression.strategy": TOKENS_REMAINING,
                                  "compression.min_threshold_tokens": 20_000}) == 980_001
    assert _trigger(100_000, **{"compression.strategy": TOKENS_REMAINING,
                                "compression.min_threshold_tokens": 500_000}) == 1


def test_windows_under_80k_never_compact_automatically():
    """thread.rs 75 (``MIN_COMPACTION_CONTEXT_WINDOW = 80_000``) and compaction_message_target_ix."""
    assert _trigger(79_999) == 80_000
    assert _trigger(8_000) == 8_001
    assert _trigger(80_000) == 72_000


def test_a_token_count_of_zero_is_refused():
    """agent_settings.rs 197-199: ``auto_compact threshold of 0 is not valid``."""
    with pytest.raises(ConfigError, match="at least 1"):
        _config(200_000, **{"compression.strategy": TOKENS_USED})


@settings(max_examples=200, deadline=None)
@given(small=st.integers(1, 4_000_000), grow=st.integers(0, 1_000_000), share=st.sampled_from([0.5, 0.9, 1.0]))
def test_the_trigger_grows_with_the_window_from_80k(small, grow, share):
    """Monotonic from 80,000 tokens on; below it the threshold sits past the window (never by pressure)."""
    large = small + grow
    if small < 80_000 <= large:
        return
    assert _trigger(small, **{"compression.threshold": share}) <= _trigger(large, **{"compression.threshold": share})


# ---------------------------------------------------------------- what stays


def test_the_users_messages_then_the_summary_then_the_waiting_request():
    """thread.rs compaction_message_target_ix (inserted before a trailing unanswered request),
    extend_request_history_until (retained user messages, then the summary, then what follows) and
    CompactionInfo::to_request (the summary as a user message); its test expects ["old user", summary,
    "new prompt"]."""
    messages = _session() + [{"role": "user", "content": "new prompt"}]
    summariser = Recording()
    result = zed_compact(messages, _zoo(summariser=summariser), {})
    out = result.messages
    assert out[0] == messages[0]
    assert [m["content"] for m in out[1:3]] == ["old user", "second request"]
    assert is_summary_message(out[3]) and out[3]["content"] == OPENING + "THE SUMMARY"
    assert out[4] == {"role": "user", "content": "new prompt"} and len(out) == 5
    assert summariser.spans[0] == messages[1:-1]
    assert not any(m.get("tool_calls") or m["role"] in ("tool", "assistant") for m in out)


def test_mid_turn_everything_is_summarised():
    messages = _session()[:4]
    out = zed_compact(messages, _zoo(), {}).messages
    assert [m["content"] for m in out[1:]] == ["old user", OPENING + "THE SUMMARY"]


def test_user_messages_newest_first_within_80k_bytes_the_next_cut_at_its_start():
    """thread.rs 78 (80,000 bytes) and retained_user_request_messages_before with
    truncate_user_message_to_byte_budget: the first message that does not fit keeps its start."""
    history = [{"role": "user", "content": "dropped older"}, {"role": "assistant", "content": "a"},
               {"role": "user", "content": "START" + "x" * RETAINED_USER_BYTES + "END"},
               {"role": "assistant", "content": "b"}, {"role": "user", "content": "newest"}]
    kept = retained_user_messages(history)
    assert [m["content"][:5] for m in kept] == ["START", "newes"]
    assert len(kept[0]["content"].encode()) == RETAINED_USER_BYTES - len(b"newest")
    assert not kept[0]["content"].endswith("END")


def test_the_byte_budget_never_splits_a_character():
    history = [{"role": "user", "content": "é" * 50_000}]
    kept = retained_user_messages(history, budget=7)
    assert kept == [{"role": "user", "content": "ééé"}]


def test_earlier_summaries_are_not_kept_as_user_messages():
    first = zed_compact(_session(), _zoo(), {}).messages
    again = first + [{"role": "assistant", "content": "more"}, {"role": "user", "content": "third"}]
    out = zed_compact(again, _zoo(), {}).messages
    assert sum(is_summary_message(m) for m in out) == 1


def test_nothing_to_summarise_and_a_failed_summary_change_nothing():
    only = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert zed_compact(only, _zoo(), {}).record["outcome"] == "nothing_to_summarise"
    messages = _session()
    failed = zed_compact(messages, _zoo(summariser=Failing()), {})
    assert failed.messages == messages and failed.aborted and failed.summary_error == "no model"


# ---------------------------------------------------------------- any conversation


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 100_000, 1_000_000]), fails=st.booleans())
def test_a_zed_compaction_leaves_a_valid_conversation_and_its_input_alone(messages, window, fails):
    """Whatever the conversation: the input is not mutated, no tool call loses its result, the system prompt
    stays first, no role-order problem is added (the user's kept messages and the summary are consecutive user
    turns, as in Zed's request), and a pass that changed nothing says so."""
    checked_pass(messages, lambda m: zed_compact(m, _zoo(window, Failing() if fails else None), {}), join_users=True)


def test_the_policy_names_its_strategies_and_cites_its_numbers():
    assert set(POLICY.strategies) == set(POLICY.triggers) == {PERCENTAGE, TOKENS_USED, TOKENS_REMAINING}
    assert POLICY.fidelity == "reading" and all(c.where for c in POLICY.citations)
