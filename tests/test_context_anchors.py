"""The pinned anchor list: collection, the block format, and its life across compressions."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.core.config import Config
from hermeslab.core.messages import text_of, validate_messages
from hermeslab.core.tokens import count_text
from hermeslab.eval.metrics import message_text
from hermeslab.context.anchors import (ANCHOR_HEADING, ANCHOR_MIN_TOKENS, anchor_budget, anchor_line_tokens,
                                       collect_anchors, parse_anchor_block, render_anchor_block, split_anchor_block)
from hermeslab.context.assemble import split_summary
from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import CompressionState, compress
from hermeslab.policies.loading import apply_preset
from hermeslab.context.types import is_summary_message

from test_context_conversations import FixedSummariser, agent_session, assistant, call, tool, tool_turn, user

SECRET = "sk-proj-" + "a1B2c3D4e5" * 4
GITHUB_TOKEN = "ghp_" + "x9" * 18
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/billing.py", line 88, in refund\n'
    "    row = customers[key]\n"
    "KeyError: 'customer_9921' while refunding\n"
)
#: Facts planted in the first compressed span; no summary below mentions them.
FACTS = ("ORD-48213", "/srv/app/billing.py", "KeyError: 'customer_9921' while refunding")


def cfg(preset: str = "seed", **changes):
    return dataclasses.replace(apply_preset(Config(), preset).compression, **changes)


def run(messages, c, state, summariser=None, window=16_000):
    return compress(messages, cfg=c, budgets=derive_budgets(c, window), state=state,
                    summariser=summariser or FixedSummariser())


def planted_session() -> list[dict]:
    """A coding session whose third tool turn (past the protected head) holds the facts and a secret."""
    messages = agent_session(turns=12, output_words=600)
    assert messages[10]["tool_calls"][0]["id"] == "c2"
    messages[10:12] = tool_turn("c2", "read_file", {"path": "/srv/app/billing.py", "order": "ORD-48213"},
                                TRACEBACK + f"export OPENAI_API_KEY={SECRET}\n" + " ".join(["log line"] * 300))
    return messages


def grow(messages: list[dict], prefix: str) -> list[dict]:
    return messages + agent_session(turns=12, output_words=600, task=f"Also check the {prefix} batch",
                                    call_prefix=prefix)[1:]


def context_text(messages: list[dict]) -> str:
    """What the model is shown: message texts and tool-call arguments."""
    return "\n".join(message_text(m) for m in messages)


def summary_of(messages: list[dict]) -> str:
    found = [m for m in messages if is_summary_message(m)]
    assert len(found) == 1
    return split_summary(found[0])[0]


def lines_cost(anchors) -> int:
    return sum(anchor_line_tokens(anchor) for anchor in anchors)


# ---------------------------------------------------------------- collecting


def test_facts_come_from_content_arguments_and_results_in_order():
    span = [
        user("Please refund order ORD-48213 today."),
        assistant("Reading it.", [call("a", "read_file", {"file_path": "/srv/app/billing.py", "limit": 2048})]),
        tool("a", TRACEBACK),
    ]
    anchors = collect_anchors(span, [], budget_tokens=500)
    # The path is seen again in the traceback, so it is more recent than the limit.
    assert anchors == ["ORD-48213", "2048", "/srv/app/billing.py", "KeyError: 'customer_9921' while refunding"]
    assert "file_path" not in anchors  # JSON keys are field names, not facts


def test_an_error_contributes_its_first_line_and_covers_the_entities_in_it():
    span = [
        tool("a", "E       AssertionError: assert total_cents == 1999\nmore detail 31337 here"),
        tool("b", json.dumps({"exit_code": 1, "output": "fatal: pathspec 'feature/x-42' did not match\n"})),
        user("It said\nValueError:\nand nothing else"),
    ]
    anchors = collect_anchors(span, [], budget_tokens=500)
    assert anchors == ["AssertionError: assert total_cents == 1999", "31337",
                       "fatal: pathspec 'feature/x-42' did not match", "ValueError"]


def test_duplicates_are_merged_and_a_fact_seen_again_becomes_recent():
    span = [user("ids ORD-1001 and ORD-2002"), user("again ORD-1001, then ORD-3003 and ORD-2002")]
    assert collect_anchors(span, [], budget_tokens=500) == ["ORD-1001", "ORD-3003", "ORD-2002"]
    previous = ["/etc/hosts", "ORD-1001", "build_id_77"]
    assert collect_anchors([user("retry ORD-1001")], previous, budget_tokens=500) == \
        ["/etc/hosts", "build_id_77", "ORD-1001"]


def test_summaries_and_runtime_scaffolding_are_not_sources():
    span = [
        {"role": "user", "content": "[HANDOFF SUMMARY - REFERENCE ONLY] old ORD-1", "_compressed_summary": True},
        {"role": "user", "content": "Open todos: fix task_9876", "_synthetic": True},
        user("kept ORD-5555"),
    ]
    assert collect_anchors(span, [], budget_tokens=500) == ["ORD-5555"]


def test_the_budget_evicts_the_least_recent_anchors_first():
    previous = [f"order_{n:04d}" for n in range(40)]
    budget = lines_cost(previous[-10:])
    anchors = collect_anchors([user("now ORD-777777")], previous, budget_tokens=budget)
    assert anchors[-1] == "ORD-777777" and lines_cost(anchors) <= budget
    assert anchors[:-1] == previous[-len(anchors) + 1:]  # a suffix: the oldest went first
    assert collect_anchors([], previous, budget_tokens=0) == []


def test_an_anchor_longer_than_the_whole_budget_does_not_evict_the_rest():
    huge = "x_" + "_".join(str(n) for n in range(60))
    anchors = collect_anchors([user(f"see {huge[:150]}")], ["ORD-1"], budget_tokens=20)
    assert anchors == ["ORD-1"]


def test_the_default_budget_is_a_tenth_of_the_summary_cap_with_a_floor():
    assert anchor_budget(12_000) == 1_200
    assert anchor_budget(500) == ANCHOR_MIN_TOKENS == 100
    with pytest.raises(ValueError, match="summary_cap_tokens"):
        anchor_budget(-1)


def test_collection_is_deterministic():
    messages = planted_session()
    first = collect_anchors(messages, ["ORD-1"], budget_tokens=150)
    assert first == collect_anchors(messages, ["ORD-1"], budget_tokens=150) and len(first) > 5


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="span must be a list"):
        collect_anchors("hello", [], budget_tokens=10)
    with pytest.raises(TypeError, match=r"span\[1\] is a str"):
        collect_anchors([user("a"), "b"], [], budget_tokens=10)
    with pytest.raises(ValueError, match=r"previous\[0\] must be one non-empty line"):
        collect_anchors([], ["two\nlines"], budget_tokens=10)
    with pytest.raises(ValueError, match="budget_tokens"):
        collect_anchors([], [], budget_tokens=-5)
    with pytest.raises(TypeError, match=r"anchors\[1\] must be a str"):
        render_anchor_block(["ok", 7])
    with pytest.raises(TypeError, match="needs a str"):
        parse_anchor_block(None)


# ---------------------------------------------------------------- the block


def test_the_block_round_trips_and_can_be_split_off():
    anchors = ["ORD-48213", "/srv/app/billing.py", "KeyError: 'customer_9921'", "- leading dash"]
    block = render_anchor_block(anchors)
    assert block.startswith(ANCHOR_HEADING + "\n") and block.count("\n") == len(anchors) + 1
    assert parse_anchor_block(block) == anchors
    body = "## Active Task\nContinue.\n\n## Critical Context\n- something else"
    assert split_anchor_block(f"{body}\n\n{block}") == (body, anchors)
    assert split_anchor_block(body) == (body, []) and render_anchor_block([]) == ""


def test_only_the_last_block_counts_and_text_after_it_is_kept():
    older = render_anchor_block(["ORD-1"])
    newer = render_anchor_block(["ORD-2", "ORD-3"])
    text = f"notes\n\n{older}\n\n{newer}\n\n[END]"
    assert parse_anchor_block(text) == ["ORD-2", "ORD-3"]
    assert split_anchor_block(text)[0] == f"notes\n\n{older}\n\n[END]"


def test_a_secret_never_reaches_the_block():
    assert SECRET not in render_anchor_block([SECRET, "ORD-1"])
    assert parse_anchor_block(render_anchor_block([SECRET]))[0].startswith("[REDACTED:")
    span = [user(f"export OPENAI_API_KEY={SECRET}"),
            assistant("", [call("a", "terminal", {"token": SECRET, "ticket": "ORD-99"})]), tool("a", SECRET)]
    anchors = collect_anchors(span, [], budget_tokens=500)
    assert anchors == ["OPENAI_API_KEY", "ORD-99"]
    # In JSON text an escaped newline glues ``n`` to the key; decoded, the key stands alone again.
    escaped = tool("b", json.dumps({"output": f"ORD-48213\n{SECRET} done"}))
    assert collect_anchors([escaped], [], budget_tokens=500) == ["ORD-48213"]


# ---------------------------------------------------------------- across compressions


def compress_three_times(c):
    summariser = FixedSummariser()  # its text never mentions the planted facts
    state = CompressionState()
    first = run(planted_session(), c, state, summariser)
    second = run(grow(first.messages, "more"), c, state, summariser)
    third = run(grow(second.messages, "again"), c, state, summariser)
    assert [r.record["outcome"] for r in (first, second, third)] == ["compressed"] * 3
    return (first, second, third), state, summariser


@pytest.mark.parametrize("preset", ["seed", "hermes-0.19"])
def test_anchors_of_the_first_span_survive_the_second_and_third_compression(preset):
    results, state, summariser = compress_three_times(cfg(preset, anchors=True))
    for result in results:
        validate_messages(result.messages)
        text = context_text(result.messages)
        assert all(fact in text for fact in FACTS) and SECRET not in text
        assert parse_anchor_block(summary_of(result.messages)) == state.anchors or result is not results[-1]
    assert all(fact in state.anchors for fact in FACTS)
    assert results[2].record["anchors"]["previous_from"] == "state"
    assert lines_cost(state.anchors) <= results[2].record["anchors"]["budget_tokens"]
    # The summariser is asked to update the prose only; the block is the pipeline's.
    assert all(ANCHOR_HEADING not in (request.previous_summary or "") for request in summariser.requests)


def test_without_anchors_the_same_facts_are_lost():
    """The contrast that makes the test above meaningful."""
    results, state, _ = compress_three_times(cfg(anchors=False))
    assert not any(fact in context_text(results[2].messages) for fact in FACTS[:2])
    assert state.anchors == []


def test_a_conversation_resumed_from_a_log_reads_its_anchors_back_from_the_summary():
    c = cfg(anchors=True)
    first = run(planted_session(), c, CompressionState())
    summariser = FixedSummariser()
    resumed = CompressionState()  # a fresh process: nothing but the stored messages
    second = run(grow(first.messages, "more"), c, resumed, summariser)
    assert second.record["anchors"]["previous_from"] == "summary"
    assert all(fact in resumed.anchors for fact in FACTS)
    assert summariser.requests[0].previous_summary == first.summary_text.split("\n\n" + ANCHOR_HEADING)[0]
    assert ANCHOR_HEADING in first.summary_text and ANCHOR_HEADING not in summariser.requests[0].previous_summary


def test_anchors_are_off_by_default_and_leave_the_output_byte_identical():
    assert Config().compression.anchors is False
    messages = planted_session()
    plain_state, off_state, on_state = CompressionState(), CompressionState(), CompressionState()
    plain = run(messages, apply_preset(Config(), "seed").compression, plain_state)
    off = run(messages, cfg(anchors=False), off_state)
    on = run(messages, cfg(anchors=True), on_state)
    assert json.dumps(off.messages) == json.dumps(plain.messages) and off.record == plain.record
    assert off.summary_text == plain.summary_text and "anchors" not in off.record
    assert off_state == plain_state and off_state.anchors == []
    # Anchors add one block to the summary and change nothing else.
    block = "\n\n" + render_anchor_block(on_state.anchors)
    assert on.summary_text == off.summary_text + block and on_state.previous_summary == off.summary_text
    stripped = [{**m, "content": m["content"].replace(block, "")} if is_summary_message(m) else m
                for m in on.messages]
    assert json.dumps(stripped) == json.dumps(off.messages)


def test_compression_with_anchors_is_deterministic():
    outputs = [json.dumps(compress_three_times(cfg(anchors=True))[0][2].messages) for _ in range(2)]
    assert outputs[0] == outputs[1]


# ---------------------------------------------------------------- properties

FRAGMENTS = ("ORD-48213", "/srv/app/billing.py", "auth.py", "v1.2.3", "3.14", "12,500 ms", "user_id_42",
             "ChatWidget", "#1234", "2024-05-01", "deadbeef42", "ValueError: bad id 7781", "error: it broke",
             "`make test`", "https://example.com/a?b=1", "a@b.io", f" {SECRET} ", f" GITHUB_TOKEN={GITHUB_TOKEN} ",
             "plain words", "Traceback (most recent call last):", "E   KeyError: 'k_1'", '"quoted_name"')
# Secrets stand apart from their neighbours: a key glued to a word is not a token the redactor can know.
_PIECE = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12))
_TEXT = st.lists(st.tuples(_PIECE, st.sampled_from((" ", "\n", ": ", "", "\"", "/", "\t"))), max_size=8).map(
    lambda pairs: "".join(piece + sep for piece, sep in pairs))


@st.composite
def spans(draw) -> list[dict]:
    messages = []
    for index in range(draw(st.integers(0, 6))):
        role = draw(st.sampled_from(("user", "assistant", "tool")))
        content = draw(_TEXT)
        if draw(st.booleans()):
            content = json.dumps({"output": content, "n": draw(st.integers(0, 10**6))})
        message = {"role": role, "content": content}
        if role == "assistant" and draw(st.booleans()):
            arguments = draw(st.one_of(_TEXT, _TEXT.map(lambda t: json.dumps({"path": t}))))
            message["tool_calls"] = [{"id": f"c{index}", "type": "function",
                                      "function": {"name": "terminal", "arguments": arguments}}]
        messages.append(message)
    return messages


def sources(span: list[dict]) -> list[str]:
    return [text_of(m) for m in span] + [c["function"]["arguments"] for m in span for c in m.get("tool_calls", [])]


@settings(max_examples=120, deadline=None)
@given(spans(), spans(), st.integers(0, 120))
def test_every_anchor_is_verbatim_earlier_text_unique_and_within_budget(first, second, budget):
    earlier = sources(first) + sources(second)
    unbounded = collect_anchors(second, collect_anchors(first, [], budget_tokens=10**6), budget_tokens=10**6)
    anchors = collect_anchors(second, collect_anchors(first, [], budget_tokens=budget), budget_tokens=budget)
    for anchor in unbounded:
        assert any(anchor in text for text in earlier), anchor
        assert "[REDACTED:" not in anchor and GITHUB_TOKEN[:12] not in anchor and SECRET[:12] not in anchor
    assert len(set(unbounded)) == len(unbounded) and len(set(anchors)) == len(anchors)
    assert lines_cost(anchors) <= budget
    assert set(anchors) <= set(unbounded)
    assert parse_anchor_block(render_anchor_block(anchors)) == anchors


@settings(max_examples=120, deadline=None)
@given(spans(), st.integers(0, 80))
def test_a_smaller_budget_keeps_the_most_recent_anchors_that_fit(span, budget):
    unbounded = collect_anchors(span, [], budget_tokens=10**6)
    fitting = [anchor for anchor in unbounded if anchor_line_tokens(anchor) <= budget]
    anchors = collect_anchors(span, [], budget_tokens=budget)
    assert anchors == fitting[len(fitting) - len(anchors):]
    if len(anchors) < len(fitting):  # the next older one would not have fitted
        assert lines_cost(anchors) + anchor_line_tokens(fitting[-len(anchors) - 1]) > budget


def test_line_cost_is_the_rendered_line_counted_alone():
    assert anchor_line_tokens("ORD-48213") == count_text("- ORD-48213")


def test_a_result_pruned_to_one_line_that_stays_in_the_context_gives_its_facts_to_the_anchors():
    messages = agent_session(turns=16, output_words=600)
    assert messages[30]["tool_calls"][0]["id"] == "c7"
    messages[30:32] = tool_turn("c7", "read_file", {"path": "/srv/app/billing.py"}, TRACEBACK + " ".join(["log"] * 600))
    result = run(messages, cfg("seed", anchors=True), CompressionState())
    pruned = {d["index"] for d in result.record["prune"]["decisions"]}
    assert 31 in pruned and result.record["boundary"]["end"] <= 30  # the traceback stays, cut to one line
    assert "customer_9921" not in "\n".join(text_of(m) for m in result.messages if m.get("role") == "tool")
    assert any("customer_9921" in anchor for anchor in parse_anchor_block(summary_of(result.messages)))
