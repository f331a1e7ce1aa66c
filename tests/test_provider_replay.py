"""The replay provider: recorded replies in order, usage measured on what was sent, clear refusals."""

from __future__ import annotations

import json

import pytest

from hermeslab.core.rough import rough_messages_tokens, rough_tool_schema_tokens
from hermeslab.core.tokens import default_counter
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta
from hermeslab.providers.replay import ReplayExhausted, ReplayProvider, RoughCounter, make_counter
from hermeslab.recovery import SessionSize, classify

TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Find an order by id.",
                                           "parameters": {"type": "object",
                                                          "properties": {"order": {"type": "string"}}}}}]
CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"order": "A-17"})}}
RECORDING = [
    {"role": "system", "content": "You answer questions about orders."},
    {"role": "user", "content": "Where is order A-17?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "A-17 shipped on 2024-05-02 from depot 4411."},
    {"role": "assistant", "content": "Order A-17 shipped on 2 May from depot 4411."},
]


def request(messages: list[dict], tools: list[dict] | None = TOOLS) -> ChatRequest:
    return ChatRequest(messages=messages, model="m", tools=tools)


def test_each_call_gets_the_next_recorded_reply_with_its_tool_calls():
    provider = ReplayProvider(RECORDING)
    first = provider.complete(request(RECORDING[:2]))
    second = provider.complete(request(RECORDING[:4]))
    assert first.message == {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert first.finish_reason == "tool_calls"
    assert second.message == {"role": "assistant", "content": "Order A-17 shipped on 2 May from depot 4411."}
    assert second.finish_reason == "stop"
    assert [call.reply_index for call in provider.served] == [0, 1]


def test_a_reply_is_a_copy_the_caller_may_change():
    provider = ReplayProvider(RECORDING)
    provider.complete(request(RECORDING[:2])).message["content"] = "changed"
    assert provider.replies[0]["content"] == ""


def test_stream_yields_the_text_then_exactly_one_final_response():
    provider = ReplayProvider(RECORDING)
    provider.position = 1
    items = list(provider.stream(request(RECORDING[:4])))
    assert isinstance(items[-1], ChatResponse) and all(isinstance(i, StreamDelta) for i in items[:-1])
    assert "".join(i.text for i in items[:-1]) == items[-1].message["content"]


def test_tiktoken_usage_counts_the_request_as_sent_and_the_recorded_reply():
    provider = ReplayProvider(RECORDING)
    sent = RECORDING[:2]
    usage = provider.complete(request(sent)).usage
    assert usage.prompt_tokens == default_counter.count_request(sent, TOOLS)
    assert usage.completion_tokens > 0
    without_tools = ReplayProvider(RECORDING).complete(request(sent, tools=None)).usage
    assert usage.prompt_tokens - without_tools.prompt_tokens == default_counter.count_tools(TOOLS)


def test_prompt_counts_stay_exact_when_the_history_grows_or_is_rewritten():
    summary = {"role": "user", "content": "Summary: order A-17 was looked up."}
    requests = [RECORDING[:2], RECORDING[:4], [RECORDING[0], summary, RECORDING[3]], RECORDING[:4], RECORDING[:1]]
    replies = [{"role": "assistant", "content": f"reply {i}"} for i in range(len(requests))]
    for counter in ("tiktoken", "rough"):
        provider = ReplayProvider(replies, counter=counter)
        for sent in requests:
            usage = provider.complete(request(sent)).usage
            assert usage.prompt_tokens == provider.counter.count_request(sent, TOOLS)


def test_rough_usage_is_what_hermes_measures_chars_over_four():
    provider = ReplayProvider(RECORDING, counter="rough")
    sent = RECORDING[:4]
    provider.position = 1
    usage = provider.complete(request(sent)).usage
    assert usage.prompt_tokens == rough_messages_tokens(sent) + rough_tool_schema_tokens(TOOLS)
    reply = RECORDING[4]["content"]
    assert usage.completion_tokens == (len(reply) + 3) // 4


def test_the_rough_counter_speaks_the_token_counter_interface():
    counter = RoughCounter()
    message = RECORDING[3]
    assert counter.count_message(message) == rough_messages_tokens([message])
    assert counter.count_messages(RECORDING) == rough_messages_tokens(RECORDING)
    assert counter.count_request(RECORDING, TOOLS) == rough_messages_tokens(RECORDING) + rough_tool_schema_tokens(TOOLS)
    assert make_counter("tiktoken") is default_counter
    with pytest.raises(ValueError, match="unknown token counter 'words'"):
        make_counter("words")


def test_running_past_the_end_of_the_recording_is_a_clear_refusal():
    provider = ReplayProvider(RECORDING)
    provider.complete(request(RECORDING[:2]))
    provider.complete(request(RECORDING[:4]))
    with pytest.raises(ReplayExhausted, match="reply 3 was asked for, but the recording holds only 2"):
        provider.complete(request(RECORDING))
    assert provider.unanswered == 1


def test_a_call_past_the_narrowed_end_is_refused_as_a_malformed_request():
    provider = ReplayProvider(RECORDING)
    provider.end = 1
    provider.complete(request(RECORDING[:2]))
    with pytest.raises(ReplayExhausted, match="comes after another message") as caught:
        provider.complete(request(RECORDING[:4]))
    assert isinstance(caught.value, ProviderError) and caught.value.status == 400
    assert classify(caught.value, SessionSize(tokens=100, messages=4, window=65_536)).name == "format_error"
    assert provider.position == 1


def test_a_prompt_above_the_window_is_refused_like_a_real_endpoint_and_keeps_its_reply():
    provider = ReplayProvider(RECORDING, context_length=50)
    with pytest.raises(ProviderError) as caught:
        provider.complete(request(RECORDING[:2]))
    assert caught.value.status == 400 and caught.value.context_limit == 50
    assert classify(caught.value, SessionSize(tokens=300, messages=2, window=50)).name == "context_overflow"
    assert provider.position == 0 and provider.refused == 1 and provider.served == []
    provider.context_length = None
    assert provider.complete(request(RECORDING[:2])).message["tool_calls"] == [CALL]


@pytest.mark.parametrize("messages, error", [
    ("not a list", TypeError),
    ([{"role": "user", "content": "hi"}, "oops"], TypeError),
])
def test_bad_recordings_are_named(messages, error):
    with pytest.raises(error):
        ReplayProvider(messages)


@pytest.mark.parametrize("context_length", [0, -5, 1.5, True])
def test_a_window_must_be_a_positive_integer(context_length):
    with pytest.raises(ValueError, match="context_length must be a positive integer"):
        ReplayProvider(RECORDING, context_length=context_length)


def test_a_counter_must_be_a_name_or_a_token_counter():
    with pytest.raises(TypeError, match="counter must be a name"):
        ReplayProvider(RECORDING, counter=42)
