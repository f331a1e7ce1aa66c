"""Cline's context management against its source: cline/cline @ 7c782aba (v3.65.0).

Paths are under ``src/core/context/context-management/`` unless they say otherwise.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.messages import validate_messages
from hermeslab.policies.loading import load_config
from hermeslab.policies.cline import (AUTO_CONDENSE, GO_ON, HISTORY_REMOVED, NAMED_WINDOW_BUFFERS, POLICY,
                                      READ_REMOVED, RESULTS_REMOVED, TRUNCATE, cline_auto_condense, cline_trigger,
                                      cline_truncate, cline_units, drop_repeated_reads, hidden_units, hide_history)
from policy_checks import Failing, checked_pass, checked_trigger, loaded_zoo_input
from test_context_conversations import conversations

DEFAULT, AUTO = POLICY.presets


def _config(preset, window: int):
    return load_config(preset.name, {"model.context_length": window})


def _zoo(preset, window: int = 1_000_000, summariser=None) -> ZooInput:
    return loaded_zoo_input(preset.name, window, summariser)


def _trigger(preset, window: int) -> int:
    return checked_trigger(cline_trigger, preset.name, window)


def _read(call_id: str, path: str, text: str) -> list[dict]:
    call = {"id": call_id, "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": text}]


def _session(rounds: int, read_size: int = 40) -> list[dict]:
    """A system prompt, a first exchange, then ``rounds`` of user request, file read and reply."""
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "fix parser.py"}, {"role": "assistant", "content": "Looking."}]
    for n in range(rounds):
        messages.append({"role": "user", "content": f"step {n}"})
        messages += _read(f"c{n}", f"file{n}.py", "x" * read_size)
        messages.append({"role": "assistant", "content": f"done {n}"})
    return messages


# ---------------------------------------------------------------- when it fires


def test_named_windows_keep_their_own_buffer():
    """context-window-utils.ts 20-29: 64,000 − 27,000, 128,000 − 30,000, 200,000 − 40,000 (ContextManager.ts
    240-243: ``totalTokens >= maxAllowedSize``)."""
    assert _trigger(DEFAULT, 64_000) == 37_000
    assert _trigger(DEFAULT, 128_000) == 98_000
    assert _trigger(DEFAULT, 200_000) == 160_000


def test_other_windows_keep_40k_or_a_fifth_whichever_allows_more():
    """context-window-utils.ts 31: ``Math.max(contextWindow - 40_000, contextWindow * 0.8)``."""
    assert _trigger(DEFAULT, 1_000_000) == 960_000
    assert _trigger(DEFAULT, 8_000) == 6_400
    assert _trigger(DEFAULT, 8_001) == 6_401  # 6,400.8 rounded up: tokens are whole


def test_auto_condense_fires_at_three_quarters_never_above_the_allowed_size():
    """state-keys.ts 269 (0.75); ContextManager.ts 163-165: ``min(floor(window * share), maxAllowedSize)``."""
    assert AUTO.overrides["compression.threshold"] == 0.75
    assert _trigger(AUTO, 200_000) == 150_000
    assert _trigger(AUTO, 64_000) == 37_000
    assert _trigger(AUTO, 8_000) == 6_000


def test_the_output_cap_plays_no_part():
    config = _config(DEFAULT, 200_000).compression
    assert cline_trigger(config, 200_000, 64_000) == cline_trigger(config, 200_000, None)


@settings(max_examples=200, deadline=None)
@given(small=st.integers(1_000, 2_000_000), grow=st.integers(0, 500_000), auto=st.booleans())
def test_the_trigger_grows_with_the_window_except_at_the_named_sizes(small, grow, auto):
    """Outside the three named sizes the allowed size only grows with the window; at 64,000 and 128,000 Cline's
    buffer is larger than a fifth, so those two windows fire earlier than a slightly smaller one."""
    large = small + grow
    if large in NAMED_WINDOW_BUFFERS or small in NAMED_WINDOW_BUFFERS:
        return
    preset = AUTO if auto else DEFAULT
    assert _trigger(preset, small) <= _trigger(preset, large)


def test_the_named_sizes_dip_below_their_neighbours():
    assert _trigger(DEFAULT, 64_000) < _trigger(DEFAULT, 63_999)
    assert _trigger(DEFAULT, 128_000) < _trigger(DEFAULT, 127_999)
    assert _trigger(DEFAULT, 200_000) == _trigger(DEFAULT, 199_999)


# ---------------------------------------------------------------- repeated file reads


def test_every_read_of_a_file_but_the_newest_becomes_a_note():
    """ContextManager.ts 1069-1080: all but the last index of a file's reads are replaced."""
    history = _session(1)[1:]
    history += _read("r1", "a.py", "old a" * 30) + [{"role": "assistant", "content": "ok"}]
    history += _read("r2", "a.py", "newer a" * 30) + _read("r3", "b.py", "b") + _read("r4", "a.py", "newest a")
    out, dropped, share = drop_repeated_reads(history)
    texts = [m["content"] for m in out if m["role"] == "tool"]
    assert texts == ["x" * 40, READ_REMOVED, READ_REMOVED, "b", "newest a"]
    assert len(dropped) == 2 and share > 0
    again, dropped_again, _ = drop_repeated_reads(out)
    assert again == out and dropped_again == []


def test_enough_saved_by_dropping_reads_means_no_truncation():
    """ContextManager.ts 636-649: truncation only when the reads saved under 30% of the characters."""
    messages = _session(2) + _read("big1", "big.py", "y" * 4_000) + [{"role": "assistant", "content": "k"}]
    messages += [{"role": "user", "content": "again"}] + _read("big2", "big.py", "y" * 4_000)
    messages.append({"role": "assistant", "content": "k"})
    result = cline_truncate(messages, _zoo(DEFAULT), {})
    assert result.record["outcome"] == "reads_dropped" and result.record["share_saved"] >= 0.3
    assert len(result.messages) == len(messages)


# ---------------------------------------------------------------- hiding history


def test_half_and_three_quarters_are_even_counts():
    """ContextManager.ts 314 (``floor(n / 4) * 2``) and 320 (``floor(n * 3 / 4 / 2) * 2``)."""
    assert [hidden_units(2 + n, "half") for n in (0, 3, 4, 7, 10)] == [0, 0, 2, 2, 4]
    assert [hidden_units(2 + n, "quarter") for n in (0, 3, 4, 7, 10)] == [0, 2, 2, 4, 6]
    assert hidden_units(12, "none") == 10


def test_truncation_keeps_the_first_exchange_with_a_notice_and_hides_half():
    """ContextManager.ts 298-332 (first pair kept, half hidden, ending on an assistant message) and 739-748
    (the first assistant message's text becomes the notice)."""
    history = _session(4)[1:]
    assert len(cline_units(history)) == 2 + 4 * 4  # each round: user, call, results, reply
    out, hidden = hide_history(history, "half")
    assert hidden == 8
    assert out[0] == history[0] and out[1] == {"role": "assistant", "content": HISTORY_REMOVED}
    assert out[2:] == history[2 + hidden:]
    out, hidden = hide_history(history, "quarter")
    assert hidden == 12 and out[2]["content"] == "step 3"


def test_the_first_kept_message_loses_its_tool_results():
    """ContextManager.ts 486-499: tool results of a hidden call leave the first message after the range; here
    that message held nothing else, so a short user message stands where Cline's keeps its other blocks."""
    history = [{"role": "user", "content": "go"}]
    for n in range(3):
        history += _read(f"c{n}", f"f{n}.py", "text")
    history.append({"role": "assistant", "content": "done"})
    out, hidden = hide_history(history, "half")  # six of Cline's messages after the pair: hide two
    assert hidden == 2
    assert out[:3] == [history[0], {"role": "assistant", "content": HISTORY_REMOVED},
                       {"role": "user", "content": RESULTS_REMOVED, "_synthetic": True}]
    assert out[3:] == history[5:]
    validate_messages(out)


def test_a_range_ending_on_tool_results_steps_back_one():
    """ContextManager.ts 327-329: the last hidden message must be an assistant message."""
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]
    history += _read("c0", "f0.py", "text") + _read("c1", "f1.py", "text")
    history.append({"role": "assistant", "content": "done"})
    out, hidden = hide_history(history, "half")  # five after the pair: two would end on results, so one
    assert hidden == 1
    assert out[2]["content"] == RESULTS_REMOVED and out[3:] == history[4:]


def test_three_quarters_when_the_prompt_is_past_twice_the_allowed_size():
    """ContextManager.ts 246: ``totalTokens / 2 > maxAllowedSize`` → three quarters."""
    messages = _session(8, read_size=2_000)
    small = cline_truncate(messages, _zoo(DEFAULT, window=1_000), {})
    large = cline_truncate(messages, _zoo(DEFAULT, window=1_000_000), {})
    assert small.record["keep"] == "quarter" and large.record["keep"] == "half"
    assert small.record["hidden"] > large.record["hidden"] > 0


# ---------------------------------------------------------------- auto-condense


def test_auto_condense_keeps_notes_for_the_first_exchange_then_the_summary():
    """SummarizeTaskHandler.ts 220-236 (everything after the first pair hidden, both pair messages replaced:
    ContextManager.ts 724-784)."""
    messages = _session(3)
    result = cline_auto_condense(messages, _zoo(AUTO), {})
    assert result.messages[0] == messages[0]
    assert [m["content"] for m in result.messages[1:3]] == [GO_ON, HISTORY_REMOVED]
    assert is_summary_message(result.messages[3]) and result.messages[3]["content"] == "THE SUMMARY"
    assert len(result.messages) == 4 and result.effective


def test_auto_condense_refuses_with_two_messages_after_the_first_exchange():
    """src/core/task/index.ts 2406-2415: ``activeMessageCount <= 2`` → no compaction."""
    messages = _session(0) + [{"role": "user", "content": "more"}, {"role": "assistant", "content": "sure"}]
    result = cline_auto_condense(messages, _zoo(AUTO), {})
    assert result.messages == messages and result.record["outcome"] == "nothing_to_summarise"


def test_auto_condense_without_a_summary_changes_nothing():
    messages = _session(3)
    result = cline_auto_condense(messages, _zoo(AUTO, summariser=Failing()), {})
    assert result.messages == messages and result.aborted and result.summary_error == "no model"


# ---------------------------------------------------------------- any conversation


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 8_000, 128_000, 1_000_000]),
       auto=st.booleans(), fails=st.booleans())
def test_a_cline_compaction_leaves_a_valid_conversation_and_its_input_alone(messages, window, auto, fails):
    """Whatever the conversation: the input is not mutated, every tool call keeps its result beside it, the
    system prompt stays first, no role-order problem is added, and a pass that changed nothing says so."""
    preset, strategy = (AUTO, cline_auto_condense) if auto else (DEFAULT, cline_truncate)
    checked_pass(messages, lambda m: strategy(m, _zoo(preset, window, Failing() if fails else None), {}))


def test_the_policy_names_its_strategies_and_cites_every_number():
    assert set(POLICY.strategies) == set(POLICY.triggers) == {TRUNCATE, AUTO_CONDENSE}
    assert {p.overrides["compression.strategy"] for p in POLICY.presets} == {TRUNCATE, AUTO_CONDENSE}
    assert [p.name for p in POLICY.presets] == ["cline-3.65.0", "cline-3.65.0-auto-condense"]
    assert POLICY.fidelity == "reading" and all(c.where for c in POLICY.citations)
