"""Crush's automatic summary against its source: charmbracelet/crush @ 70d32162 (v0.90.0), internal/agent/agent.go."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import ZooInput
from hermeslab.policies.crush import INTERRUPTED, NAME, POLICY, STRATEGY, crush_summary, crush_trigger
from hermeslab.policies.loading import load_config
from policy_checks import Failing, Recording, checked_pass, checked_trigger, loaded_zoo_input
from test_context_conversations import conversations


def _zoo(window: int = 1_000_000, summariser=None) -> ZooInput:
    return loaded_zoo_input(NAME, window, summariser)


def _trigger(window: int) -> int:
    return checked_trigger(crush_trigger, NAME, window)


def _call(call_id: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}


def _turn(request: str, results: int) -> list[dict]:
    messages = [{"role": "user", "content": request}]
    for n in range(results):
        messages += [_call(f"{request}{n}"), {"role": "tool", "tool_call_id": f"{request}{n}", "content": "output"}]
    return messages


SYSTEM = {"role": "system", "content": "You are Crush."}


# ---------------------------------------------------------------- when it fires


def test_windows_over_200k_summarise_with_20k_left():
    """agent.go 57-58 (200,000 and 20,000) and 1045-1053 (``remaining <= threshold``)."""
    assert _trigger(1_000_000) == 980_000
    assert _trigger(200_001) == 180_001


def test_smaller_windows_summarise_with_a_fifth_left():
    """agent.go 59 (0.2) and 1051 (``int64(float64(cw) * 0.2)``, truncated)."""
    assert _trigger(200_000) == 160_000
    assert _trigger(8_000) == 6_400
    assert _trigger(8_003) == 6_403  # a fifth of 8,003 is 1,600.6, truncated to 1,600


def test_the_output_cap_plays_no_part():
    cfg = load_config(NAME, {"model.context_length": 100_000}).compression
    assert crush_trigger(cfg, 100_000, 32_000) == crush_trigger(cfg, 100_000, None)


@settings(max_examples=200, deadline=None)
@given(small=st.integers(1, 4_000_000), grow=st.integers(0, 1_000_000))
def test_the_trigger_grows_with_the_window(small, grow):
    assert _trigger(small) <= _trigger(small + grow)


# ---------------------------------------------------------------- what stays


def test_a_finished_turn_leaves_the_summary_and_the_next_request():
    """agent.go 1342-1349 and 1689-1706: everything since the last summary is summarised and the conversation
    then starts at the summary, sent as a user message; the request that follows comes after it."""
    messages = [SYSTEM, *_turn("fix it", 2), {"role": "assistant", "content": "Fixed."},
                {"role": "user", "content": "now test it"}]
    summariser = Recording()
    result = crush_summary(messages, _zoo(summariser=summariser), {})
    out = result.messages
    assert out[0] == SYSTEM and len(out) == 3 and is_summary_message(out[1]) and out[1]["role"] == "user"
    assert out[1]["content"] == "THE SUMMARY" and out[2] == messages[-1]
    assert summariser.spans[0] == messages[1:-1]
    assert result.condensed == len(messages) - 2


def test_an_interrupted_turn_asks_for_its_request_again():
    """agent.go 1192-1206: a summary taken while the step still called tools queues the turn's request."""
    messages = [SYSTEM, *_turn("first", 1), {"role": "assistant", "content": "ok"}, *_turn("refactor parser", 3)]
    out = crush_summary(messages, _zoo(), {}).messages
    assert out[1]["content"] == "THE SUMMARY" and len(out) == 3
    assert out[2]["role"] == "user" and out[2]["content"] == INTERRUPTED.format("refactor parser")


def test_a_summary_after_a_reply_stands_alone():
    messages = [SYSTEM, *_turn("hello", 1), {"role": "assistant", "content": "hi"}]
    out = crush_summary(messages, _zoo(), {}).messages
    assert out[1]["content"] == "THE SUMMARY" and len(out) == 2


def test_an_earlier_summary_is_summarised_again():
    """agent.go 1695-1706: the messages since the last summary start with that summary."""
    first = crush_summary([SYSTEM, *_turn("a", 2), {"role": "assistant", "content": "done"}], _zoo(), {})
    again = first.messages + [{"role": "assistant", "content": "more"}, *_turn("b", 1)]
    summariser = Recording()
    crush_summary(again, _zoo(summariser=summariser), {})
    assert is_summary_message(summariser.spans[0][0])


def test_nothing_to_summarise_and_a_failed_summary_change_nothing():
    """agent.go 1346-1349 (no messages) and 1416-1430 (an error leaves the session as it was)."""
    only_request = [SYSTEM, {"role": "user", "content": "hi"}]
    assert crush_summary(only_request, _zoo(), {}).record["outcome"] == "nothing_to_summarise"
    messages = [SYSTEM, *_turn("x", 2)]
    failed = crush_summary(messages, _zoo(summariser=Failing()), {})
    assert failed.messages == messages and failed.aborted and failed.summary_error == "no model"


# ---------------------------------------------------------------- any conversation


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 8_000, 1_000_000]), fails=st.booleans())
def test_a_crush_summary_leaves_a_valid_conversation_and_its_input_alone(messages, window, fails):
    """Whatever the conversation: the input is not mutated, no tool call loses its result, the system prompt
    stays first, no role-order problem is added (the summary and the next request are consecutive user turns,
    as Crush sends them), and a pass that changed nothing says so."""
    checked_pass(messages, lambda m: crush_summary(m, _zoo(window, Failing() if fails else None), {}), join_users=True)


def test_the_policy_names_its_strategy_and_cites_its_numbers():
    assert set(POLICY.strategies) == set(POLICY.triggers) == {STRATEGY}
    assert POLICY.fidelity == "reading" and all(c.where for c in POLICY.citations)
