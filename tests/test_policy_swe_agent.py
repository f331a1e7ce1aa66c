"""swe-agent-0.0.1 elides observations as SWE-agent's ``Last5Observations`` does.

Line numbers are of ``sweagent/agent/history_processors.py`` and ``agents.py``
in the sweagent 0.0.1 wheel on the package index. The last tests run that
wheel's own processor (``hermeslab reference install swe-agent``, seconds);
without it they skip naming that command, and fail under CI=true.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.budget import derive_budgets
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.errors import ConfigError
from hermeslab.core.messages import text_of
from hermeslab.policies import swe_agent
from hermeslab.policies.swe_agent import (
    ELIDED_LINES,
    KEEP_LAST_OBSERVATIONS,
    POLICY,
    PRESET,
    STRATEGY,
    before_every_request,
    elision_note,
    indices_to_elide,
    last_n_observations,
)
from hermeslab.reference.zoo.checks import Tally
from hermeslab.reference.zoo.swe_agent_parity import CHECK, PACKAGE
from policy_checks import own_sessions, recorded_sessions
from shared_data import dataset, zoo_venv

def _zoo(keep_last: int = KEEP_LAST_OBSERVATIONS) -> ZooInput:
    base = CompressionConfig()
    cfg = dataclasses.replace(base, strategy=STRATEGY, protect_last_n=keep_last, min_saving=0.0)
    return ZooInput(cfg=cfg, budgets=derive_budgets(base, 1_000_000), summariser=ExtractiveSummariser(),
                    estimate=lambda m: len(text_of(m)))


def _conversation(steps: int, lines: int = 3) -> list[dict]:
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix the bug\nin parser.py"}]
    for step in range(steps):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{step}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}",
                         "content": "\n".join(f"out {step}.{k}" for k in range(lines))})
    return messages


def test_the_preset_keeps_five_observations_and_fires_before_every_request():
    # Last5Observations: history_processors.py 82-84; the processor runs on every query: agents.py 254-257, 427.
    (preset,) = POLICY.presets
    assert preset.name == PRESET and POLICY.fidelity == "parity"
    assert preset.overrides["compression.strategy"] == STRATEGY
    assert preset.overrides["compression.protect_last_n"] == KEEP_LAST_OBSERVATIONS == 5
    assert preset.overrides["compression.in_place"] is True
    assert POLICY.strategies[STRATEGY] is last_n_observations
    for window in (8_000, 128_000, 1_000_000):
        assert POLICY.triggers[STRATEGY](CompressionConfig(), window, None) == 1 == before_every_request(
            CompressionConfig(), window, 4096)


def test_keeps_the_first_observation_and_the_newest_n():
    # history_processors.py 61-62: the first non-demo user message and the last n are kept.
    messages = _conversation(8)
    history = messages[1:]
    observations = [i for i, m in enumerate(history) if m["role"] in ("user", "tool")]
    assert len(observations) == 9
    assert indices_to_elide(history, 5) == observations[1:4]
    assert indices_to_elide(history, 8) == []
    assert indices_to_elide(history[:3], 1) == []


def test_an_elided_observation_states_its_line_count_and_keeps_its_place():
    # history_processors.py 63-65: the text becomes a note of len(content.splitlines()); role and place stay.
    messages = _conversation(7, lines=40)
    out = last_n_observations(messages, _zoo(), {})
    assert out.record["outcome"] == "elided" and out.record["elided"] == [3, 5]
    assert out.effective and out.condensed == 2
    assert [m["role"] for m in out.messages] == [m["role"] for m in messages]
    for index in (3, 5):
        assert out.messages[index]["content"] == elision_note(40)
        assert out.messages[index]["tool_call_id"] == messages[index]["tool_call_id"]
        assert out.messages[index][ELIDED_LINES] == 40
    untouched = [i for i in range(len(messages)) if i not in (3, 5)]
    assert all(out.messages[i] == messages[i] for i in untouched)


def test_a_second_pass_leaves_elided_notes_as_they_were():
    messages = _conversation(7, lines=4)
    once = last_n_observations(messages, _zoo(), {}).messages
    again = last_n_observations(once, _zoo(), {})
    assert again.record["outcome"] == "nothing_to_summarise" and not again.effective
    assert again.messages == once


def test_user_messages_after_the_first_are_observations():
    # history_processors.py 49, 53: SWE-agent counts every non-demo user message.
    messages = [{"role": "user", "content": f"u{i}"} if i % 2 == 0 else {"role": "assistant", "content": "a"}
                for i in range(16)]
    out = last_n_observations(messages, _zoo(2), {})
    assert out.record["elided"] == [2, 4, 6, 8, 10]


def test_a_processor_keeping_no_observation_is_refused():
    # history_processors.py 46-47: n must be a positive integer.
    for bad in (0, -1, True):
        with pytest.raises(ConfigError, match="protect_last_n"):
            swe_agent.validate(dataclasses.replace(CompressionConfig(), strategy=STRATEGY, protect_last_n=bad))
    swe_agent.validate(dataclasses.replace(CompressionConfig(), strategy=STRATEGY, protect_last_n=1))


@st.composite
def conversations(draw) -> list[dict]:
    messages = [{"role": "system", "content": "agent"}]
    for turn in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(("user", "text", "calls")))
        body = "\n".join(["line"] * draw(st.integers(0, 4)))
        if kind == "user":
            messages.append({"role": "user", "content": body})
        elif kind == "text":
            messages.append({"role": "assistant", "content": body})
        else:
            ids = [f"t{turn}_{k}" for k in range(draw(st.integers(1, 3)))]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}} for i in ids]})
            messages += [{"role": "tool", "tool_call_id": i, "content": body} for i in ids]
    return messages


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(1, 6))
def test_tool_pairs_roles_and_order_survive(messages, keep_last):
    out = last_n_observations(messages, _zoo(keep_last), {}).messages
    assert [m["role"] for m in out] == [m["role"] for m in messages]
    assert [m.get("tool_call_id") for m in out] == [m.get("tool_call_id") for m in messages]
    assert [m.get("tool_calls") for m in out] == [m.get("tool_calls") for m in messages]
    kept_whole = [m for m in out if ELIDED_LINES not in m and m["role"] in ("user", "tool")]
    observations = sum(m["role"] in ("user", "tool") for m in messages)
    assert len(kept_whole) == min(observations, keep_last + 1)


@settings(max_examples=100, deadline=None)
@given(conversations(), st.integers(1, 6))
def test_rewriting_in_place_step_by_step_equals_one_pass_over_the_whole_log(messages, keep_last):
    # SWE-agent rebuilds from the full log before every query (agents.py 254-257); hermeslab keeps the result.
    stepwise: list[dict] = []
    for end in range(1, len(messages) + 1):
        stepwise = last_n_observations(stepwise + [messages[end - 1]], _zoo(keep_last), {}).messages
    assert stepwise == last_n_observations(messages, _zoo(keep_last), {}).messages


def test_decisions_equal_swe_agents_own_processor():
    zoo_venv(PACKAGE)
    sessions = own_sessions(10) + recorded_sessions(dataset("mini_swe_agent_gemini3pro_swebv.jsonl"), 5)
    theirs = CHECK.reference(sessions, [variant.params for variant in CHECK.variants])
    for variant, reference in zip(CHECK.variants, theirs):
        tally = Tally()
        for number, (messages, steps) in enumerate(zip(sessions, reference)):
            tally.add_session(str(number), steps, CHECK.ours(messages, variant.params))
        assert tally.identical == tally.steps > 0, (variant.name, tally.examples)
        if variant.params["keep_last"] <= 5:
            assert tally.compactions_reference > 0
