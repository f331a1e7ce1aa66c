"""kimi-cli-1.52.0 compacts as Kimi CLI's ``SimpleCompaction`` does, at its trigger.

Line numbers are of the kimi-cli 1.52.0 wheel on the package index
(``kimi_cli/``). The last test runs Kimi CLI's own trigger and compaction
(``hermeslab reference install zoo``, minutes); without it the test skips
naming that command, and fails under CI=true.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.budget import derive_budgets
from hermeslab.context.types import SummaryOutcome, SummaryRequest
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.errors import ConfigError
from hermeslab.core.messages import text_of
from hermeslab.eval.metrics import orphan_tool_messages, role_order_problems
from hermeslab.policies import kimi_cli
from hermeslab.policies.kimi_cli import (
    OPENING,
    POLICY,
    PRESET,
    PRESERVED_MESSAGES,
    RESERVED_CONTEXT_SIZE,
    STRATEGY,
    TRIGGER_RATIO,
    kimi_simple_compaction,
    kimi_trigger,
    preserved_start,
)
from hermeslab.reference.zoo.checks import Tally
from hermeslab.reference.zoo.kimi_cli_parity import CHECK, PACKAGE
from policy_checks import own_sessions, recorded_sessions, users_joined
from shared_data import dataset, zoo_venv

class Fixed:
    def __init__(self, body: str = "THE SUMMARY"):
        self.body = body
        self.requests: list[SummaryRequest] = []

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        self.requests.append(request)
        return SummaryOutcome(body=self.body, error=None if self.body else "the model is down")


def _cfg(**changes) -> CompressionConfig:
    values = {"strategy": STRATEGY, "threshold": TRIGGER_RATIO, "protect_last_n": PRESERVED_MESSAGES,
              "min_saving": 0.0, **changes}
    return dataclasses.replace(CompressionConfig(), **values)


def _zoo(summariser=None, **changes) -> ZooInput:
    return ZooInput(cfg=_cfg(**changes), budgets=derive_budgets(CompressionConfig(), 1_000_000),
                    summariser=summariser or Fixed(), estimate=lambda m: len(text_of(m)))


def _call(call_id: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "shell", "arguments": "{}"}}]}


def _conversation() -> list[dict]:
    return [{"role": "system", "content": "agent"},
            {"role": "user", "content": "fix the parser"},
            _call("a"), {"role": "tool", "tool_call_id": "a", "content": "parser.py: 400 lines"},
            {"role": "assistant", "content": "found it"},
            {"role": "user", "content": "now add a test"},
            _call("b"), {"role": "tool", "tool_call_id": "b", "content": "test added"}]


def test_the_preset_holds_kimis_defaults():
    # config.py 88 (reserved 50,000), 92 (ratio 0.85); soul/compaction.py 111 (2 preserved); kimisoul.py 250.
    (preset,) = POLICY.presets
    assert preset.name == PRESET and POLICY.fidelity == "parity"
    assert preset.overrides["compression.threshold"] == TRIGGER_RATIO == 0.85
    assert preset.overrides["compression.protect_last_n"] == PRESERVED_MESSAGES == 2
    assert RESERVED_CONTEXT_SIZE == 50_000 and POLICY.output_reserves[STRATEGY](4_096) == 50_000
    assert POLICY.strategies[STRATEGY] is kimi_simple_compaction and POLICY.triggers[STRATEGY] is kimi_trigger


@pytest.mark.parametrize(("window", "fires_at"), [
    (262_144, 212_144),   # the reserve comes first: 262,144 - 50,000 < 0.85 * 262,144
    (400_000, 340_000),   # the ratio comes first
    (333_334, 283_334),   # both: 0.85 * 333,334 = 283,333.9 rounds up; 333,334 - 50,000 = 283,334
    (65_536, 15_536),
    (32_768, 1),          # the reserve is larger than the window: every step compacts
])
def test_the_trigger_is_whichever_condition_comes_first(window, fires_at):
    # soul/compaction.py 73-76: tokens >= window * ratio or tokens + reserved >= window.
    assert kimi_trigger(_cfg(), window, None) == fires_at


def test_the_two_newest_user_or_assistant_messages_stay_with_their_results():
    # soul/compaction.py 160-174: walk back counting user and assistant messages, keep from the 2nd.
    messages = _conversation()
    history = messages[1:]
    assert preserved_start(history, 2) == 4  # "now add a test", then the call and its result
    summariser = Fixed()
    out = kimi_simple_compaction(messages, _zoo(summariser), {})
    assert out.record["outcome"] == "compressed" and out.condensed == 4
    assert out.messages[0] == messages[0]
    assert out.messages[1]["role"] == "user" and out.messages[1]["content"] == f"{OPENING}\nTHE SUMMARY"
    assert out.messages[2:] == messages[5:]
    assert summariser.requests[0].span == messages[1:5]


def test_too_few_messages_or_nothing_before_them_is_nothing_to_compact():
    # soul/compaction.py 157-158 (keep 0), 170-171 (fewer than 2), 176-178 (nothing before).
    messages = _conversation()
    for cut, keep in ((2, 2), (len(messages), 0), (3, 2)):
        out = kimi_simple_compaction(messages[:cut], _zoo(protect_last_n=keep), {})
        assert out.record["outcome"] == "nothing_to_summarise" and out.messages == messages[:cut]


def test_a_failed_summary_leaves_the_conversation_and_counts_as_aborted():
    # kimisoul.py 1022-1032, 1543-1572: a compaction that raises fails Kimi's step; nothing is rewritten.
    messages = _conversation()
    out = kimi_simple_compaction(messages, _zoo(Fixed("")), {})
    assert out.aborted and out.messages == messages and out.record["outcome"] == "summary_failed"


def test_settings_kimi_refuses_are_refused():
    # config.py 92: compaction_trigger_ratio from 0.5 to 0.99.
    for bad in ({"threshold": 0.4}, {"threshold": 1.0}, {"protect_last_n": -1}):
        with pytest.raises(ConfigError):
            kimi_cli.validate(_cfg(**bad))
    kimi_cli.validate(_cfg(threshold=0.5))


@st.composite
def conversations(draw) -> list[dict]:
    messages = [{"role": "system", "content": "agent"}]
    for turn in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(("user", "text", "calls")))
        if kind == "user":
            messages.append({"role": "user", "content": f"ask {turn}"})
        elif kind == "text":
            messages.append({"role": "assistant", "content": f"answer {turn}"})
        else:
            ids = [f"t{turn}_{k}" for k in range(draw(st.integers(1, 3)))]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "shell", "arguments": "{}"}} for i in ids]})
            messages += [{"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ids]
    return messages


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(0, 4), st.booleans())
def test_tool_pairs_and_role_order_survive(messages, keep, fails):
    out = kimi_simple_compaction(messages, _zoo(Fixed("") if fails else Fixed(), protect_last_n=keep), {})
    assert orphan_tool_messages(out.messages) <= orphan_tool_messages(messages)
    # Kimi puts its summary, a user message, right before the kept part, which may open with a user message.
    assert role_order_problems(users_joined(out.messages)) <= role_order_problems(users_joined(messages))
    kept = sum(m["role"] in ("user", "assistant") for m in out.messages[1:] if not m.get("_compressed_summary"))
    if out.condensed:
        assert kept == keep


def test_decisions_equal_kimis_own_trigger_and_compaction():
    zoo_venv(PACKAGE)
    sessions = own_sessions(8) + recorded_sessions(dataset("mini_swe_agent_gemini3pro_swebv.jsonl"), 4)
    theirs = CHECK.reference(sessions, [variant.params for variant in CHECK.variants])
    compactions = 0
    for variant, reference in zip(CHECK.variants, theirs):
        tally = Tally()
        for number, (messages, steps) in enumerate(zip(sessions, reference)):
            tally.add_session(str(number), steps, CHECK.ours(messages, variant.params))
        assert tally.identical == tally.steps > 0, (variant.name, tally.examples)
        compactions += tally.compactions_reference
    assert compactions > 0
