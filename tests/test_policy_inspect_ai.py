"""Inspect AI's compaction (CompactionSummary, CompactionTrim), pinned to inspect-ai 0.3.285 from the package index.

Each test names the lines it pins under ``inspect_ai/model/``; the parity test
at the end runs Inspect's own compaction handler beside the policy
(``hermeslab reference install zoo`` installs it; without it the test skips
with that command, and fails under CI=true).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.zoo_common import ZooInput
from hermeslab.policies.inspect_ai import (
    POLICY,
    SUMMARY_PRESET,
    TRIM_PRESET,
    inspect_summary,
    inspect_trim,
    partition,
    threshold_tokens,
    trigger,
    trim,
)
from policy_checks import (Fixed, assert_agrees_with_reference, checked_pass, own_sessions, preset_compression,
                           zoo_input)
from test_context_conversations import conversations

CFG = preset_compression(POLICY)


def zoo(window: int = 1_000, summariser=None) -> ZooInput:
    return zoo_input(CFG, window, summariser)


def turn(number: int, size: int = 20) -> list[dict]:
    call_id = f"c{number}"
    return [{"role": "assistant", "content": "a", "tool_calls": [{"id": call_id, "type": "function",
                                                                  "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"r{number}".ljust(size, ".")}]


SYSTEM = {"role": "system", "content": "sys"}
TASK = {"role": "user", "content": "the task"}


def test_the_threshold_is_int_of_nine_tenths_of_the_window_and_fires_past_it():
    """_compaction/_compaction.py 218, 440-462; the 0.9 default at types.py 42."""
    assert threshold_tokens(CFG, 8_000) == 7_200 and trigger(CFG, 8_000, None) == 7_201
    assert threshold_tokens(dataclasses.replace(CFG, threshold=5_000.0), 8_000) == 5_000
    assert {SUMMARY_PRESET, TRIM_PRESET} == {p.name for p in POLICY.presets}


def test_the_input_is_everything_up_to_the_first_user_message():
    """_trim.py 99-123: system messages apart, the input up to the first user message (a summary stops it)."""
    history = [SYSTEM, TASK, *turn(0), {"role": "user", "content": "more"}]
    parts = partition(history)
    assert parts.system == [SYSTEM] and parts.input == [TASK] and parts.conversation == history[2:]


def test_a_summary_keeps_the_system_and_the_task_then_one_user_summary():
    """summary.py 88-161: system + input + the summary of the conversation from its latest summary."""
    history = [SYSTEM, TASK, *[m for n in range(10) for m in turn(n)]]
    summariser = Fixed()
    outcome = inspect_summary(history, zoo(window=300, summariser=summariser), {})
    assert outcome.messages[:2] == [SYSTEM, TASK] and len(outcome.messages) == 3
    assert outcome.messages[2]["role"] == "user" and outcome.messages[2]["_compressed_summary"]
    assert summariser.spans == [[TASK, *history[2:]]]
    again = inspect_summary([*outcome.messages, *turn(11)], zoo(window=10_000, summariser=summariser), {})
    assert summariser.spans[-1] == [TASK, outcome.messages[2], *turn(11)]


def test_a_trim_keeps_the_newest_four_fifths_and_mends_tool_pairs():
    """_trim.py 38-84: keep from int(n * (1 - 0.8)) on, drop a result whose call went, a last assistant message."""
    history = [SYSTEM, TASK, *[m for n in range(5) for m in turn(n)]]  # 10 conversation messages
    trimmed = trim(history)
    assert trimmed == [SYSTEM, TASK, *history[4:]]
    six = [SYSTEM, TASK, *[m for n in range(3) for m in turn(n)]]  # the cut lands on a result: it goes too
    assert trim(six) == [SYSTEM, TASK, *six[4:]]
    five = [SYSTEM, TASK, *[m for n in range(3) for m in turn(n)][:-1]]
    assert 5 * (1 - 0.8) < 1 and trim(five) == five[:-1]  # the float product floors to 0; the last call goes


def test_a_trim_drops_calls_whose_results_went_and_a_last_assistant_message():
    calls = {"role": "assistant", "content": "a", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "y", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    history = [TASK, calls, {"role": "tool", "tool_call_id": "x", "content": "r"}, {"role": "assistant",
                                                                                       "content": "done"}]
    trimmed = trim(history, preserve=1.0)
    assert [m.get("tool_calls") and len(m["tool_calls"]) for m in trimmed] == [None, 1, None]


def test_a_compaction_still_over_the_threshold_after_four_passes_is_refused():
    """_compaction.py 398-433: Inspect raises; here the conversation is kept and the attempt aborted."""
    history = [SYSTEM, {"role": "user", "content": "t" * 500}, *turn(0)]
    outcome = inspect_trim(history, zoo(window=100), {})
    assert outcome.aborted and outcome.messages == history and outcome.record["outcome"] == "insufficient"


def test_a_failed_summary_keeps_the_conversation():
    history = [SYSTEM, TASK, *[m for n in range(10) for m in turn(n)]]
    outcome = inspect_summary(history, zoo(window=300, summariser=Fixed(fails=True)), {})
    assert outcome.aborted and outcome.messages == history


@pytest.mark.parametrize("strategy", [inspect_summary, inspect_trim])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 4_000, 1_000_000]), fails=st.booleans())
def test_any_conversation_keeps_its_tool_pairs_its_role_order_and_its_input(strategy, messages, window, fails):
    """Runs of user turns count once: the summary (or the newest part a trim keeps) follows the task's user
    message as Inspect sends it, and APIs that need it join the two (``collapse_consecutive_user_messages``)."""
    checked_pass(messages, lambda m: strategy(m, zoo(window, Fixed(fails)), {}), join_users=True)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["summary", "trim"])
def test_decisions_match_inspect_s_own_compaction_on_the_shipped_recordings(strategy):
    from hermeslab.reference.zoo.inspect_ai_parity import CHECKS

    check = next(c for c in CHECKS if c.variants[0].params["strategy"] == strategy)
    variants = [{"window": 4_096, "strategy": strategy}, {"window": 8_192, "strategy": strategy, "fails": True}]
    assert_agrees_with_reference(check, own_sessions(8), variants)
