"""Letta's sliding-window compaction, read in letta 0.16.8 (the Python server) from the package index.

Each test names the lines of ``letta/services/summarizer/`` it pins. The
server was not installed to run beside the policy (about 70 dependencies,
a database among them), so this policy's fidelity is by reading.
"""

from __future__ import annotations


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.zoo_common import ZooInput
from hermeslab.policies.letta import POLICY, PRESET, letta_sliding_window, sliding_cut, trigger
from policy_checks import Fixed, chars, checked_pass, preset_compression, zoo_input
from test_context_conversations import conversations

CFG = preset_compression(POLICY)


def zoo(window: int, summariser=None) -> ZooInput:
    return zoo_input(CFG, window, summariser)


def chat(pairs: int, size: int = 10) -> list[dict]:
    return [m for n in range(pairs) for m in ({"role": "user", "content": "u" * size},
                                              {"role": "assistant", "content": "a" * size})]


def test_letta_compacts_past_nine_tenths_of_the_window():
    """constants.py 83, thresholds.py 44, letta_agent_v3.py 1439: estimate > int(window * 0.9)."""
    assert trigger(CFG, 10_000, None) == 9_001 and PRESET == "letta-0.16.8" and POLICY.fidelity == "reading"


def test_the_first_try_evicts_forty_percent_up_to_an_assistant_message():
    """summarizer_sliding_window.py 144-188: the share starts at 0.30 and grows by 0.10 before the first try; the
    cut is the newest assistant message at or before round(0.4 * 21) = 8 (Letta's list counts the system prompt)."""
    history = chat(10)  # 20 messages, Letta's list 21
    assert sliding_cut(history, 0, 1_000, chars) == 8


def test_eviction_grows_until_the_kept_part_fits_seventy_percent_of_the_window():
    history = chat(10)  # 200 tokens in all
    # window 150, goal 105: 0.4 keeps 130, 0.5 (round(10.5) = 10) keeps 110, 0.6 cuts at 12 and keeps 90
    assert sliding_cut(history, 0, 150, chars) == 12
    # window 100, goal 70: 0.7 keeps exactly 70 (not under it), 0.7999... cuts at 16 and keeps 50
    assert sliding_cut(history, 0, 100, chars) == 16


def test_the_summary_goes_after_the_system_prompt_and_the_rest_is_kept():
    """summarizer_sliding_window.py 200-232, compact.py 462-465."""
    system = {"role": "system", "content": "s"}
    history = chat(10)
    summariser = Fixed()
    outcome = letta_sliding_window([system, *history], zoo(1_000, summariser), {})
    assert outcome.messages[0] == system and outcome.messages[1]["_compressed_summary"]
    assert outcome.messages[2:] == history[7:] and summariser.spans == [history[:7]]


def test_without_an_assistant_message_to_cut_at_everything_is_summarised():
    """summarizer_sliding_window.py 193-198 and compact.py 309-346: the sliding window gives up, summarize_all
    keeps only the system prompt."""
    history = [{"role": "user", "content": "u" * 10}] * 3 + [{"role": "assistant", "content": "a"}]
    outcome = letta_sliding_window(history, zoo(100), {})
    assert len(outcome.messages) == 1 and outcome.record["mode"] == "all"


def test_a_share_that_reaches_one_gives_up_the_sliding_window():
    """summarizer_sliding_window.py 163-194: 0.3 plus seven steps of 0.1 is 0.9999..., one more passes 1.0."""
    history = chat(3, size=30) + [{"role": "user", "content": "x" * 500}]
    assert sliding_cut(history, 0, 300, chars) is None
    assert letta_sliding_window(history, zoo(300), {}).record["mode"] == "all"


def test_a_failed_summary_keeps_the_conversation():
    history = chat(10)
    outcome = letta_sliding_window(history, zoo(1_000, Fixed(fails=True)), {})
    assert outcome.aborted and outcome.messages == history


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 8_000, 1_000_000]), fails=st.booleans())
def test_any_conversation_keeps_its_tool_pairs_its_role_order_and_its_input(messages, window, fails):
    checked_pass(messages, lambda m: letta_sliding_window(m, zoo(window, Fixed(fails)), {}))
