"""The two summary-free baselines."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.core.messages import validate_messages
from hermeslab.core.rough import rough_message_tokens
from hermeslab.context.baselines import masked_text, observation_masking, sliding_window
from hermeslab.context.turns import last_real_user_index

from test_context_conversations import agent_session, assistant, call, conversations, system, tool, user


def test_observation_masking_keeps_the_newest_outputs():
    messages = agent_session(turns=5, output_words=200)
    result = observation_masking(messages, keep_last_n_observations=2, estimate=rough_message_tokens)
    tool_indices = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    assert result.record["masked_indices"] == tool_indices[:3]
    for index in tool_indices[:3]:
        assert result.messages[index]["content"] == masked_text(messages[index]["content"])
    for index in tool_indices[3:]:
        assert result.messages[index] == messages[index]
    assert result.condensed == 3 and result.effective and result.tokens_after < result.tokens_before
    assert not result.aborted and result.summary_text is None


def test_observation_masking_leaves_short_outputs_alone():
    messages = [user("go"), assistant("", [call("c1", "t", {})]), tool("c1", "ok"), user("again")]
    result = observation_masking(messages, keep_last_n_observations=0, estimate=rough_message_tokens)
    assert result.messages == messages and result.condensed == 0 and not result.effective
    with pytest.raises(ValueError, match="keep_last_n_observations must not be negative"):
        observation_masking(messages, keep_last_n_observations=-1, estimate=rough_message_tokens)


def test_sliding_window_drops_whole_groups_keeping_system_and_latest_request():
    messages = agent_session(turns=6, output_words=200)
    result = sliding_window(messages, budget_tokens=600, estimate=rough_message_tokens)
    validate_messages(result.messages)
    assert result.messages[0] == messages[0] and result.messages[-1] == messages[-1]
    assert result.tokens_after <= 600 and not result.record["over_budget"]
    kept_calls = {c["id"] for m in result.messages for c in m.get("tool_calls") or ()}
    kept_results = {m["tool_call_id"] for m in result.messages if m["role"] == "tool"}
    assert kept_calls == kept_results


def test_sliding_window_reports_a_budget_it_cannot_meet():
    messages = [system("s" * 4_000), user("x" * 4_000)]
    result = sliding_window(messages, budget_tokens=100, estimate=rough_message_tokens)
    assert result.messages == messages and result.record["over_budget"] and result.condensed == 0
    with pytest.raises(ValueError, match="budget_tokens must be positive"):
        sliding_window(messages, budget_tokens=0, estimate=rough_message_tokens)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), budget=st.integers(200, 20_000))
def test_baselines_keep_conversations_valid(messages, budget):
    snapshot = copy.deepcopy(messages)
    window = sliding_window(messages, budget_tokens=budget, estimate=rough_message_tokens)
    masked = observation_masking(messages, keep_last_n_observations=2, estimate=rough_message_tokens)
    assert messages == snapshot
    for result in (window, masked):
        validate_messages(result.messages)
        assert result.tokens_after <= result.tokens_before
    latest = last_real_user_index(messages)
    if latest is not None:
        assert messages[latest] in window.messages
    if messages[0]["role"] == "system":
        assert window.messages[0] == messages[0]
    assert window.record["over_budget"] == (window.tokens_after > budget)

