"""Aider's chat-history summary, pinned to aider-chat 0.86.2 as installed from the package index.

Each test names the lines it pins (aider/history.py, aider/models.py,
aider/coders/base_coder.py in that release); the parity test at the end runs
Aider's own ``ChatSummary`` beside the policy (``hermeslab reference install
zoo`` installs it; without it the test skips with that command, and fails
under CI=true).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.zoo_common import ZooInput
from hermeslab.policies.aider import (
    ACKNOWLEDGEMENT,
    POLICY,
    PRESET,
    aider_chat_summary,
    history_budget,
    trigger,
    units_of,
)
from policy_checks import (Fixed, assert_agrees_with_reference, chars, checked_pass, own_sessions, preset_compression,
                           zoo_input)
from test_context_conversations import conversations

CFG = preset_compression(POLICY)


def zoo(window: int = 16_384, summariser=None, estimate=chars) -> ZooInput:
    return zoo_input(CFG, window, summariser, estimate)


def user(size: int, tag: str = "") -> dict:
    return {"role": "user", "content": (tag + "u" * size)[:size]}


def assistant(size: int, tag: str = "") -> dict:
    return {"role": "assistant", "content": (tag + "a" * size)[:size]}


# ---------------------------------------------------------------- budget and trigger (aider/models.py:344-346)


@pytest.mark.parametrize("window, budget", [(8_000, 1_024), (16_384, 1_024), (20_000, 1_250), (65_536, 4_096),
                                            (200_000, 8_192), (1_000_000, 8_192)])
def test_the_history_budget_is_a_sixteenth_of_the_window_between_1024_and_8192(window, budget):
    assert history_budget(CFG, window) == budget
    assert trigger(CFG, window, None) == budget + 1


def test_a_window_whose_sixteenth_is_fractional_keeps_the_fraction():
    assert history_budget(CFG, 20_001) == pytest.approx(20_001 / 16)
    assert trigger(CFG, 20_001, None) == 1_251


def test_the_preset_is_named_after_the_release_and_claims_parity():
    assert PRESET == "aider-0.86.2" and POLICY.fidelity == "parity"
    assert POLICY.strategies["aider_chat_summary"] is aider_chat_summary
    assert all(citation.where.startswith("aider/") for citation in POLICY.citations)


# ---------------------------------------------------------------- what is summarised (aider/history.py)


def test_finished_turns_within_the_budget_stay_as_they_are():
    """history.py:15-18 and base_coder.py:1002-1004: only more than the budget is summarised."""
    messages = [user(500), assistant(524), user(10)]
    outcome = aider_chat_summary(messages, zoo(), {})
    assert outcome.condensed == 0 and outcome.messages == messages
    assert outcome.record["outcome"] == "history_within_budget"


def test_the_older_part_becomes_one_user_summary_and_the_newest_under_half_the_budget_stay():
    """history.py:46-61 and 89-93: the tail is the newest messages under 1,024 // 2 tokens, starting after an
    assistant message; the current turn (from the newest user message) is never touched."""
    done = [user(100, "u0"), assistant(100, "a0"), user(100, "u1"), assistant(100, "a1"),
            user(100, "u2"), assistant(300, "a2"), user(200, "u3"), assistant(200, "a3")]
    current = [user(50, "now")]
    summariser = Fixed()
    outcome = aider_chat_summary([{"role": "system", "content": "sys"}, *done, *current], zoo(summariser=summariser),
                                 {})
    out = outcome.messages
    assert out[0]["content"] == "sys"
    assert out[1]["role"] == "user" and out[1]["_compressed_summary"] and "SUMMARY" in out[1]["content"]
    assert out[2:] == done[6:] + current
    assert summariser.spans == [done[:6]]


def test_with_four_messages_or_fewer_everything_is_summarised_and_ok_follows():
    """history.py:42-44 and 27-31: four finished messages are summarised whole; the summary is a user message,
    so an assistant acknowledgement follows before the current turn."""
    done = [user(600), assistant(600), user(10), assistant(10)]
    outcome = aider_chat_summary([*done, user(5, "now")], zoo(), {})
    roles = [(m["role"], m.get("content")) for m in outcome.messages]
    assert roles[0][0] == "user" and outcome.messages[0]["_compressed_summary"]
    assert roles[1] == ("assistant", ACKNOWLEDGEMENT) and roles[2] == ("user", "now" + "u" * 2)


def test_a_tool_call_and_its_results_count_as_one_assistant_message():
    """Aider's history has no tool messages: a call and its results are one unit, so no cut parts them."""
    call = {"role": "assistant", "content": "c", "tool_calls": [{"id": "t1", "type": "function",
                                                                 "function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "t1", "content": "r" * 40}
    units = units_of([user(3), call, result, assistant(2)], chars)
    assert [(u.role, u.tokens, len(u.messages)) for u in units] == [("user", 3, 1), ("assistant", 41, 2),
                                                                    ("assistant", 2, 1)]


def test_a_failed_summary_drops_the_finished_turns():
    """base_coder.py:1014-1034: the summary thread's ValueError leaves its result empty and that empty history
    replaces the finished turns."""
    messages = [user(600), assistant(600), user(5, "now")]
    outcome = aider_chat_summary(messages, zoo(summariser=Fixed(fails=True)), {})
    assert outcome.messages == [messages[-1]] and outcome.record["outcome"] == "summary_failed_history_dropped"


def test_the_summary_recurses_while_summary_and_tail_exceed_the_budget():
    """history.py:89-96: a summary that with the tail still exceeds the budget is summarised again, deeper."""
    big = dict(estimate=lambda m: 1_000 if m.get("_compressed_summary") else chars(m))
    done = [user(100), assistant(100)] * 6
    summariser = Fixed()
    outcome = aider_chat_summary([*done, user(5, "now")], zoo(summariser=summariser, **big), {})
    assert outcome.record["summary_calls"] > 1 and len(summariser.spans) == outcome.record["summary_calls"]


def test_one_decision_per_turn():
    """Aider checks the finished turns when a turn ends; later requests of the same turn do not summarise again."""
    memory: dict = {}
    big = dict(estimate=lambda m: 2_000 if m.get("_compressed_summary") else chars(m))
    first = aider_chat_summary([user(600), assistant(600), user(5, "now")], zoo(**big), memory)
    assert first.condensed
    again = aider_chat_summary([*first.messages, assistant(3)], zoo(**big), memory)
    assert again.condensed == 0 and again.record["outcome"] == "decided_this_turn"


# ---------------------------------------------------------------- any conversation


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 16_384, 65_536]), fails=st.booleans())
def test_any_conversation_keeps_its_tool_pairs_its_role_order_and_its_input(messages, window, fails):
    """Runs of user turns count once: the kept part starts after an assistant message, so it may start with a
    user message right behind the user summary, as Aider sends it."""
    checked_pass(messages, lambda m: aider_chat_summary(m, zoo(window, Fixed(fails)), {}), join_users=True)


# ---------------------------------------------------------------- parity with Aider's own code


@pytest.mark.slow
def test_decisions_match_aider_s_own_chat_summary_on_the_shipped_recordings():
    from hermeslab.reference.zoo.aider_parity import CHECK

    assert_agrees_with_reference(CHECK, own_sessions(6), [variant.params for variant in CHECK.variants])
