"""Replies that arrive but cannot be used as they are: empty, thinking-only, cut off, broken text."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from hermeslab.agent import Agent
from hermeslab.core.config import Config, RecoveryConfig
from hermeslab.core.events import EventBus, MessageAdded, Notice, RecoveryEvent
from hermeslab.core.messages import validate_messages
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage
from hermeslab.recovery import (
    CONTINUE_NOTICE,
    EMPTY_MARKER,
    NUDGE_TEXT,
    EmptyContext,
    EmptyRecovery,
    ProviderSlot,
    continuation_messages,
    malformed_tool_calls,
    raised_output_cap,
    repair_message_encoding,
    repair_surrogates,
    repaired_request,
    thinking_exhausted,
    visible_text,
)
from hermeslab.recovery.empty import prior_housekeeping_text
from hermeslab.recovery.repair import read_tool_arguments
from hermeslab.recovery.truncation import DEFAULT_OUTPUT_CAP, continuation_cap
from hermeslab.tools import builtin_registry

from scripted_provider import tool_call


def reply(content: str | None = "", *, finish: str = "stop", calls: list | None = None,
          reasoning: str | None = None) -> ChatResponse:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return ChatResponse(message=message, finish_reason=finish, usage=Usage(prompt_tokens=10, completion_tokens=2),
                        model="m", reasoning=reasoning)


class Replies:
    """Answers each request with the next scripted ChatResponse (or raises the next ProviderError)."""

    def __init__(self, steps: list[ChatResponse | ProviderError], name: str = "replies"):
        self.steps = list(steps)
        self.requests: list[ChatRequest] = []
        self.name = name

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError(f"{self.name} ran out of replies")
        step = self.steps.pop(0)
        if isinstance(step, ProviderError):
            raise step
        return step

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        yield self.complete(request)


def make_agent(tmp_path, steps, *, fallback: Replies | None = None, **overrides):
    config = Config().with_overrides({"tools.workspace": str(tmp_path), **overrides})
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    provider = Replies(steps)
    agent = Agent(provider, config=config, tools=builtin_registry(config.tools), bus=bus, sleep=lambda s: None,
                  fallbacks=[ProviderSlot(fallback, "backup-model")] if fallback else ())
    return agent, provider, events


def recoveries(events) -> list[tuple[str, str, str]]:
    return [(e.fault_class, e.action, e.outcome) for e in events if isinstance(e, RecoveryEvent)]


# ---------------------------------------------------------------- pure parts


def test_visible_text_ignores_thinking_blocks_even_unclosed_ones():
    assert visible_text({"content": "<think>plan</think>\n\nAnswer."}) == "Answer."
    assert visible_text({"content": "<think>still planning"}) == ""
    assert visible_text({"content": "<reasoning>x</reasoning>"}) == ""


def test_the_empty_ladder_runs_in_order_within_its_budgets():
    ladder = EmptyRecovery(RecoveryConfig(max_prefills=2, max_empty_retries=3))
    after_tools = EmptyContext(recent_tool_result=True)
    assert ladder.next_step(EmptyContext(partial_text="half an answer")) == "partial_stream"
    assert ladder.next_step(EmptyContext(prior_text="Noted.")) == "previous_content"
    assert ladder.next_step(after_tools) == "nudge"
    assert ladder.next_step(EmptyContext(recent_tool_result=True, reasoning=True)) == "prefill"
    assert ladder.next_step(EmptyContext(inline_thinking=True)) == "prefill"
    assert ladder.next_step(EmptyContext(inline_thinking=True)) == "retry"
    assert [ladder.next_step(after_tools) for _ in range(2)] == ["retry", "retry"]
    assert ladder.next_step(EmptyContext(fallback_available=True)) == "fallback"
    assert ladder.next_step(EmptyContext()) == "retry"
    ladder.retries = 3
    assert ladder.next_step(EmptyContext()) == "terminal"


def test_prior_text_counts_only_next_to_housekeeping_tools():
    todo = {"role": "assistant", "content": "I noted both tasks.",
            "tool_calls": [tool_call("a", "todo", "{}")]}
    read = {"role": "assistant", "content": "Let me look.", "tool_calls": [tool_call("b", "read_file", "{}")]}
    assert prior_housekeeping_text([{"role": "user", "content": "x"}, todo]) == "I noted both tasks."
    assert prior_housekeeping_text([todo, read]) == ""


def test_continuations_and_output_caps():
    assert continuation_messages(["one ", "two "]) == [
        {"role": "assistant", "content": "one "}, {"role": "user", "content": CONTINUE_NOTICE},
        {"role": "assistant", "content": "two "}, {"role": "user", "content": CONTINUE_NOTICE}]
    assert continuation_cap(None) == DEFAULT_OUTPUT_CAP and continuation_cap(1_000) == 1_000
    assert raised_output_cap(None) == 2 * DEFAULT_OUTPUT_CAP and raised_output_cap(4_096) == 8_192
    assert raised_output_cap(20_000) == 32_768 and raised_output_cap(50_000) == 50_000
    assert thinking_exhausted(reply("<think>long", finish="length"))
    assert not thinking_exhausted(reply("<think>x</think> Answer", finish="length"))
    assert thinking_exhausted(reply("", finish="length", reasoning="deep thoughts"))


def test_surrogate_halves_are_joined_and_lone_ones_replaced():
    assert repair_surrogates("rocket \ud83d\ude80!") == "rocket \U0001F680!"
    assert repair_surrogates("cut \ud83d") == "cut \ufffd"
    assert repair_surrogates("plain") == "plain"
    message = {"role": "assistant", "content": "a\udc80", "tool_calls": [tool_call("c", "f", '{"x": "\ud800"}')]}
    fixed = repair_message_encoding(message)
    assert fixed["content"] == "a\ufffd" and fixed["tool_calls"][0]["function"]["arguments"] == '{"x": "\ufffd"}'
    assert message["content"] == "a\udc80"
    assert repair_message_encoding({"role": "user", "content": [{"type": "text", "text": "ok"}]}) is None


def test_outgoing_repairs_leave_the_history_alone():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    history = [{"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "shot"}, image]},
               {"role": "assistant", "content": "x", "reasoning_details": [{"signature": "s"}]}]
    sent = repaired_request(history, {"strip_images", "drop_reasoning"})
    assert sent[0]["content"][1]["type"] == "text" and "image removed" in sent[0]["content"][1]["text"]
    assert "reasoning_details" not in sent[1]
    assert history[0]["content"][1] is image and "reasoning_details" in history[1]


def test_malformed_arguments_are_found_by_call_id():
    message = {"role": "assistant", "content": None, "tool_calls": [
        tool_call("ok", "f", '{"a": 1}'), tool_call("bad", "f", '{"a": 1'), tool_call("list", "f", "[1]")]}
    assert malformed_tool_calls(message) == ["bad", "list"]


def test_tool_arguments_are_read_once_and_the_reading_can_be_passed_on():
    message = {"role": "assistant", "content": "", "tool_calls": [
        tool_call("ok", "f", '{"a": 1}'), tool_call("bad", "f", '{"a": 1')]}
    parsed = read_tool_arguments(message)
    assert parsed[0] == {"a": 1}
    assert isinstance(parsed[1], ValueError) and "not valid JSON" in str(parsed[1])
    assert malformed_tool_calls(message, parsed) == ["bad"]
    assert malformed_tool_calls(message, [{}, ValueError("judged broken elsewhere")]) == ["bad"]
    with pytest.raises(ValueError):
        malformed_tool_calls(message, parsed[:1])


def test_a_reply_without_lone_surrogates_needs_no_repair():
    clean = {"role": "assistant", "content": "caf\u00e9 \U0001F680",
             "tool_calls": [tool_call("c", "f", '{"x": "\u00fc"}'), "not a call"]}
    assert repair_message_encoding(clean) is None
    broken = {**clean, "tool_calls": [tool_call("c", "f", '{"x": "\udc80"}')]}
    assert repair_message_encoding(broken)["tool_calls"][0]["function"]["arguments"] == '{"x": "\ufffd"}'


# ---------------------------------------------------------------- in the loop


def test_an_empty_reply_after_tools_gets_one_nudge_that_never_enters_the_history(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    agent, provider, events = make_agent(tmp_path, [
        reply(None, finish="tool_calls", calls=[tool_call("c1", "read_file", '{"path": "a.txt"}')]),
        reply(""), reply("a.txt says alpha")])
    result = agent.chat("what is in a.txt?")
    assert result.status == "completed" and result.text == "a.txt says alpha"
    nudged = provider.requests[2].messages
    assert nudged[-2:] == [{"role": "assistant", "content": EMPTY_MARKER}, {"role": "user", "content": NUDGE_TEXT}]
    assert nudged[-3]["role"] == "tool"
    assert all(m.get("content") not in (EMPTY_MARKER, NUDGE_TEXT) for m in agent.messages)
    assert recoveries(events) == [("empty", "nudge", "recovered")]
    validate_messages(agent.messages)


def test_a_thinking_only_reply_is_handed_back_as_a_prefill(tmp_path):
    agent, provider, events = make_agent(tmp_path, [reply("<think>They want a number.</think>"), reply("42")])
    assert agent.chat("what is 6*7?").text == "42"
    assert provider.requests[1].messages[-1] == {"role": "assistant", "content": "<think>They want a number.</think>"}
    assert recoveries(events) == [("empty", "prefill", "recovered")]


def test_empty_replies_are_retried_then_the_fallback_answers(tmp_path):
    backup = Replies([reply("from the backup")], name="backup")
    agent, provider, events = make_agent(tmp_path, [reply("")] * 4, fallback=backup)
    result = agent.chat("hello")
    assert result.text == "from the backup" and len(provider.requests) == 4
    assert backup.requests[0].model == "backup-model"
    assert [a for _, a, _ in recoveries(events)] == ["retry", "retry", "retry", "fallback"]
    assert any(isinstance(e, Notice) and "falling back" in e.text for e in events)


def test_without_any_step_left_the_turn_ends_visibly_as_empty(tmp_path):
    agent, provider, events = make_agent(tmp_path, [reply("<think>hmm</think>")] * 6)
    result = agent.chat("hello")
    assert result.text == EMPTY_MARKER and result.status == "failed"
    assert "no visible content" in result.error
    assert len(provider.requests) == 6  # the reply, two prefills, three retries
    # the unanswered message leaves the history (the next one must not follow it) but stays in the log
    assert [m["role"] for m in agent.messages] == ["system"]
    assert [e.message["content"] for e in events if isinstance(e, MessageAdded)][-1] == "hello"
    assert recoveries(events)[-1] == ("empty", "terminal", "gave up")


def test_a_broken_stream_followed_by_an_empty_reply_keeps_the_streamed_text(tmp_path):
    cut = ProviderError("the stream was interrupted after 20 characters", error_type="stream_interrupted",
                        body={"partial_text": "The answer is 42, as", "partial_tool_calls": []})
    agent, _, events = make_agent(tmp_path, [cut, reply("")])
    result = agent.chat("question")
    assert result.text == "The answer is 42, as" and agent.messages[-1]["content"] == "The answer is 42, as"
    assert ("empty", "partial_stream", "kept the text of the broken stream") in recoveries(events)


def test_text_sent_with_housekeeping_calls_is_the_answer_when_the_next_reply_is_empty(tmp_path):
    agent, _, _ = make_agent(tmp_path, [
        reply("I added both items to your list.", finish="tool_calls",
              calls=[tool_call("t", "todo", '{"action": "add", "items": ["a", "b"]}')]),
        reply("")])
    result = agent.chat("add todos: a; b")
    assert result.status == "completed" and result.text == "I added both items to your list."


def test_a_cut_answer_is_continued_and_joined_into_one_message(tmp_path):
    agent, provider, events = make_agent(tmp_path, [
        reply("The first half, ", finish="length"), reply("the second ", finish="length"), reply("and the end.")])
    result = agent.chat("write a long answer")
    assert result.text == "The first half, the second and the end."
    assert [m["content"] for m in agent.messages if m["role"] == "assistant"] == [result.text]
    assert provider.requests[2].messages[-4:] == continuation_messages(["The first half, ", "the second "])
    assert [r.max_tokens for r in provider.requests] == [None, DEFAULT_OUTPUT_CAP, DEFAULT_OUTPUT_CAP]
    assert [(a, o) for _, a, o in recoveries(events)] == [("continue", "still truncated"), ("continue", "recovered")]


def test_an_answer_still_cut_after_the_continuations_is_kept_with_a_warning(tmp_path):
    agent, _, events = make_agent(tmp_path, [reply(f"part {i} ", finish="length") for i in range(4)],
                                  **{"recovery.max_continuations": 3})
    result = agent.chat("go")
    assert result.status == "completed" and result.text == "part 0 part 1 part 2 part 3 "
    assert any(isinstance(e, Notice) and "cut off at the output limit" in e.text for e in events)


def test_a_cut_tool_call_is_asked_again_and_never_run_half(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    agent, provider, _ = make_agent(tmp_path, [
        reply(None, finish="length", calls=[tool_call("c1", "read_file", '{"pa')]),
        reply(None, finish="tool_calls", calls=[tool_call("c2", "read_file", '{"path": "a.txt"}')]),
        reply("alpha it is")])
    assert agent.chat("read a.txt").text == "alpha it is"
    calls = [m for m in agent.messages if m.get("tool_calls")]
    assert len(calls) == 1 and calls[0]["tool_calls"][0]["id"] == "c2"
    assert provider.requests[1].max_tokens == 2 * DEFAULT_OUTPUT_CAP


def test_a_reply_cut_while_thinking_ends_the_turn_with_advice(tmp_path):
    agent, _, _ = make_agent(tmp_path, [reply("<think>and then, and then", finish="length")])
    result = agent.chat("hard question")
    assert result.status == "failed" and "raise model.max_tokens" in result.error


def test_broken_tool_arguments_are_asked_again_before_any_tool_runs(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    agent, provider, events = make_agent(tmp_path, [
        reply(None, finish="tool_calls", calls=[tool_call("c1", "read_file", '{"path": "a.txt"')]),
        reply(None, finish="tool_calls", calls=[tool_call("c2", "read_file", '{"path": "a.txt"}')]),
        reply("alpha")])
    assert agent.chat("read a.txt").text == "alpha"
    ran = [m["tool_call_id"] for m in agent.messages if m["role"] == "tool"]
    assert ran == ["c2"]
    assert recoveries(events) == [("malformed_tool_arguments", "retry", "recovered")]


def test_arguments_still_broken_after_the_retries_reach_the_tool_as_sent_and_the_history_wrapped(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    agent, _, _ = make_agent(tmp_path, [
        reply(None, finish="tool_calls", calls=[tool_call("c1", "read_file", '{"path": "a.txt"}'),
                                                tool_call("c2", "read_file", '{"path": "a.txt"')]),
        reply("done")], **{"recovery.max_argument_retries": 0})
    assert agent.chat("read a.txt").text == "done"
    [assistant] = [m for m in agent.messages if m.get("tool_calls")]
    sent = [call["function"]["arguments"] for call in assistant["tool_calls"]]
    assert sent == ['{"path": "a.txt"}', json.dumps({"_unparsed_arguments": '{"path": "a.txt"'})]
    results = {m["tool_call_id"]: m["content"] for m in agent.messages if m["role"] == "tool"}
    assert "alpha" in results["c1"]
    assert results["c2"].startswith("invalid arguments for read_file: arguments are not valid JSON")


def test_lone_surrogates_in_a_reply_are_repaired_before_they_reach_the_history(tmp_path):
    agent, _, events = make_agent(tmp_path, [reply("Launch \ud83d\ude80 at noon \ud83d")])
    result = agent.chat("when?")
    assert result.text == "Launch \U0001F680 at noon \ufffd"
    json.dumps(agent.messages, ensure_ascii=False).encode("utf-8")
    assert ("codec_error", "repair_encoding", "repaired the reply's text") in recoveries(events)


@pytest.mark.parametrize("steps", [[reply("")], [reply("", finish="length")]])
def test_the_empty_budget_is_bounded_by_its_settings(tmp_path, steps):
    agent, provider, _ = make_agent(tmp_path, steps * 2, **{"recovery.max_empty_retries": 1})
    result = agent.chat("x")
    assert result.text == EMPTY_MARKER and len(provider.requests) == 2
