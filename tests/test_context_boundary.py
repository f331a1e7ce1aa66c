"""Phase 2: the tail walk, its floors, alignment and the two anchors; and the estimators."""

from __future__ import annotations

import pytest

from hermeslab.core.config import Config
from hermeslab.core.rough import rough_message_tokens, rough_messages_tokens
from hermeslab.context.assemble import split_summary
from hermeslab.context.boundary import choose_boundary, min_tail_messages
from hermeslab.context.budget import Budgets, derive_budgets
from hermeslab.context.pipeline import CompressionState, plan_compression
from hermeslab.policies.loading import apply_preset
from hermeslab.context.turns import is_real_user_message, last_real_user_index
from hermeslab.context.types import SUMMARY_END_MARKER, SUMMARY_PREFIX

from test_context_conversations import assistant, call, system, tool, user


def cfg(preset: str = "hermes-0.19"):
    return apply_preset(Config(), preset).compression


BUDGETS = Budgets(context_length=10_000, effective_window=10_000, threshold_tokens=500, tail_token_budget=100,
                  soft_tail_tokens=150, max_summary_tokens=500, threshold_percent=0.75)


def tokens(message: dict) -> int:
    """Test estimate: the size each message declares."""
    return message["_t"]


def t(message: dict, size: int) -> dict:
    return {**message, "_t": size}


def boundary(messages, preset="hermes-0.19", count=0, summary_index=None):
    return choose_boundary(messages, budgets=BUDGETS, cfg=cfg(preset), compression_count=count,
                           previous_summary_index=summary_index, estimate=tokens)


def chat(n: int, size: int) -> list[dict]:
    """System + 3 head messages + n alternating user/assistant messages of ``size`` tokens."""
    head = [t(system(), 1000), t(user("task"), 5), t(assistant("ok"), 5), t(user("more"), 5)]
    body = [t(user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}"), size) for i in range(n)]
    return head + body


# ---------------------------------------------------------------- estimators


def test_rough_message_estimate_follows_hermes_arithmetic():
    assert rough_message_tokens(user("x" * 403)) == 100 + 10
    tool_call = call("c1", "terminal", {"command": "ls"})
    assert rough_message_tokens(assistant("", [tool_call])) == 10 + len(str(tool_call)) // 4
    image = user([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:,"}}])
    assert rough_message_tokens(image) == (6_400 + 3) // 4 + 10
    assert rough_message_tokens({**assistant("hi"), "reasoning_content": "r" * 40}) == 10 + 10


def test_rough_list_estimate_counts_the_repr_and_flat_image_cost():
    plain = [user("hello")]
    assert rough_messages_tokens(plain) == (len(str(plain[0])) + 3) // 4
    image = user([{"type": "image_url", "image_url": {"url": "data:" + "A" * 10_000}}])
    assert rough_messages_tokens([image]) < 1_600


# ---------------------------------------------------------------- tail walk


@pytest.mark.parametrize("total, head_end, expected", [(20, 4, 8), (10, 4, 3), (9, 4, 3), (7, 4, 2), (6, 4, 0), (5, 4, 0)])
def test_min_tail_floor_is_capped_at_eight_and_leaves_two_to_summarise(total, head_end, expected):
    assert min_tail_messages(total, head_end, cfg()) == expected


def test_tail_stops_before_the_message_that_exceeds_the_soft_budget():
    b = boundary(chat(16, 15))  # 10 messages of 15 = 150 fit the soft budget exactly
    assert (b.start, b.end, b.reasons) == (4, 10, ("first_head",))


def test_whole_fitting_the_soft_budget_uses_the_plain_budget_keeping_the_crossing_message():
    b = boundary(chat(16, 8))  # 128 <= 150; the 13th message from the end crosses 100 and stays
    assert (b.start, b.end) == (4, 7)
    assert "whole_fits_soft_budget" in b.reasons


def test_whole_fitting_even_the_plain_budget_falls_back_to_the_minimum_tail():
    b = boundary(chat(16, 5))
    assert (b.start, b.end) == (4, 20 - 8)
    assert "whole_fits_budget" in b.reasons


def test_a_tool_group_is_never_split():
    group = [t(assistant("", [call("c1", "x", {}), call("c2", "x", {})]), 15), t(tool("c1", "r1"), 40),
             t(tool("c2", "r2"), 40)]
    messages = chat(4, 15) + group + [t(user("u") if i % 2 else assistant("a"), 10) for i in range(8)]
    b = boundary(messages)  # the soft walk stops between the two results
    assert (b.end, messages[b.end]) == (8, group[0])
    assert "tool_group" in b.reasons


def test_too_few_messages_leave_nothing_to_summarise():
    b = boundary(chat(4, 10))
    assert b.empty and b.reasons == ("too_small",)


# ---------------------------------------------------------------- anchors


def _tool_run(first_id: int, count: int, size: int) -> list[dict]:
    run = []
    for i in range(first_id, first_id + count):
        run += [t(assistant("", [call(f"c{i}", "terminal", {})]), size), t(tool(f"c{i}", "out"), size)]
    return run


def test_latest_user_message_pulls_the_cut_back():
    messages = chat(2, 10) + [t(user("the real request"), 10), t(assistant("on it"), 10)] + _tool_run(0, 12, 10)
    b = boundary(messages)
    assert messages[b.end]["content"] == "the real request"
    assert "latest_user" in b.reasons


def test_latest_user_right_after_the_head_is_summarised_by_hermes_and_kept_by_the_seed():
    messages = [t(system(), 1000), t(user("fix the bug"), 10)] + _tool_run(0, 20, 10)
    hermes = boundary(messages, count=1)
    assert (hermes.start, hermes.end) == (1, 4)  # user, assistant, its result
    assert "latest_user_turn_summarised" in hermes.reasons
    seed = boundary(messages, preset="seed", count=1)
    assert seed.start == 2 and seed.end > 4
    assert seed.head_size == 2 and "latest_user_in_head" in seed.reasons


def test_last_reply_anchor_hermes_keeps_it_at_any_cost_the_seed_caps_it():
    """An old text reply followed by a long tool-only run (the user spoke in the head)."""
    messages = chat(0, 10) + _tool_run(0, 3, 10) + [t(assistant("Here is my plan."), 10)] + _tool_run(3, 20, 10)
    hermes = boundary(messages)
    assert hermes.end == 8 and "last_reply" in hermes.reasons  # the reply, its group and the whole run stay
    seed = boundary(messages, preset="seed")
    # the soft walk stops inside a group that would take the tail past the budget: the group is summarised
    assert seed.end == 37 and "last_reply_over_budget" in seed.reasons


# ---------------------------------------------------------------- an existing summary


def _resumed(summary_at_head: bool = True) -> list[dict]:
    summary = {"role": "user", "content": f"{SUMMARY_PREFIX}\nearlier work\n\n{SUMMARY_END_MARKER}"}
    messages = [system(), user("task"), summary, assistant("continuing")]
    for i in range(30):
        messages += [assistant("", [call(f"c{i}", "terminal", {"command": "ls"})]), tool(f"c{i}", "x" * 800),
                     user(f"next {i}"), assistant(f"done {i}")]
    return messages


def test_seed_sees_an_existing_summary_before_sizing_the_head():
    messages = _resumed()
    plan = plan_compression(messages, cfg=cfg("seed"), budgets=derive_budgets(cfg("seed"), 16_000),
                            state=CompressionState())
    assert plan.boundary.head_size == 1 and plan.summary_index == 2
    assert plan.previous_summary == "earlier work"
    assert all(m["content"] != messages[2]["content"] for m in plan.span)


def test_hermes_protects_the_old_summary_inside_the_head():
    messages = _resumed()
    plan = plan_compression(messages, cfg=cfg(), budgets=derive_budgets(cfg(), 16_000), state=CompressionState())
    assert plan.boundary.head_size == 4 and plan.boundary.start == 4
    assert plan.summary_index == 2 and plan.previous_summary == "earlier work"


def test_scaffolding_and_summaries_are_not_real_user_messages():
    todo = {"role": "user", "content": "Active task list:\n- [ ] 1. tests", "_synthetic": True}
    legacy_flag = {"role": "user", "content": "continue", "_todo_snapshot_synthetic": True}
    summary = {"role": "user", "content": f"{SUMMARY_PREFIX}\nnotes\n\n{SUMMARY_END_MARKER}"}
    messages = [system(), user("the request"), assistant("ok"), todo, legacy_flag, summary, user("")]
    assert [is_real_user_message(m) for m in messages] == [False, True, False, False, False, False, False]
    assert last_real_user_index(messages) == 1


# ---------------------------------------------------------------- a tail that fits the budget (seed)


def seed_without(switch: str):
    return apply_preset(Config(), "seed").with_overrides({f"compression.{switch}": False}).compression


def boundary_with(messages, compression, count=0):
    return choose_boundary(messages, budgets=BUDGETS, cfg=compression, compression_count=count,
                           previous_summary_index=None, estimate=tokens)


def test_seed_tail_floor_is_the_newest_group_not_eight_messages():
    messages = chat(12, 100)  # every message alone is two thirds of the soft budget
    hermes = boundary(messages)
    assert hermes.end == len(messages) - 8 and "min_tail" in hermes.reasons
    seed = boundary(messages, preset="seed")
    assert seed.end == len(messages) - 1  # the last assistant reply; its user message would break the budget
    assert "latest_user_over_budget" in seed.reasons


def test_seed_summarises_a_group_that_would_break_the_budget_instead_of_keeping_it():
    group = [t(assistant("", [call("c1", "x", {})]), 10), t(tool("c1", "huge"), 1000)]
    after = [t(user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}"), 10) for i in range(8)]
    messages = chat(4, 10) + group + after
    hermes = boundary(messages)
    assert messages[hermes.end] is group[0] and "tool_group" in hermes.reasons
    seed = boundary(messages, preset="seed")
    assert messages[seed.end] is after[0] and "tool_group_summarised" in seed.reasons


def _latest_user_after_a_question(question_size: int) -> list[dict]:
    history = [t(user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}"), 10) for i in range(6)]
    return ([t(system(), 1000)] + history + [t(assistant("Which file?"), question_size), t(user("latest ask"), 10),
            t(assistant("", [call("c1", "x", {})]), 10), t(tool("c1", "ok"), 10), t(assistant("done"), 10)])


def test_seed_keeps_the_question_before_the_latest_user_message_so_the_summary_is_not_merged_into_it():
    messages = _latest_user_after_a_question(10)  # everything fits the soft budget
    user_at = last_real_user_index(messages)
    plain = boundary_with(messages, seed_without("keep_latest_user"), count=1)
    assert plain.end == user_at  # after a system-only head the summary would be merged into the request
    seed = boundary_with(messages, cfg("seed"), count=1)
    assert seed.end == user_at - 1 and "latest_user_not_merged" in seed.reasons


def test_seed_summarises_the_latest_user_message_when_the_question_before_it_is_too_big():
    messages = _latest_user_after_a_question(1000)
    user_at = last_real_user_index(messages)
    seed = boundary_with(messages, cfg("seed"), count=1)
    assert seed.end == user_at + 1 and "latest_user_reinserted" in seed.reasons


def test_the_pipeline_puts_a_summarised_latest_user_message_back_behind_the_user_role_summary():
    from hermeslab.context.pipeline import compress
    from hermeslab.context.types import SummaryOutcome

    class Fixed:
        def summarise(self, request):
            return SummaryOutcome(body="## Active Task\nearlier work")

    filler = "word " * 3_000  # about 3,000 tokens: one message breaks a 16K window's soft tail budget
    messages = [system(), user("fix the parser"), assistant(filler), user("now also the docs"),
                assistant("", [call("c1", "terminal", {"command": "ls"})]), tool("c1", "docs/ src/"),
                assistant("", [call("c2", "terminal", {"command": "cat docs/a.md"})]), tool("c2", filler),
                assistant("", [call("c3", "terminal", {"command": "ls docs"})]), tool("c3", "a.md")]
    seed = cfg("seed")
    result = compress(messages, cfg=seed, budgets=derive_budgets(seed, 16_000),
                      state=CompressionState(compression_count=1, previous_summary="earlier"), summariser=Fixed())
    assert result.summary_text is not None
    assert not [m for m in result.messages if m.get("role") == "user" and is_real_user_message(m)]
    summary = result.messages[1]  # after a system-only head the summary is a user message: the request joins it
    assert summary["role"] == "user" and split_summary(summary)[1] == "now also the docs"
    assert result.messages[2]["role"] == "assistant" and result.record["latest_user"]["into_summary"]
