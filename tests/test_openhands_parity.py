"""The openhands-* presets decide as OpenHands' own condensers do, run in OpenHands' own virtualenvs.

``hermeslab reference install openhands`` installs openhands-sdk 1.58.2 and
openhands-ai 0.62.0 into their virtualenvs (minutes). Without them these tests
are skipped with that command as the reason, except under CI=true, where they
fail (CI installs them first).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermeslab.policies.openhands import AMORTIZED, MASKING, SUMMARIZING
from hermeslab.reference.openhands.client import OpenHandsReference
from hermeslab.reference.openhands.compare import Tally
from hermeslab.reference.openhands.steps import preset_config, replay
from hermeslab.reference.openhands.venv import (
    LEGACY,
    SDK,
    OpenHandsReferenceError,
    Release,
)
from shared_data import openhands_venv

pytestmark = pytest.mark.slow

OWN = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


def _reference(release: Release):
    return OpenHandsReference(release, openhands_venv(release), timeout=600)


@pytest.fixture(scope="module")
def sessions() -> list[dict]:
    with OWN.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle][:4]


def parallel_session(rounds: int = 40) -> dict:
    """Replies with one to three calls each (more than 80 events), so cuts must respect whole replies."""
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
    for r in range(rounds):
        ids = [f"c{r}_{k}" for k in range(1 + r % 3)]
        messages.append({"role": "assistant", "content": f"step {r}", "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "run", "arguments": "{}"}} for i in ids]})
        messages += [{"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ids]
        if r % 4 == 3:
            messages.append({"role": "user", "content": f"more {r}"})
    messages.append({"role": "assistant", "content": "done"})
    return {"id": "parallel", "messages": messages}


CASES = [
    (SDK, "llm_summarizing", {"max_size": 20, "keep_first": 2}, SUMMARIZING,
     {"compression.trigger_events": 20, "compression.keep_first_events": 2}),
    (SDK, "llm_summarizing", {"max_size": 80, "keep_first": 4}, SUMMARIZING, {}),
    (LEGACY, "observation_masking", {"attention_window": 10}, MASKING, {"compression.trigger_events": 10}),
    (LEGACY, "amortized_forgetting", {"max_size": 20, "keep_first": 1}, AMORTIZED,
     {"compression.trigger_events": 20}),
]


@pytest.mark.parametrize("release, condenser, params, preset, overrides", CASES,
                         ids=[f"{c[1]}-{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_identical_decisions(sessions, release, condenser, params, preset, overrides):
    batch = sessions + [parallel_session()]
    with _reference(release) as reference:
        theirs = reference.replay(batch, condenser, params)
    tally = Tally()
    config = preset_config(preset, overrides)
    for session, reference_steps in zip(batch, theirs):
        tally.add_session(str(session["id"]), reference_steps, replay(session["messages"], config))
    assert tally.identical == tally.steps, tally.examples
    assert tally.condensations_reference + tally.masked_reference > 0  # the case exercised the rule


def unpaired_session() -> dict:
    """A first cut that keeps a result without its call, and a second cut only that result's count reaches."""
    def reply(n: int) -> dict:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": f"c{n}", "type": "function", "function": {"name": "run", "arguments": "{}"}}]}

    def result(n: int) -> dict:
        return {"role": "tool", "tool_call_id": f"c{n}", "content": f"out {n}"}

    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}, reply(1), result(1),
                reply(2), result(2), {"role": "user", "content": "and then?"}, reply(3), result(3), reply(4),
                result(4), {"role": "assistant", "content": "done"}]
    return {"id": "unpaired", "messages": messages}


@pytest.mark.parametrize("params", [{"max_size": 6, "keep_first": 1}, {"max_size": 8, "keep_first": 2},
                                    {"max_size": 20, "keep_first": 1}])
def test_amortized_forgetting_counts_what_a_cut_left_unpaired(params):
    # openhands/memory/view.py lines 48-59 keep the unpaired half in the view that line 58 of
    # amortized_forgetting_condenser.py counts; conversation_memory.py lines 751-800 only leave it unsent.
    batch = [unpaired_session(), parallel_session()]
    with _reference(LEGACY) as reference:
        theirs = reference.replay(batch, "amortized_forgetting", params)
    config = preset_config(AMORTIZED, {"compression.trigger_events": params["max_size"],
                                       "compression.keep_first_events": params["keep_first"]})
    for session, reference_steps in zip(batch, theirs):
        assert replay(session["messages"], config) == reference_steps


def test_a_bad_request_is_answered_and_the_worker_goes_on(sessions):
    with _reference(SDK) as reference:
        with pytest.raises(OpenHandsReferenceError, match="no condenser"):
            reference.replay(sessions[:1], "amortized_forgetting", {})
        assert reference.replay(sessions[:1], "llm_summarizing", {"max_size": 20, "keep_first": 2})
