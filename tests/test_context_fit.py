"""The overflow's last resort: drop the oldest turns, then cut the longest texts, until the prompt fits."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.baselines import units_of
from hermeslab.context.fit import cut_marker, fit_to_budget
from hermeslab.context.turns import last_real_user_index
from hermeslab.context.types import SUMMARY_PREFIX
from hermeslab.core.messages import validate_messages
from hermeslab.core.tokens import default_counter

from test_context_conversations import conversations
from test_context_properties import assert_pairs_complete

count = default_counter.count_message


def call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def conversation(outputs: int = 6, size: int = 400) -> list[dict]:
    messages = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Audit the repo."}]
    for i in range(outputs):
        messages += [{"role": "assistant", "content": f"step {i}", "tool_calls": [call(f"c{i}")]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"file {i} " * size}]
    messages.append({"role": "user", "content": "Now write the report."})
    return messages


def test_the_oldest_turns_go_first_and_the_latest_request_stays():
    messages = conversation()
    result = fit_to_budget(messages, budget_tokens=sum(map(count, messages)) // 2, estimate=count)
    assert result.tokens_after <= result.record["budget_tokens"] and result.record["cut_messages"] == []
    assert result.record["dropped_indices"][:2] == [2, 3]  # the first assistant/tool group
    assert result.messages[0] == messages[0] and result.messages[-1] == messages[-1]
    assert_pairs_complete(result.messages)


def test_a_message_larger_than_the_budget_is_cut_around_a_marker_saying_how_much():
    messages = [{"role": "system", "content": "S."}, {"role": "user", "content": "Read it."},
                {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": "head " + "x " * 30_000 + " tail"}]
    result = fit_to_budget(messages, budget_tokens=2_000, estimate=count)
    assert result.tokens_after <= 2_000 and len(result.messages) == 4
    cut = result.messages[-1]["content"]
    (entry,) = result.record["cut_messages"]
    assert cut.startswith("head ") and cut.endswith(" tail") and cut_marker(entry["chars_cut"]) in cut
    assert entry["chars_cut"] + entry["chars_kept"] == len(messages[-1]["content"])


def test_a_summary_is_cut_before_it_is_dropped_and_keeps_its_opening():
    summary = {"role": "user", "content": f"{SUMMARY_PREFIX}\nOriginal task: audit the repo.\n" + "fact " * 3_000}
    messages = [{"role": "system", "content": "S."}, summary, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "Go on."}]
    result = fit_to_budget(messages, budget_tokens=800, estimate=count)
    kept = result.messages[1]["content"]
    assert result.tokens_after <= 800 and kept.startswith(SUMMARY_PREFIX) and "Original task" in kept


def test_nothing_changes_when_the_conversation_already_fits():
    messages = conversation(outputs=1, size=10)
    result = fit_to_budget(messages, budget_tokens=10_000, estimate=count)
    assert result.messages == messages and result.condensed == 0 and not result.effective


def test_only_a_system_prompt_larger_than_the_budget_can_stay_over_it():
    messages = [{"role": "system", "content": "rule " * 5_000}, {"role": "user", "content": "hi"}]
    result = fit_to_budget(messages, budget_tokens=500, estimate=count)
    assert result.record["over_budget"] and result.messages[0] == messages[0]


def test_the_note_a_drop_needs_is_paid_for_even_when_only_the_opening_request_can_go():
    """Dropping the exchange after an opening request that cannot be cut (an image) leaves two user messages,
    and the note put between them must fit too: when nothing else can give way, the opening request goes."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 300}}
    messages = [{"role": "system", "content": "You are careful."},
                {"role": "user", "content": [{"type": "text", "text": "Describe this."}, image]},
                {"role": "assistant", "content": "It shows a chart."},
                {"role": "user", "content": "Now the legend."},
                {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": "legend: red, blue"}]
    budget = sum(map(count, messages)) - count(messages[2])  # the drop alone fits; the note would not
    result = fit_to_budget(messages, budget_tokens=budget, estimate=count)
    validate_messages(result.messages)
    assert result.tokens_after <= budget and not result.record["over_budget"]
    assert messages[3] in result.messages and messages[1] not in result.messages


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), share=st.floats(0.05, 1.0))
def test_a_fit_is_a_valid_conversation_within_budget_that_keeps_the_latest_request(messages, share):
    system = sum(count(m) for m in messages if m["role"] == "system")
    latest = last_real_user_index(messages)
    newest = units_of(messages, 0)[-1]  # never dropped, and tool-call arguments are never cut
    protected = system + sum(count(m) for i, m in enumerate(messages) if i == latest or i in newest) + 400
    budget = max(protected, int(sum(map(count, messages)) * share))
    result = fit_to_budget(messages, budget_tokens=budget, estimate=count)
    validate_messages(result.messages)
    assert_pairs_complete(result.messages)
    assert result.tokens_after <= budget
    if latest is not None:
        assert messages[latest] in result.messages
    assert [m for m in result.messages if m["role"] == "system"] == [m for m in messages if m["role"] == "system"]


@pytest.mark.parametrize("budget", [0, -5])
def test_a_budget_with_no_room_still_returns_a_valid_conversation(budget):
    result = fit_to_budget(conversation(outputs=2), budget_tokens=budget, estimate=count)
    validate_messages(result.messages)
    assert result.record["over_budget"]
