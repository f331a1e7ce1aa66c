"""Goose's auto-compaction against its source: block/goose, crates/goose/src/context_mgmt/mod.rs @ 0036b819."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.errors import ConfigError
from hermeslab.policies.goose import (AFTER_CONVERSATION, AFTER_TOOL_LOOP, NAME, POLICY, STRATEGY, goose_summary,
                                      goose_trigger, middle_out, request_span, tool_result_runs)
from hermeslab.policies.loading import load_config
from policy_checks import Failing, Recording, checked_pass, checked_trigger, loaded_zoo_input
from test_context_conversations import conversations


def _zoo(window: int = 1_000_000, summariser=None) -> ZooInput:
    return loaded_zoo_input(NAME, window, summariser)


def _trigger(window: int, threshold: float | None = None) -> int:
    overrides = {} if threshold is None else {"compression.threshold": threshold}
    return checked_trigger(goose_trigger, NAME, window, overrides)


def _call(call_id: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "shell", "arguments": "{}"}}]}


def _loop(calls: int, output: str = "out") -> list[dict]:
    messages = [{"role": "system", "content": "You are goose."}, {"role": "user", "content": "start"}]
    for n in range(calls):
        messages += [_call(f"t{n}"), {"role": "tool", "tool_call_id": f"t{n}", "content": f"{output} {n}"}]
    return messages


# ---------------------------------------------------------------- when it fires


def test_fires_strictly_past_eight_tenths_of_the_window():
    """mod.rs 19 (``DEFAULT_COMPACTION_THRESHOLD = 0.8``) and 215-221 (``usage_ratio > threshold``)."""
    assert POLICY.presets[0].overrides["compression.threshold"] == 0.8
    assert _trigger(200_000) == 160_001
    assert _trigger(8_000) == 6_401
    assert _trigger(8_001) == 6_401  # 6,400.8: the first whole count past it


def test_the_output_cap_plays_no_part():
    cfg = load_config(NAME, {"model.context_length": 100_000}).compression
    assert goose_trigger(cfg, 100_000, 32_000) == goose_trigger(cfg, 100_000, None)


def test_a_share_goose_reads_as_off_is_refused():
    """mod.rs 217-218: a threshold at or above 1 (or at or below 0) disables auto-compaction; the schema already
    refuses shares outside (0, 1], so 1.0 is the one value the policy itself has to refuse."""
    with pytest.raises(ConfigError, match="strictly between 0 and 1"):
        load_config(NAME, {"compression.threshold": 1.0})
    with pytest.raises(ConfigError, match="compression.threshold"):
        load_config(NAME, {"compression.threshold": 0.0})


@settings(max_examples=200, deadline=None)
@given(small=st.integers(1, 4_000_000), grow=st.integers(0, 1_000_000),
       threshold=st.sampled_from([0.05, 0.5, 0.8, 0.95]))
def test_the_trigger_grows_with_the_window(small, grow, threshold):
    assert _trigger(small, threshold) <= _trigger(small + grow, threshold)


# ---------------------------------------------------------------- middle-out


def test_middle_out_takes_tool_responses_nearest_the_middle_first():
    """mod.rs 247 (``max(len * percent / 100, 1)``) and 252-264 (below the middle, then above, alternately)."""
    messages = _loop(10)[1:]
    runs = tool_result_runs(messages)
    assert len(runs) == 10

    def kept(percent):
        return [m["content"] for m in middle_out(messages, percent) if m["role"] == "tool"]

    assert len(kept(0)) == 10
    assert kept(10) == [f"out {n}" for n in range(10) if n != 4]
    assert kept(20) == [f"out {n}" for n in range(10) if n not in (4, 5)]
    assert kept(50) == [f"out {n}" for n in (0, 1, 7, 8, 9)]
    assert kept(100) == []
    assert [m["content"] for m in middle_out(_loop(3)[1:], 10) if m["role"] == "tool"] == ["out 1", "out 2"]


def test_a_single_tool_response_is_never_left_out():
    """mod.rs 249-258: with one tool-response message the middle is 0 and the first step finds nothing below it."""
    messages = _loop(1)[1:]
    assert middle_out(messages, 100) == messages


def test_results_of_one_call_group_leave_together():
    def group(first: str, second: str) -> list[dict]:
        calls = [{"id": i, "type": "function", "function": {"name": "shell", "arguments": "{}"}}
                 for i in (first, second)]
        return [{"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": first, "content": first},
                {"role": "tool", "tool_call_id": second, "content": second}]

    messages = [{"role": "user", "content": "go"}, *group("a", "b"), *group("c", "d")]
    assert tool_result_runs(messages) == [[2, 3], [5, 6]]
    assert middle_out(messages, 10) == messages[:2] + messages[4:]


def test_an_overflowing_summary_request_is_retried_with_fewer_tool_responses():
    """mod.rs 286-287 and do_compact's retry on ContextLengthExceeded: 0, 10, 20, 50, 100% left out."""
    messages = _loop(10, output="x" * 2_000)
    summariser = Recording()
    zoo = _zoo(window=3_000, summariser=summariser)
    span, percent = request_span(messages[1:], zoo)
    assert percent in (50, 100)
    result = goose_summary(messages, zoo, {})
    assert result.record["tool_results_left_out_percent"] == percent
    assert len([m for m in summariser.spans[0] if m["role"] == "tool"]) < 10


def test_when_even_no_tool_responses_overflow_nothing_changes():
    """mod.rs do_compact: after the last attempt the compaction fails."""
    messages = [{"role": "user", "content": "y " * 20_000}]
    result = goose_summary(messages, _zoo(window=2_000), {})
    assert result.messages == messages and result.aborted
    assert result.record["outcome"] == "summary_request_overflows"


# ---------------------------------------------------------------- what stays


def test_after_a_request_the_model_sees_the_summary_a_note_and_that_request_again():
    """mod.rs 106-122 (the newest user text message, last in the conversation), 149-164 (summary as a user
    message, the note after a request), 169-173 (a fresh copy of the request)."""
    messages = _loop(2) + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "now test it"}]
    result = goose_summary(messages, _zoo(), {})
    out = result.messages
    assert out[0] == messages[0]
    assert is_summary_message(out[1]) and out[1]["role"] == "user" and out[1]["content"] == "THE SUMMARY"
    assert out[2] == {"role": "assistant", "content": AFTER_CONVERSATION}
    assert out[3] == {"role": "user", "content": "now test it"}
    assert len(out) == 4 and result.condensed == len(messages) - 1


def test_mid_tool_loop_the_note_says_to_keep_calling_tools():
    """mod.rs 153-160: the tool-loop wording when the newest request is not the last message."""
    out = goose_summary(_loop(3), _zoo(), {}).messages
    assert out[2]["content"] == AFTER_TOOL_LOOP and out[3] == {"role": "user", "content": "start"}


def test_without_a_summary_nothing_changes():
    messages = _loop(3)
    result = goose_summary(messages, _zoo(summariser=Failing()), {})
    assert result.messages == messages and result.aborted and result.summary_error == "no model"


# ---------------------------------------------------------------- any conversation


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 4_000, 8_000, 1_000_000]), fails=st.booleans())
def test_a_goose_compaction_leaves_a_valid_conversation_and_its_input_alone(messages, window, fails):
    """Whatever the conversation: the input is not mutated, tool calls keep their results, the system prompt
    stays first, no role-order problem is added, and a pass that changed nothing says so."""
    checked_pass(messages, lambda m: goose_summary(m, _zoo(window, Failing() if fails else None), {}))


def test_the_policy_names_its_strategy_and_cites_its_numbers():
    assert set(POLICY.strategies) == set(POLICY.triggers) == {STRATEGY}
    assert POLICY.fidelity == "reading" and all(c.where for c in POLICY.citations)
