"""LangChain v1's SummarizationMiddleware, pinned to langchain 1.5.0 as installed from the package index.

Each test names the lines of ``langchain/agents/middleware/summarization.py`` it
pins; the parity test at the end runs LangChain's own middleware beside the
policy (``hermeslab reference install zoo`` installs it; without it the test
skips with that command, and fails under CI=true).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.zoo_common import ZooInput
from hermeslab.policies.langchain import (
    KEEP_MESSAGES,
    POLICY,
    PRESET,
    TOO_LONG,
    langchain_summarization,
    safe_cutoff,
    summary_input,
    trigger,
)
from policy_checks import (Fixed, assert_agrees_with_reference, chars, checked_pass, own_sessions, preset_compression,
                           zoo_input)
from test_context_conversations import conversations

CFG = preset_compression(POLICY)


def zoo(window: int = 1_000, summariser=None) -> ZooInput:
    return zoo_input(CFG, window, summariser)


def turn(number: int, size: int = 20) -> list[dict]:
    call_id = f"c{number}"
    return [{"role": "user", "content": f"u{number}".ljust(size, ".")},
            {"role": "assistant", "content": "a", "tool_calls": [{"id": call_id, "type": "function",
                                                                  "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"r{number}".ljust(size, ".")}]


def test_the_trigger_is_int_of_the_window_times_the_fraction_reached_at_or_past_it():
    """Lines 720-735: ``int(max_input_tokens * fraction)``, at least 1, met when the count is not below it."""
    assert trigger(CFG, 8_000, None) == 6_400
    assert trigger(CFG, 200_000, None) == 160_000
    assert trigger(dataclasses.replace(CFG, threshold=0.000001), 10, None) == 1


def test_the_preset_is_named_after_the_release_and_keeps_twenty_messages():
    """Lines 113 and 287: ``keep=("messages", 20)``; LangChain sets no trigger (286), the preset takes 0.8."""
    assert PRESET == "langchain-1.5.0" and KEEP_MESSAGES == 20 and CFG.threshold == 0.8
    assert all(citation.where.startswith("langchain/") for citation in POLICY.citations)


def test_twenty_messages_or_fewer_leave_nothing_to_summarise():
    """Lines 871-872 and 503-504."""
    history = [m for n in range(6) for m in turn(n)][:20]
    assert safe_cutoff(history) == 0
    outcome = langchain_summarization(history, zoo(window=10), {})
    assert outcome.condensed == 0 and outcome.record["outcome"] == "nothing_to_summarise"


def test_a_cut_on_a_tool_result_moves_back_to_the_call_that_asked_for_it():
    """Lines 877-907: the newest 20 would start at a tool result, so its assistant message is kept too."""
    history = [m for n in range(8) for m in turn(n)][:22]  # user, assistant (call), tool result, ...
    assert history[len(history) - 20]["role"] == "tool"
    assert safe_cutoff(history) == 1 and history[1]["tool_calls"][0]["id"] == history[2]["tool_call_id"]


def test_past_the_trigger_all_but_the_newest_twenty_become_one_user_summary():
    """Lines 506-517 and 835-842: one human message with the summary, then the kept messages as they were."""
    system = {"role": "system", "content": "sys"}
    history = [m for n in range(9) for m in turn(n)]
    summariser = Fixed()
    outcome = langchain_summarization([system, *history], zoo(window=100, summariser=summariser), {})
    out = outcome.messages
    assert out[0] == system and out[1]["role"] == "user" and out[1]["_compressed_summary"]
    assert out[2:] == history[-20:]
    assert summariser.spans == [summary_input(history[:7], chars)] and summariser.spans[0][0]["role"] == "user"


def test_under_the_trigger_nothing_changes():
    history = [m for n in range(9) for m in turn(n)]
    outcome = langchain_summarization(history, zoo(window=1_000_000), {})
    assert outcome.condensed == 0 and outcome.record["outcome"] == "under_trigger"


def test_the_summary_call_sees_the_newest_4000_tokens_from_a_user_message_on():
    """Lines 1022-1038: trim_messages(last, 4,000 tokens, start_on human)."""
    span = [{"role": "user", "content": "u" * 3_000}, {"role": "assistant", "content": "a" * 500},
            {"role": "user", "content": "v" * 1_000}, {"role": "assistant", "content": "b" * 2_000}]
    assert summary_input(span, chars) == span[2:]
    assert summary_input(span[3:], chars) == []


def test_with_no_user_message_in_reach_a_fixed_text_stands_in_and_no_call_is_made():
    """Lines 929-931: an empty trim writes a fixed text without calling the model."""
    history = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a" * 5_000},
               *[m for n in range(6) for m in turn(n)], {"role": "user", "content": "u"},
               {"role": "assistant", "content": "b"}]
    summariser = Fixed(fails=True)
    outcome = langchain_summarization(history, zoo(window=100, summariser=summariser), {})
    assert summariser.spans == [] and TOO_LONG in outcome.messages[0]["content"]


def test_a_failed_summary_keeps_the_conversation():
    """Lines 270-275: LangChain raises out of the step; here the conversation is kept and the attempt aborted."""
    history = [m for n in range(9) for m in turn(n)]
    outcome = langchain_summarization(history, zoo(window=100, summariser=Fixed(fails=True)), {})
    assert outcome.aborted and outcome.messages == history


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(max_turns=12), window=st.sampled_from([10, 2_000, 1_000_000]), fails=st.booleans())
def test_any_conversation_keeps_its_tool_pairs_its_role_order_and_its_input(messages, window, fails):
    """Runs of user turns count once: the summary is a user message the kept part may follow with one."""
    checked_pass(messages, lambda m: langchain_summarization(m, zoo(window, Fixed(fails)), {}), join_users=True)


@pytest.mark.slow
def test_decisions_match_langchain_s_own_middleware_on_the_shipped_recordings():
    from hermeslab.reference.zoo.langchain_parity import CHECK

    variants = [{"window": 4_096, "fraction": 0.5}, {"window": 4_096, "fraction": 0.5, "fails": True}]
    assert_agrees_with_reference(CHECK, own_sessions(8), variants)
