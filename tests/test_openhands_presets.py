"""The openhands-* presets: when each triggers, what it keeps and what it replaces.

Each rule is pinned to the OpenHands source line it reproduces (openhands-sdk
1.58.2 ``openhands/sdk/context/condenser/llm_summarizing_condenser.py``, "SDK";
openhands-ai 0.62.0 ``openhands/memory/condenser/impl/*``, "0.62").
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.driver import ContextDriver
from hermeslab.context.openhands_condensers import (
    MASK,
    amortized_forgetting,
    forget_holding,
    masked_positions,
    summarizing_forgetting,
    view_of,
)
from hermeslab.context.openhands_view import (
    ACTION,
    OBSERVATION,
    RESENT,
    event_count,
    events_of,
    manipulation_indices,
)
from hermeslab.context.types import SummaryOutcome
from hermeslab.core.config import Config, ConfigError
from hermeslab.core.messages import validate_messages, wire_messages
from hermeslab.policies.loading import apply_preset, preset_values, validate_compression_config, with_overrides
from hermeslab.policies.openhands import AMORTIZED, MASKING, SUMMARIZING
from hermeslab.policies.running import make_compactor
from hermeslab.reference.openhands.steps import preset_config, replay


def call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "run", "arguments": json.dumps({"n": call_id})}}


def session(rounds: int, *, parallel: int = 1) -> list[dict]:
    """system, task, then ``rounds`` of an assistant reply with ``parallel`` calls and their results."""
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Do the task."}]
    for r in range(rounds):
        ids = [f"c{r}_{k}" for k in range(parallel)]
        messages.append({"role": "assistant", "content": f"step {r}", "tool_calls": [call(i) for i in ids]})
        messages += [{"role": "tool", "tool_call_id": i, "content": f"output {i} " * 20} for i in ids]
    messages.append({"role": "assistant", "content": "done"})
    return messages


class Fixed:
    def summarise(self, request):
        return SummaryOutcome(body="what happened")


def test_presets_are_registered_with_their_sources_numbers():
    # SDK lines 558-559 (default_condenser); 0.62 condenser_config.py lines 23-24, 92-93, 99-100.
    assert preset_values(SUMMARIZING)["compression.trigger_events"] == 80
    assert preset_values(SUMMARIZING)["compression.keep_first_events"] == 4
    assert preset_values(MASKING)["compression.trigger_events"] == 100
    assert preset_values(AMORTIZED)["compression.trigger_events"] == 100
    assert preset_values(AMORTIZED)["compression.keep_first_events"] == 1
    for name in (SUMMARIZING, MASKING, AMORTIZED):
        cfg = apply_preset(Config(), name).compression
        assert cfg.strategy.startswith("openhands_") and cfg.in_place and cfg.system_in_pipeline
    # Presets are full lists: seed after an OpenHands preset restores the defaults.
    back = apply_preset(apply_preset(Config(), SUMMARIZING), "seed").compression
    assert back.trigger_events is None and back.strategy == "summary"


def test_unknown_strategy_is_refused():
    cfg = Config().with_overrides({"compression.strategy": "openhands_nope"}).compression
    with pytest.raises(ConfigError, match="compression.strategy"):
        validate_compression_config(cfg)


def test_events_count_each_call_and_result_once():
    messages = session(2, parallel=3)
    events = events_of(messages)
    assert event_count(messages) == len(events) == 2 + 2 * 6 + 1
    assert [e.kind for e in events[2:8]] == [ACTION] * 3 + [OBSERVATION] * 3
    # A cut inside one reply's calls, or between a call and its result, is not allowed (SDK view properties).
    assert set(manipulation_indices(events)) == {0, 1, 2, 8, 14, 15}


def test_summarizing_triggers_only_above_max_size():
    # SDK line 174: len(view) > max_size.
    view = view_of(session(9))  # 2 + 18 + 1 = 21 events
    assert len(view) == 21
    assert summarizing_forgetting(view, max_size=21, keep_first=2, minimum_progress=0.1) is None
    assert summarizing_forgetting(view, max_size=20, keep_first=2, minimum_progress=0.1) is not None


def test_summarizing_keeps_head_and_newest_half_minus_head():
    # SDK lines 308-309, 333, 336: keep max_size // 2 - keep_first - 1 from the tail; 341-350: safe cuts.
    view = view_of(session(9))
    forgetting = summarizing_forgetting(view, max_size=20, keep_first=2, minimum_progress=0.1)
    naive_end = 21 - (20 // 2 - 2 - 1)
    assert forgetting.start == 2 and forgetting.end >= naive_end
    assert forgetting.end in manipulation_indices(view)


def test_summarizing_never_forgets_the_system_prompt_and_respects_minimum_progress():
    view = view_of(session(9))
    # SDK lines 341-344: keep_first 0 still protects the system prompt.
    assert summarizing_forgetting(view, max_size=20, keep_first=0, minimum_progress=0.1).start == 1
    # SDK line 434: a range under minimum_progress of the view is no condensation.
    assert summarizing_forgetting(view, max_size=20, keep_first=2, minimum_progress=0.9) is None


def test_amortized_keeps_first_and_half_of_max_size():
    # 0.62 amortized_forgetting_condenser.py lines 41-55 and 58.
    view = view_of(session(9))
    assert amortized_forgetting(view, max_size=21, keep_first=1) is None
    forgetting = amortized_forgetting(view, max_size=20, keep_first=1)
    assert (forgetting.start, forgetting.end) == (1, 21 - (10 - 1))


def tool(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": f"output {call_id}"}


def test_amortized_keeps_counting_the_half_of_a_pair_a_cut_left():
    # 0.62 openhands/memory/view.py lines 48-59: the view is every event no condensation forgot, with no
    # check of calls against results, and amortized_forgetting_condenser.py line 58 counts that view;
    # only the prompt (conversation_memory.py lines 751-800) leaves an unpaired call or result out.
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"},
                {"role": "assistant", "content": None, "tool_calls": [call("c1")]}, tool("c1"),
                {"role": "assistant", "content": None, "tool_calls": [call("c2")]}, tool("c2"),
                {"role": "user", "content": "and then?"},
                {"role": "assistant", "content": None, "tool_calls": [call("c3")]}, tool("c3"),
                {"role": "assistant", "content": None, "tool_calls": [call("c4")]}, tool("c4"),
                {"role": "assistant", "content": "done"}]
    steps = replay(messages, preset_config(AMORTIZED, {"compression.trigger_events": 6}))
    cuts = {step["at"]: step["condensations"][0]["forgotten"] for step in steps if step["condensations"]}
    # 7 events > 6: keep the first and the newest 6 // 2 - 1 = 2 (c2's result and the user's message).
    assert cuts[7] == ["m1", "m2.0", "m3", "m4.0"]
    # c2's result, its call gone, is not sent but still counted: 3 + 4 new events = 7 > 6 cuts again.
    assert cuts == {7: ["m1", "m2.0", "m3", "m4.0"], 11: ["m5", "m6", "m7.0", "m8"]}
    assert steps[-1]["view"] == ["m0", "m9.0", "m10"]


def test_amortized_trims_a_reply_cut_through_and_holds_what_it_cannot_send():
    messages = session(3, parallel=3)[:-1]  # 2 + 3 * 6 = 20 events
    view = events_of(messages)
    forgetting = amortized_forgetting(view, max_size=12, keep_first=1)  # keeps the first and the newest 5
    out = forget_holding(messages, view, forgetting)
    validate_messages(out)
    reply = out[1]
    assert [c["id"] for c in reply["tool_calls"]] == ["c2_1", "c2_2"] and reply["content"] == "step 2"
    held = events_of(out)[3]  # the first result, its call forgotten, in its place among the results
    assert held.held and (held.kind, held.call_id) == (OBSERVATION, "c2_0")
    assert [m.get("tool_call_id") for m in out[2:]] == ["c2_1", "c2_2"]
    assert event_count(out) == len(events_of(out)) == 1 + 5
    assert all(not key.startswith("_") for key in wire_messages(out)[1])


def test_amortized_sends_a_forgotten_system_prompt_without_counting_it():
    # 0.62 conversation_memory.py lines 805-826: a prompt whose view has no system prompt gets one first.
    messages = session(3)[:-1]  # 8 events
    view = events_of(messages)
    forgetting = amortized_forgetting(view, max_size=6, keep_first=0)  # keeps the newest 3
    assert (forgetting.start, forgetting.end) == (0, 5)
    out = forget_holding(messages, view, forgetting)
    assert out[0]["content"] == messages[0]["content"] and out[0][RESENT]
    assert [m["role"] for m in out] == ["system", "assistant", "tool"]
    held = events_of(out)[0]  # c1_0's result, its call forgotten, rides on the reply after it
    assert held.held and held.call_id == "c1_0" and held.message == 1
    assert event_count(out) == 3
    assert wire_messages(out)[0] == messages[0]


@settings(max_examples=60, deadline=None)
@given(rounds=st.integers(1, 14), parallel=st.integers(1, 3), max_size=st.integers(4, 30),
       keep_first=st.integers(0, 3))
def test_amortized_output_sends_only_whole_pairs_and_counts_every_kept_event(rounds, parallel, max_size,
                                                                            keep_first):
    if keep_first >= max_size // 2:
        return
    messages = session(rounds, parallel=parallel)[:-1]
    config = preset_config(AMORTIZED, {"compression.trigger_events": max_size,
                                       "compression.keep_first_events": keep_first})
    driver = ContextDriver(make_compactor(config, Fixed()), context_length=config.model.context_length)
    history: list[dict] = []
    for message in messages:
        view = events_of(history)
        compaction = driver.before_call(history, None) if message.get("role") == "assistant" else None
        if compaction is not None and compaction.changed:
            record = compaction.result.record
            history = compaction.messages
            assert event_count(history) == len(view) - (record["forget_end"] - record["forget_start"])
            assert history[0]["role"] == "system"  # counted or, once forgotten, sent uncounted
            calls = {c["id"] for m in history for c in m.get("tool_calls") or []}
            results = {m["tool_call_id"] for m in history if m.get("role") == "tool"}
            assert calls == results
            validate_messages(history)
        history = history + [message]


def test_masking_hides_observations_older_than_the_window():
    # 0.62 observation_masking_condenser.py line 23.
    view = view_of(session(4))  # 11 events
    hidden = masked_positions(view, attention_window=5)
    assert hidden == [i for i in range(11 - 5) if view[i].kind == OBSERVATION]


@pytest.mark.parametrize("preset", [SUMMARIZING, AMORTIZED, MASKING])
def test_driver_triggers_on_event_count_before_any_call(preset):
    config = preset_config(preset, {"compression.trigger_events": 10, "compression.keep_first_events": 1})
    driver = ContextDriver(make_compactor(config, Fixed()), context_length=config.model.context_length)
    short = session(3)[:-1]  # 8 events
    assert driver.before_call(short, None, first=True) is None
    long = session(6)[:-1]  # 14 events
    compaction = driver.before_call(long, None, first=True)
    assert compaction is not None and compaction.changed
    validate_messages(compaction.messages)
    out = compaction.messages
    assert out[0] == long[0]
    if preset == MASKING:
        assert len(out) == len(long) and sum(m.get("content") == MASK for m in out) > 0
    else:
        assert event_count(out) < event_count(long)
    summaries = [m for m in out if m.get("_compressed_summary")]
    assert len(summaries) == (1 if preset == SUMMARIZING else 0)


def test_summary_goes_where_the_forgotten_range_began():
    # SDK event/condenser.py line 95 (insert at summary_offset), line 130 (a user message).
    config = preset_config(SUMMARIZING, {"compression.trigger_events": 10, "compression.keep_first_events": 2})
    steps = replay(session(8), config)
    first = next(step for step in steps if step["condensations"])
    assert first["condensations"][0]["offset"] == 2
    assert first["view"][:3] == ["m0", "m1", "c0-summary"]


@settings(max_examples=40, deadline=None)
@given(rounds=st.integers(1, 14), parallel=st.integers(1, 3), max_size=st.integers(8, 30),
       keep_first=st.integers(0, 3))
def test_summarizing_output_is_always_a_valid_conversation(rounds, parallel, max_size, keep_first):
    if keep_first >= max_size // 2 - 1:
        return
    config = preset_config(SUMMARIZING, {"compression.trigger_events": max_size,
                                         "compression.keep_first_events": keep_first})
    for step in replay(session(rounds, parallel=parallel), config):
        for condensation in step["condensations"]:
            forgotten = condensation["forgotten"]
            # Never a call without its result, never part of one reply.
            replies = {key.split(".")[0] for key in forgotten if "." in key}
            for reply in replies:
                calls = [k for k in step["view"] if k.startswith(reply + ".")]
                assert not calls
            assert "m0" not in forgotten


@pytest.mark.parametrize("overrides, words", [
    ({"compression.trigger_events": 0}, "positive integer"),
    ({"compression.trigger_events": None}, "needs compression.trigger_events"),
    ({"compression.keep_first_events": 39}, "must be under 39"),  # SDK lines 89-97: 80 // 2 - 1
    ({"compression.keep_first_events": -1}, "must not be negative"),
])
def test_settings_openhands_would_refuse_are_refused(overrides, words):
    cfg = with_overrides(Config(), {"compression.preset": SUMMARIZING, **overrides}).compression
    with pytest.raises(ConfigError, match=words):
        validate_compression_config(cfg)


class Silent:
    def summarise(self, request):
        return SummaryOutcome(body="", error="model unavailable")


def test_a_summary_that_fails_leaves_the_context_as_it_was():
    # SDK lines 261-266: a failed summary call is no condensation; base.py 174-178: a soft one keeps the view.
    config = preset_config(SUMMARIZING, {"compression.trigger_events": 10, "compression.keep_first_events": 1})
    compaction = make_compactor(config, Silent()).run(session(6)[:-1], trigger="pressure")
    assert compaction.result.aborted and not compaction.changed
    assert compaction.messages == session(6)[:-1]
