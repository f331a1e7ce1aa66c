"""amplifier-context-simple-54ca117 builds Amplifier's ephemeral view as its simple context manager does.

Line numbers are of ``amplifier_module_context_simple/__init__.py`` at
microsoft/amplifier-module-context-simple 54ca117e. The module is not on the
package index, so fidelity is by reading: these tests pin each rule read.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.budget import derive_budgets
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.eval.metrics import orphan_tool_messages, role_order_problems
from hermeslab.policies.amplifier import (
    COMPACT_THRESHOLD,
    POLICY,
    PRESET,
    PROTECTED_TOOL_RESULTS,
    STRATEGY,
    TARGET_USAGE,
    TRUNCATE_CHARS,
    amplifier_simple_context,
    budget,
    compact,
    estimate,
    message_tokens,
    should_compact,
    stubbed,
    truncated,
)

WINDOW = 20_000


def _zoo(window: int = WINDOW, max_tokens: int | None = 2_000) -> ZooInput:
    base = CompressionConfig()
    cfg = dataclasses.replace(base, strategy=STRATEGY, threshold=COMPACT_THRESHOLD, target_ratio=TARGET_USAGE,
                              protect_last_n=PROTECTED_TOOL_RESULTS, min_saving=0.0)
    return ZooInput(cfg=cfg, budgets=derive_budgets(base, window), summariser=ExtractiveSummariser(),
                    estimate=message_tokens, max_tokens=max_tokens)


def _session(rounds: int, output_chars: int = 2_000, users_every: int = 4) -> list[dict]:
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "task " * 40}]
    for r in range(rounds):
        if r and r % users_every == 0:
            messages.append({"role": "user", "content": f"follow-up {r} " + "detail " * 20})
        messages.append({"role": "assistant", "content": f"step {r}", "tool_calls": [
            {"id": f"c{r}", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{r}", "content": f"{r}:" + "x" * output_chars})
    return messages


def test_the_preset_holds_amplifiers_defaults():
    # __init__.py 57-64 and 112-118: 0.92, 0.50, 0.30, 5 results, 250 characters, 800 for the notice.
    (preset,) = POLICY.presets
    assert preset.name == PRESET and POLICY.fidelity == "reading"
    assert preset.overrides["compression.threshold"] == COMPACT_THRESHOLD == 0.92
    assert preset.overrides["compression.target_ratio"] == TARGET_USAGE == 0.5
    assert preset.overrides["compression.protect_last_n"] == PROTECTED_TOOL_RESULTS == 5
    assert TRUNCATE_CHARS == 250
    assert POLICY.triggers[STRATEGY](CompressionConfig(), 128_000, None) == 1


def test_the_budget_and_the_trigger():
    # __init__.py 1168-1191 (window - int(max_output * 0.5) - 1,000), 238-240 (- 800), 346-349 (>= 0.92).
    assert budget(200_000, 64_000) == 200_000 - 32_000 - 1_000 - 800
    assert budget(8_000, None) == 6_200
    room = budget(200_000, 64_000)
    assert should_compact(int(room * 0.92) + 1, room, 0.92) and not should_compact(int(room * 0.92) - 1, room, 0.92)
    assert not should_compact(10, 0, 0.92)


def test_tokens_are_the_text_form_over_four_with_a_timestamp():
    # __init__.py 1220-1222 and 167-175: Amplifier stamps each stored message and counts str(message) // 4.
    user = {"role": "user", "content": "hello", "_hermeslab_private": 1}
    assert message_tokens(user) == len(str({"role": "user", "content": "hello",
                                             "metadata": {"timestamp": "2026-02-07T13:34:49.000+00:00"}})) // 4
    system = {"role": "system", "content": "rules"}
    assert message_tokens(system) == len(str(system)) // 4


def test_shortened_results_and_user_messages():
    # __init__.py 1016-1032 (over 250 characters: the first 250 kept), 1034-1054 (over 80: a 50-character preview).
    result = {"role": "tool", "tool_call_id": "a", "content": "y" * 1_000}
    cut = truncated(result)
    assert cut["_truncated"] and cut["_original_tokens"] == 250 and cut["content"].endswith("y" * 250 + "...")
    assert truncated({"role": "tool", "content": "short"}) == {"role": "tool", "content": "short"}
    stub = stubbed({"role": "user", "content": "line one\n" + "z" * 100})
    assert stub["_stubbed"] and '"line one ' in stub["content"] and stub["_original_length"] == 109
    assert stubbed({"role": "user", "content": "z" * 80})["content"] == "z" * 80


def test_below_the_trigger_the_history_goes_as_it_is():
    messages = _session(2, output_chars=100)
    out = amplifier_simple_context(messages, _zoo(), {})
    assert out.record["outcome"] == "nothing_to_summarise" and out.messages == messages


def test_level_one_cuts_only_the_oldest_quarter_of_results():
    # __init__.py 426-433 and 440-462: the oldest 25% of results, the newest 5 protected, stop at the target.
    messages = _session(12, output_chars=1_000)
    room = estimate(messages)  # a budget the history fills
    view, state = compact(messages, room, 0.99, PROTECTED_TOOL_RESULTS)
    assert state.level == 1 and state.truncated == 1 and state.removed == 0
    results = [m for m in view if m["role"] == "tool"]
    assert results[0].get("_truncated") and not any(m.get("_truncated") for m in results[1:])


def test_removal_keeps_every_user_message_pairs_and_the_system_prompt():
    # __init__.py 744-833, 874-944: users are never removed at levels 3-7; a call goes only with all its results.
    messages = _session(30, output_chars=3_000)
    view, state = compact(messages, 20_000, 0.5, PROTECTED_TOOL_RESULTS)
    assert 3 <= state.level <= 7 and state.removed > 0
    assert view[0] == messages[0]
    assert [m for m in view if m["role"] == "user" and not m.get("_stubbed")][-1] == \
        [m for m in messages if m["role"] == "user"][-1]
    assert sum(m["role"] == "user" for m in view) == sum(m["role"] == "user" for m in messages)
    assert orphan_tool_messages(view) == 0
    assert all(not m.get("_truncated") for m in [m for m in view if m["role"] == "tool"][-5:])


def test_the_view_is_rebuilt_from_the_full_history_before_every_request():
    # __init__.py 208-307: the view is built from self.messages, which compaction never changes.
    messages = _session(40, output_chars=1_500)
    memory: dict = {}
    conversation: list[dict] = []
    for end in range(1, len(messages) + 1):
        conversation = amplifier_simple_context(conversation + [messages[end - 1]], _zoo(), memory).messages
        if memory["view"] is not memory["full"]:
            fresh = amplifier_simple_context(messages[:end], _zoo(), {}).messages
            assert conversation == fresh
    assert memory["full"] == messages
    assert conversation[1]["role"] == "system" and "level" in conversation[1]["content"]


@st.composite
def conversations(draw) -> list[dict]:
    messages = [{"role": "system", "content": "agent"}]
    for turn in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(("user", "text", "calls", "calls")))
        size = draw(st.integers(0, 1_500))
        if kind == "user":
            messages.append({"role": "user", "content": "u" * size})
        elif kind == "text":
            messages.append({"role": "assistant", "content": "a" * size})
        else:
            ids = [f"t{turn}_{k}" for k in range(draw(st.integers(1, 3)))]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "shell", "arguments": "{}"}} for i in ids]})
            messages += [{"role": "tool", "tool_call_id": i, "content": "o" * size} for i in ids]
    return messages


def _users_joined(messages: list[dict]) -> list[dict]:
    """Each run of user messages counted once, as chat APIs join consecutive user turns."""
    return [m for i, m in enumerate(messages) if not (i and m["role"] == "user" == messages[i - 1]["role"])]


@settings(max_examples=120, deadline=None)
@given(conversations(), st.sampled_from([3_000, 6_000, 12_000]))
def test_tool_pairs_and_role_order_survive(messages, window):
    out = amplifier_simple_context(messages, _zoo(window, 500), {})
    assert orphan_tool_messages(out.messages) <= orphan_tool_messages(messages)
    assert out.messages[0] == messages[0]
    if out.record.get("level", 0) < 8:
        # Removing every reply between two user messages leaves them in a row, which chat APIs join. At level 8
        # Amplifier also drops shortened user messages, which can leave two replies in a row.
        assert role_order_problems(_users_joined(out.messages)) <= role_order_problems(_users_joined(messages))
