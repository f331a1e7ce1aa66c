"""compress(): outcomes, the guarantees, and regressions of known Hermes faults."""

from __future__ import annotations

import dataclasses
import json

from hermeslab.core.config import Config
from hermeslab.core.messages import text_of, validate_messages
from hermeslab.core.tokens import (
    RememberedSizes,
    TokenCounter,
    list_estimator,
    message_estimator,
    summed_list_estimator,
)
from hermeslab.context.assemble import split_summary
from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import (ORIGINAL_TASK_LABEL, ORIGINAL_TASK_MAX_CHARS, CompressionState, compress,
                                        plan_compression)
from hermeslab.policies.loading import apply_preset
from hermeslab.context.types import SUMMARY_END_MARKER, SUMMARY_PREFIX, SummaryOutcome, is_summary_message

from test_context_conversations import (FailingSummariser, FixedSummariser, agent_session, assistant, call, system,
                                        text, tool, tool_turn, user)

TASK = "Fix the failing login test in auth.py"


def cfg(preset: str = "seed"):
    return apply_preset(Config(), preset).compression


def run(messages, preset="seed", window=16_000, state=None, summariser=None, **kwargs):
    c = cfg(preset)
    return compress(messages, cfg=c, budgets=derive_budgets(c, window), state=state or CompressionState(),
                    summariser=summariser or FixedSummariser(), **kwargs)


def summaries(messages):
    return [m for m in messages if is_summary_message(m)]


def test_a_compression_records_every_decision_as_json():
    messages = agent_session(turns=12, output_words=600)
    state = CompressionState()
    result = run(messages, state=state)
    assert result.record["outcome"] == "compressed" and result.effective and not result.aborted
    assert result.tokens_after < result.tokens_before and len(result.messages) < len(messages)
    assert result.condensed == len(result.plan.span) > 0
    record = json.loads(json.dumps(result.record))
    assert {"budgets", "prune", "boundary", "summary", "assembly", "latest_user", "tokens_before"} <= set(record)
    assert record["prune"]["decisions"] and record["boundary"]["reasons"]
    assert state.compression_count == 1 and state.previous_summary == result.summary_text
    validate_messages(result.messages)


def test_nothing_to_summarise_leaves_the_summariser_alone():
    summariser = FixedSummariser()
    result = run(agent_session(turns=1), summariser=summariser)
    assert result.record["outcome"] == "nothing_to_summarise" and summariser.requests == []
    assert not result.effective and result.summary_text is None


# ---------------------------------------------------------------- regressions


def test_the_task_survives_a_second_compaction():
    """Hermes loses the opening task once a second compaction summarises it; the seed quotes it."""
    quiet = FixedSummariser("## Active Task\nlatest case\n\n## Completed Actions\n1. ran cases")
    for preset, survives in (("seed", True), ("hermes-0.19", False)):
        state = CompressionState()
        first = run(agent_session(turns=12, output_words=600, task=TASK), preset=preset, state=state, summariser=quiet)
        grown = first.messages + agent_session(turns=12, output_words=600, task="Also check case 99",
                                               call_prefix="more")[1:]
        second = run(grown, preset=preset, state=state, summariser=quiet)
        assert second.record["outcome"] == "compressed"
        assert any(TASK in text_of(m) for m in second.messages) is survives, preset
        if survives:
            assert second.record["original_task"]["kept_verbatim"] is False
            assert second.summary_text.startswith(f"{ORIGINAL_TASK_LABEL} {TASK}")
    assert quiet.requests[-1].focus is None  # Hermes preset: nothing asked
    assert second.record["original_task"] == {}


def test_the_task_is_offered_to_the_summariser_and_added_when_it_is_left_out():
    state = CompressionState(compression_count=1, original_task=TASK)
    summariser = FixedSummariser()
    result = run(agent_session(turns=12, output_words=600, task="Look at case 0"), state=state, summariser=summariser,
                 focus="the database layer")
    assert summariser.requests[0].focus == f"the database layer\n\n{ORIGINAL_TASK_LABEL} {TASK}"
    assert result.summary_text.startswith(f"{ORIGINAL_TASK_LABEL} {TASK}\n\n")
    assert result.record["original_task"] == {"kept_verbatim": False, "quoted_by_summariser": False}


def test_the_summary_is_framed_as_reference_and_the_latest_request_follows_it():
    """A summary read as a new instruction: the frame says it is history and points past itself."""
    messages = agent_session(turns=12, output_words=600)
    result = run(messages)
    summary = summaries(result.messages)
    assert len(summary) == 1
    content = summary[0]["content"]
    assert content.startswith(SUMMARY_PREFIX) and content.endswith(SUMMARY_END_MARKER)
    for phrase in ("REFERENCE ONLY", "not as instructions", "already been handled", "latest user message"):
        assert phrase in content
    where = result.messages.index(summary[0])
    latest = messages[-1]
    assert latest["role"] == "user" and result.messages[-1] == latest and len(result.messages) - 1 > where


def test_a_failing_summariser_never_drops_the_middle():
    messages = agent_session(turns=12, output_words=600)
    state = CompressionState()
    failing = FailingSummariser()
    result = run(messages, state=state, summariser=failing)
    assert failing.calls == 1
    assert result.aborted and result.messages == messages and all(a is b for a, b in zip(result.messages, messages))
    assert result.summary_error == "ConnectionError: connection refused"
    # An abort changes no verdict; only the conversation's first request is remembered.
    first_request = next(m["content"] for m in messages if m["role"] == "user")
    assert state == CompressionState(original_task=first_request)
    assert result.record["outcome"] == "aborted" and not result.effective
    empty = run(messages, summariser=FixedSummariser("   "))
    assert empty.aborted and empty.messages == messages


def test_hermes_abort_returns_its_pruned_copy_without_dropping_messages():
    """Hermes hands back its pruned copy on abort (reproduced); every message is still there."""
    messages = agent_session(turns=12, output_words=600)
    result = run(messages, preset="hermes-0.19", summariser=FailingSummariser())
    assert result.aborted and len(result.messages) == len(messages) and result.messages != messages


def test_fallback_outcomes_are_reported():
    fallback = SummaryOutcome(body="## Active Task\nfrom the extractive fallback", fallback_used=True,
                              error="TimeoutError: slow")

    class Falling:
        def summarise(self, request):
            return fallback

    result = run(agent_session(turns=12, output_words=600), summariser=Falling())
    assert result.fallback_used and result.summary_error == "TimeoutError: slow" and not result.aborted


def test_iterative_compression_folds_the_old_summary():
    state = CompressionState()
    summariser = FixedSummariser()
    first = run(agent_session(turns=12, output_words=600), state=state, summariser=summariser)
    tail_turns = [m for i in range(10) for m in tool_turn(f"n{i}", "terminal", {"command": f"make {i}"}, text(600, i))]
    second = run(first.messages + [user("keep going")] + tail_turns, state=state, summariser=summariser)
    request = summariser.requests[-1]
    assert request.previous_summary == first.summary_text
    assert not any(is_summary_message(m) for m in request.span)
    assert len(summaries(second.messages)) == 1 and state.compression_count == 2


def test_a_resumed_conversation_gets_one_summary_in_the_seed_and_two_in_hermes():
    """Hermes sizes the head before it notices the old summary, which then stays beside the new one."""
    old = {"role": "user", "content": f"{SUMMARY_PREFIX}\nolder work\n\n{SUMMARY_END_MARKER}"}
    messages = [system(), user(TASK), old, assistant("continuing")]
    for i in range(20):
        messages += tool_turn(f"c{i}", "terminal", {"command": f"step {i}"}, text(600, i))
        messages += [assistant(f"step {i} done"), user(f"next {i}")]
    assert len(summaries(run(messages).messages)) == 1
    assert len(summaries(run(messages, preset="hermes-0.19").messages)) == 2


def test_latest_request_right_after_the_head_stays_verbatim():
    """Hermes summarises it with its turn (and its wrapper re-inserts it); the seed keeps it in the head."""
    messages = [system(), user(TASK)]
    for i in range(30):
        messages += tool_turn(f"c{i}", "terminal", {"command": f"step {i}"}, text(400, i), note=f"Step {i}.")
    state = CompressionState(compression_count=1)
    hermes = run(messages, preset="hermes-0.19", state=CompressionState(compression_count=1))
    seed = run(messages, state=state)
    assert hermes.record["latest_user"]["reinserted"] and not seed.record["latest_user"]["reinserted"]
    assert not hermes.record["latest_user"]["into_summary"]  # Hermes never merges a request it puts back
    assert seed.messages[:2] == messages[:2]
    for result in (hermes, seed):
        assert any(m == messages[1] for m in result.messages)


def test_a_request_behind_a_merged_summary_is_the_latest_user_message():
    """An imported conversation whose newest user message is a summary merged ahead of the real request."""
    ask = "Now deploy the fix to staging."
    merged = {"role": "user", "content": f"{SUMMARY_PREFIX}\nolder work\n\n{SUMMARY_END_MARKER}\n\n{ask}"}
    messages = [system(), user(TASK), assistant("On it."), merged]
    for i in range(20):
        messages += tool_turn(f"c{i}", "terminal", {"command": f"step {i}"}, text(600, i), note=f"Step {i}.")
    result = run(messages)
    assert result.record["outcome"] == "compressed"
    assert result.record["latest_user"] == {"index": 3, "merged": True, "reinserted": True, "into_summary": False}
    after = [i for i, m in enumerate(result.messages) if m["role"] == "user" and m["content"] == ask]
    summary_at = max(i for i, m in enumerate(result.messages) if is_summary_message(m))
    assert len(after) == 1 and after[0] > summary_at
    assert all(m["role"] == "tool" for m in result.messages[summary_at + 1:after[0]])
    assert [m for m in result.messages if m["role"] == "user" and m["content"] == TASK] == [user(TASK)]
    validate_messages(result.messages)
    hermes = run(messages, preset="hermes-0.19")  # Hermes looks past the merged request to the task
    assert hermes.record["latest_user"]["index"] == 1 and not hermes.record["latest_user"]["merged"]


def _request_summarised_after_a_system_only_head() -> list[dict]:
    """A request whose own tool turn breaks the soft tail budget: the boundary summarises it (iterative head)."""
    filler = text(3_000)
    return [system(), user(TASK), assistant(filler), user("Now also the docs."),
            *tool_turn("c1", "terminal", {"command": "ls"}, "docs/ src/"),
            *tool_turn("c2", "terminal", {"command": "cat docs/a.md"}, filler),
            *tool_turn("c3", "terminal", {"command": "ls docs"}, "a.md")]


def user_pairs(messages):
    return [i for i in range(1, len(messages)) if messages[i - 1]["role"] == messages[i]["role"] == "user"]


def test_a_request_reinserted_after_a_user_role_summary_is_merged_into_it():
    """Put beside a user-role summary, the request made two user messages in a row; it now follows the end marker."""
    state = CompressionState(compression_count=1, previous_summary="earlier")
    result = run(_request_summarised_after_a_system_only_head(), state=state)
    assert result.record["outcome"] == "compressed" and result.record["assembly"]["summary_role"] == "user"
    assert result.record["latest_user"] == {"index": 3, "merged": False, "reinserted": True, "into_summary": True}
    summary = result.messages[1]
    assert is_summary_message(summary) and split_summary(summary) == (result.summary_text, "Now also the docs.")
    assert summary["content"].index(SUMMARY_END_MARKER) < summary["content"].index("Now also the docs.")
    assert user_pairs(result.messages) == [] and len(summaries(result.messages)) == 1
    validate_messages(result.messages)
    # The next compression reads the request back from the summary and puts it back once, verbatim.
    grown = result.messages + [m for i in range(8) for m in tool_turn(f"d{i}", "terminal", {"command": f"x {i}"},
                                                                        text(600, i))]
    second = run(grown, state=state)
    assert second.record["outcome"] == "compressed"
    assert second.record["latest_user"] == {"index": 1, "merged": True, "reinserted": True, "into_summary": True}
    assert split_summary(second.messages[1])[1] == "Now also the docs."
    assert "Now also the docs." not in split_summary(second.messages[1])[0]
    assert user_pairs(second.messages) == [] and len(summaries(second.messages)) == 1


def test_a_multimodal_request_keeps_its_parts_behind_the_summary():
    messages = _request_summarised_after_a_system_only_head()
    parts = [{"type": "text", "text": "Now also the docs."}, {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]
    messages[3] = user(parts)
    result = run(messages, state=CompressionState(compression_count=1, previous_summary="earlier"))
    assert result.record["latest_user"]["into_summary"]
    assert split_summary(result.messages[1])[1] == parts and user_pairs(result.messages) == []


def test_a_request_is_never_merged_into_an_assistant_message():
    """A request put back goes into no assistant message, nor after the results of the work it asked for (a
    model reading it last would do that work again): it opens the kept tail, behind its own summary."""
    filler = text(3_000)
    messages = [system(), user(TASK), assistant("On it."), user("Then the docs."),
                *tool_turn("c0", "terminal", {"command": "ls"}, filler), user("Now also the docs."),
                *tool_turn("c1", "terminal", {"command": "ls"}, "docs/ src/"),
                *tool_turn("c2", "terminal", {"command": "cat docs/a.md"}, filler),
                *tool_turn("c3", "terminal", {"command": "cat docs/b.md"}, filler),
                *tool_turn("c4", "terminal", {"command": "ls docs"}, "a.md")]
    result = run(messages, window=8_000)
    assert result.record["assembly"]["summary_role"] == "assistant"
    assert result.record["latest_user"] == {"index": 6, "merged": False, "reinserted": True, "into_summary": False}
    assert [m["role"] for m in result.messages[3:]] == ["user", "assistant", "user", "assistant", "tool"]
    assert is_summary_message(result.messages[4]) and result.messages[5] == user("Now also the docs.")
    assert result.messages[-1]["role"] == "tool"  # the request does not follow its own answer


def test_remembered_sizes_measure_each_message_once_and_sum_to_the_list_estimate():
    measured = []
    sizes = RememberedSizes(lambda message: measured.append(message) or len(message["content"]))
    ask = user("abc")
    assert [sizes(ask), sizes(dict(ask)), sizes(ask)] == [3, 3, 3] and len(measured) == 2
    messages = agent_session(turns=4)
    for preset in ("seed", "hermes-0.19"):
        c = cfg(preset)
        summed = summed_list_estimator(c, RememberedSizes(message_estimator(c)))
        assert summed(messages) == list_estimator(c)(messages)


def test_the_pipelines_short_lived_copies_are_counted_but_not_held():
    counter = TokenCounter()
    copy = {"role": "tool", "tool_call_id": "c1", "content": "[terminal] ran make -> 3 lines"}
    assert counter.count_message(copy, remember=False) == counter.count_message(dict(copy), remember=False)
    assert not counter._seen and len(counter._cache) == 1
    assert counter.count_message(copy) == counter.count_message(copy, remember=False) and len(counter._seen) == 1


def test_a_summary_that_would_grow_the_context_is_refused():
    messages = agent_session(turns=12, output_words=600)
    state = CompressionState()
    c = dataclasses.replace(cfg(), drop_when_summary_cannot_fit=False)
    result = compress(messages, cfg=c, budgets=derive_budgets(c, 16_000), state=state,
                      summariser=FixedSummariser(text(40_000)))
    assert result.record["outcome"] == "no_gain" and result.summary_text is None
    assert result.tokens_after <= result.tokens_before and state.compression_count == 0
    assert not summaries(result.messages)


def test_under_seed_a_summary_larger_than_its_span_gives_way_to_dropping_the_span():
    messages = agent_session(turns=12, output_words=600)
    result = run(messages, summariser=FixedSummariser(text(40_000)))
    assert result.record["outcome"] == "dropped_oldest" and result.summary_text is None
    assert result.record["summary"]["larger_than_span"]
    start, end = result.record["boundary"]["start"], result.record["boundary"]["end"]
    assert result.record["dropped_indices"] == list(range(start, end))
    assert result.condensed == end - start and result.tokens_after < result.tokens_before
    assert not summaries(result.messages) and result.messages[-1] == messages[-1]


def test_unanswered_calls_at_the_end_are_answered_by_the_seed_stub():
    messages = agent_session(turns=12, output_words=600) + [assistant("", [call("late", "terminal", {"command": "ls"})])]
    result = run(messages)
    assert result.messages[-1]["role"] == "tool" and result.messages[-1]["tool_call_id"] == "late"
    dropped = run(messages, preset="hermes-0.19")
    assert not dropped.messages[-1].get("tool_calls")
    assert all(m.get("tool_call_id") != "late" for m in dropped.messages)


def test_a_small_window_keeps_recent_tool_pairs_whole():
    messages = [system(), user(TASK), assistant("ok"), user("go")]
    for i in range(15):
        messages += tool_turn(f"c{i}", "terminal", {"command": f"step {i}"}, text(400, i))
        messages += [assistant(f"done {i}"), user(f"then {i}")]
    result = run(messages, window=8_000)
    validate_messages(result.messages)
    assert tool("c14", text(400, 14)) in result.messages


def test_a_long_task_is_quoted_by_its_opening():
    long_task = "Refactor the billing module. " + text(3_000)
    state = CompressionState(compression_count=1, original_task=long_task)
    result = run(agent_session(turns=12, output_words=600, task="Look at case 0"), state=state)
    assert result.summary_text.startswith(f"{ORIGINAL_TASK_LABEL} {long_task[:ORIGINAL_TASK_MAX_CHARS]} [...]")


def test_a_tail_walk_that_would_leave_less_than_a_summary_keeps_the_plain_budget():
    """Pruned, the history just passes the soft tail budget: the walk stops a few messages past the head."""
    state = CompressionState(compression_count=1)
    result = run(agent_session(turns=12, output_words=600), state=state)
    assert "span_under_summary_floor" in result.record["boundary"]["reasons"]
    assert result.record["outcome"] == "compressed" and result.record["summary"]["span_tokens"] >= 128
    hermes = run(agent_session(turns=12, output_words=600), preset="hermes-0.19",
                 state=CompressionState(compression_count=1))
    assert "span_under_summary_floor" not in hermes.record["boundary"]["reasons"]


def test_messages_between_the_head_and_an_earlier_summary_are_summarised_not_dropped():
    """A rotated session can hold turns before its previous summary; under seed they enter the new summary.

    Regression: the span began after the previous summary, so those turns left
    the context unsummarised and the compression counted 0 messages removed,
    which discarded an overflow compression whose result would have fitted.
    """
    head = [{"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Find the failing test and fix it."},
            {"role": "assistant", "content": "Looking at the suite first: " + "detail " * 200}]
    summary = {"role": "user", "content": f"{SUMMARY_PREFIX}\nEarlier work: ran the suite, 3 failures."}
    later = []
    for i in range(12):
        later += [{"role": "assistant", "content": f"Attempt {i}: " + "reasoning " * 150},
                  {"role": "user", "content": f"Result {i}: " + "output " * 150}]
    messages = head + [summary] + later + [{"role": "user", "content": "Now commit it."}]
    budgets = {p: derive_budgets(apply_preset(Config(), p).compression, 8_000) for p in ("seed", "hermes-0.19")}
    seed = plan_compression(messages, cfg=apply_preset(Config(), "seed").compression, budgets=budgets["seed"],
                            state=CompressionState(compression_count=1))
    assert seed.summary_index == 3 and seed.boundary.start <= 1
    assert messages[1] in seed.span and messages[2] in seed.span  # before the old summary, and summarised
    hermes = plan_compression(messages, cfg=apply_preset(Config(), "hermes-0.19").compression,
                              budgets=budgets["hermes-0.19"], state=CompressionState(compression_count=1))
    assert hermes.summary_index == 3 and hermes.boundary.start == 1
    assert messages[2] not in hermes.span  # Hermes summarises only what follows the old summary
