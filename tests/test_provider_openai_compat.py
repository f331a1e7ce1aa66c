"""OpenAICompatProvider through the real ``openai`` SDK against a real local HTTP server."""

from __future__ import annotations

import email.utils
import http.server
import itertools
import json
import socket
import threading
import time
from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermeslab.core.config import Config
from hermeslab.providers import ProviderHandle, open_provider
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage
from hermeslab.providers.offline import MODEL_NAME, OfflineModel
from hermeslab.providers.openai_compat import (
    STREAMED_TOOLS_REFUSED,
    OpenAICompatProvider,
    alternating,
    StreamAssembler,
    retry_after_seconds,
    usage_from_dict,
)
from hermeslab.providers.server import CompletionEndpoint, LocalServer, Reply

READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
WRITE_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "write a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]},
    },
}


class RecordingProvider:
    """Hosts the offline model and keeps what it answered, to compare with what the client saw."""

    name = "recording"
    model = MODEL_NAME

    def __init__(self) -> None:
        self.inner = OfflineModel()
        self.responses: list[ChatResponse] = []
        self.stream_closed = threading.Event()

    def complete(self, request: ChatRequest) -> ChatResponse:
        response = self.inner.complete(request)
        self.responses.append(response)
        return response

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        self.stream_closed.clear()
        try:
            for item in self.inner.stream(request):
                if isinstance(item, ChatResponse):
                    self.responses.append(item)
                yield item
        finally:
            self.stream_closed.set()


class ScriptedFailure:
    """Raises a given error (or sleeps) on every call."""

    name = "failing"

    def __init__(self, error: Exception | None = None, delay: float = 0.0):
        self.error = error
        self.delay = delay

    def complete(self, request: ChatRequest) -> ChatResponse:
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return ChatResponse(message={"role": "assistant", "content": "late"}, usage=Usage(1, 1))

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        yield self.complete(request)


class CutMidStream:
    """Streams two words, then fails: the server must abandon the response."""

    name = "cutting"

    def complete(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("only streaming is used")

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        yield StreamDelta(text="partial ")
        yield StreamDelta(text="text ")
        raise ProviderError("upstream went away", status=502)


class Detailed:
    """Reports every usage field and separate reasoning text."""

    name = "detailed"
    usage = Usage(prompt_tokens=120, completion_tokens=30, cache_read_tokens=100, cache_write_tokens=7,
                  reasoning_tokens=12)

    def __init__(self, usage: Usage | None = usage):
        self.reported = usage

    def complete(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(message={"role": "assistant", "content": "answer"}, usage=self.reported,
                            model="detailed-1", reasoning="thinking it over")

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        yield StreamDelta(reasoning="thinking ")
        yield StreamDelta(reasoning="it over")
        yield StreamDelta(text="answer")
        yield self.complete(request)


@pytest.fixture(scope="module")
def offline():
    provider = RecordingProvider()
    with LocalServer(provider, chunk_delay=0.0) as server:
        client = OpenAICompatProvider(server.base_url, None, MODEL_NAME)
        yield client, provider, server
        client.close()


def hosted(provider, **server_options) -> tuple[LocalServer, OpenAICompatProvider]:
    server = LocalServer(provider, **server_options)
    server.start()
    return server, OpenAICompatProvider(server.base_url, server_options.get("api_key"), "test-model", timeout=5)


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def collect(items) -> tuple[list[StreamDelta], ChatResponse]:
    items = list(items)
    assert isinstance(items[-1], ChatResponse)
    assert all(isinstance(item, StreamDelta) for item in items[:-1])
    return items[:-1], items[-1]


# ---------------------------------------------------------------- success paths


@pytest.mark.parametrize("text, tools", [
    ("who are you?", None),
    ("read a.txt and b.txt", [READ_TOOL]),
    ('write "a longer piece of content that spans several fragments" to out/notes.txt', [WRITE_TOOL]),
])
def test_complete_and_stream_give_the_same_message_as_the_hosted_model(offline, text, tools):
    client, provider, _ = offline
    request = ChatRequest(messages=user(text), tools=tools)
    completed = client.complete(request)
    deltas, streamed = collect(client.stream(request))
    assert completed.message == streamed.message == OfflineModel().complete(request).message
    assert completed.finish_reason == streamed.finish_reason
    assert "".join(d.text for d in deltas) == (streamed.message["content"] or "")
    assert completed.model == streamed.model == MODEL_NAME


def test_tool_call_fragments_are_assembled_by_index(offline):
    client, _, _ = offline
    content = "x" * 100
    request = ChatRequest(messages=user(f'write "{content}" to a.txt and write "{content}!" to b.txt'), tools=[WRITE_TOOL])
    _, response = collect(client.stream(request))
    calls = response.message["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "a.txt", "content": content}, {"path": "b.txt", "content": content + "!"}]
    assert all(c["id"].startswith("call_") and c["type"] == "function" for c in calls)
    assert response.message["content"] is None and response.finish_reason == "tool_calls"


def test_usage_seen_by_the_client_equals_what_the_server_reported(offline):
    client, provider, _ = offline
    request = ChatRequest(messages=[{"role": "system", "content": "be brief"}, *user("count to 25")])
    completed = client.complete(request)
    assert completed.usage == provider.responses[-1].usage
    _, streamed = collect(client.stream(request))
    assert streamed.usage == provider.responses[-1].usage
    assert streamed.usage.prompt_tokens > 0 and streamed.usage.completion_tokens > 25


def test_every_usage_field_and_reasoning_cross_the_wire():
    server, client = hosted(Detailed())
    try:
        completed = client.complete(ChatRequest(messages=user("hi")))
        deltas, streamed = collect(client.stream(ChatRequest(messages=user("hi"))))
    finally:
        server.stop()
    assert completed.usage == streamed.usage == Detailed.usage
    assert completed.reasoning == streamed.reasoning == "thinking it over"
    assert [d.reasoning for d in deltas if d.reasoning] == ["thinking ", "it over"]
    assert streamed.model == "detailed-1"


def test_a_stream_without_usage_gives_none():
    server, client = hosted(Detailed(usage=None))
    try:
        _, streamed = collect(client.stream(ChatRequest(messages=user("hi"))))
    finally:
        server.stop()
    assert streamed.usage is None and streamed.message["content"] == "answer"


def test_usage_mapping_reads_other_vendors_cache_fields():
    assert usage_from_dict(None) is None
    assert usage_from_dict({"prompt_tokens": 10, "completion_tokens": 2, "cache_read_input_tokens": 6,
                            "cache_creation_input_tokens": 3}) == Usage(10, 2, 6, 3, 0)
    assert usage_from_dict({"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 4}) == Usage(10, 2, 4)
    assert usage_from_dict({"prompt_tokens": 9, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 8},
                            "completion_tokens_details": {"reasoning_tokens": 3}}) == Usage(9, 5, 8, 0, 3)


def test_stopping_early_releases_the_connection(offline):
    client, provider, server = offline
    server.chunk_delay = 0.01
    try:
        stream = client.stream(ChatRequest(messages=user("count to 2000")))
        received = [next(stream) for _ in range(3)]
        stream.close()
        assert [d.text for d in received] == ["1, ", "2, ", "3, "]
        assert provider.stream_closed.wait(5), "the server kept producing for a client that left"
    finally:
        server.chunk_delay = 0.0
    assert client.complete(ChatRequest(messages=user("who are you"))).message["content"]


def test_open_provider_starts_the_offline_model_behind_a_local_server():
    with open_provider(Config()) as handle:
        assert isinstance(handle, ProviderHandle) and handle.server is not None
        assert handle.provider.name == MODEL_NAME
        response = handle.provider.complete(ChatRequest(messages=user("ls"), tools=[READ_TOOL]))
        assert "`list_dir` tool" in response.message["content"]
        assert handle.server.calls == 1
        base_url = handle.server.base_url
    with pytest.raises(ProviderError) as excinfo:
        OpenAICompatProvider(base_url, None, MODEL_NAME, timeout=2).complete(ChatRequest(messages=user("hi")))
    assert excinfo.value.error_type == "APIConnectionError"


def test_open_provider_uses_a_configured_endpoint_without_a_server():
    handle = open_provider(Config.from_dict({"model": {"name": "m", "base_url": "http://127.0.0.1:9/v1"}}))
    try:
        assert handle.server is None
        assert isinstance(handle.provider, OpenAICompatProvider) and handle.provider.model == "m"
    finally:
        handle.close()


# ---------------------------------------------------------------- errors


def test_a_rate_limit_keeps_status_message_type_and_retry_after():
    error = ProviderError("slow down: 30 requests per minute", status=429, error_type="rate_limit_exceeded",
                          retry_after=7)
    server, client = hosted(ScriptedFailure(error))
    try:
        for call in (client.complete, lambda request: list(client.stream(request))):
            with pytest.raises(ProviderError) as excinfo:
                call(ChatRequest(messages=user("hi")))
            failure = excinfo.value
            assert failure.status == 429
            assert failure.message == "slow down: 30 requests per minute"
            assert failure.error_type == "rate_limit_exceeded"
            assert failure.retry_after == 7.0
            assert failure.body["error"]["type"] == "rate_limit_error"
    finally:
        server.stop()


def test_a_wrong_api_key_is_a_401():
    server, _ = hosted(OfflineModel(), api_key="sekret")
    try:
        wrong = OpenAICompatProvider(server.base_url, "nope", MODEL_NAME, timeout=5)
        with pytest.raises(ProviderError) as excinfo:
            wrong.complete(ChatRequest(messages=user("hi")))
        assert excinfo.value.status == 401 and excinfo.value.error_type == "invalid_api_key"
        assert "API key" in excinfo.value.message
        right = OpenAICompatProvider(server.base_url, "sekret", MODEL_NAME, timeout=5)
        assert right.complete(ChatRequest(messages=user("who are you"))).message["content"]
    finally:
        server.stop()


def test_an_invalid_conversation_is_a_400_with_the_reason(offline):
    client, _, _ = offline
    with pytest.raises(ProviderError) as excinfo:
        client.complete(ChatRequest(messages=[{"role": "tool", "tool_call_id": "call_x", "content": "orphan"}]))
    assert excinfo.value.status == 400
    assert "answers no open tool call" in excinfo.value.message
    assert excinfo.value.error_type == "invalid_request_error"


def test_a_stream_cut_by_the_server_is_an_interruption_with_the_partial_text():
    server, client = hosted(CutMidStream())
    try:
        stream = client.stream(ChatRequest(messages=user("hi")))
        received = []
        with pytest.raises(ProviderError) as excinfo:
            for item in stream:
                received.append(item)
        assert [d.text for d in received] == ["partial ", "text "]
        assert excinfo.value.error_type == "stream_interrupted"
        assert excinfo.value.body == {"partial_text": "partial text ", "partial_tool_calls": []}
        assert server.calls == 1
    finally:
        server.stop()


class _BrokenChunkHandler(http.server.BaseHTTPRequestHandler):
    """Sends one good chunk, then one that is not JSON."""

    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        good = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "half"}, "finish_reason": None}]}
        self.wfile.write(b"data: " + json.dumps(good).encode() + b"\n\n")
        self.wfile.write(b"data: {\"choices\": [oops\n\n")


def test_an_invalid_chunk_is_an_interruption_not_a_short_answer():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BrokenChunkHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        client = OpenAICompatProvider(f"http://127.0.0.1:{httpd.server_address[1]}/v1", None, "m", timeout=5)
        with pytest.raises(ProviderError) as excinfo:
            list(client.stream(ChatRequest(messages=user("hi"))))
        assert excinfo.value.error_type == "stream_interrupted"
        assert excinfo.value.body["partial_text"] == "half"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _NoChoices(CompletionEndpoint):
    def respond(self, call_index, payload):
        return Reply(body={"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []})


def test_a_response_without_choices_is_invalid():
    server, client = hosted(OfflineModel())
    server.endpoint = _NoChoices(server.provider)
    try:
        with pytest.raises(ProviderError) as excinfo:
            client.complete(ChatRequest(messages=user("hi")))
        assert excinfo.value.error_type == "invalid_response"
    finally:
        server.stop()


def test_a_slow_server_is_a_timeout():
    server, _ = hosted(ScriptedFailure(delay=1.0))
    try:
        client = OpenAICompatProvider(server.base_url, None, "m", timeout=0.2)
        with pytest.raises(ProviderError) as excinfo:
            client.complete(ChatRequest(messages=user("hi")))
        assert excinfo.value.error_type == "APITimeoutError" and excinfo.value.status is None
    finally:
        server.stop()


def test_nothing_listening_is_a_connection_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", None, "m", timeout=2)
    with pytest.raises(ProviderError) as excinfo:
        client.complete(ChatRequest(messages=user("hi")))
    assert excinfo.value.error_type == "APIConnectionError" and excinfo.value.status is None
    assert "Connection error" in excinfo.value.message


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after": "12"}) == 12.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=1_000_000) == 30.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_fragments_without_index_and_with_repeated_ids_and_names_assemble_cleanly():
    assembler = StreamAssembler()
    for fragment in (
        {"id": "a", "function": {"name": "read_file", "arguments": '{"pa'}},
        {"id": "a", "function": {"name": "read_file", "arguments": 'th": "x"}'}},
        {"id": "b", "function": {"name": "list_dir", "arguments": "{}"}},
    ):
        assembler.add({"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
    assembler.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    response = assembler.finish()
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in response.message["tool_calls"]] == [
        ("a", "read_file", '{"path": "x"}'), ("b", "list_dir", "{}")]
    assert response.message["content"] is None and response.usage is None


def test_a_missing_key_for_the_default_endpoint_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError) as excinfo:
        OpenAICompatProvider(None, None, "gpt-4o")
    assert excinfo.value.error_type == "missing_api_key" and "api_key" in excinfo.value.message.lower()


class _EmptyStreams(CompletionEndpoint):
    """Answers plain requests honestly and ends every stream at once, with nothing in it."""

    def __init__(self, provider):
        super().__init__(provider)
        self.streamed: list[bool] = []

    def respond(self, call_index, payload):
        self.streamed.append(bool(payload.get("stream")))
        if payload.get("stream"):
            return Reply(chunks=iter(()), headers={"Content-Type": "text/event-stream"})
        return super().respond(call_index, payload)


def test_a_stream_that_ends_with_nothing_is_asked_again_unstreamed():
    server, client = hosted(OfflineModel())
    endpoint = server.endpoint = _EmptyStreams(server.provider)
    try:
        deltas, response = collect(client.stream(ChatRequest(messages=user("Who are you?"))))
        assert "".join(d.text for d in deltas) == response.message["content"] != ""
        assert endpoint.streamed == [True, False] and client.streams_tools
        collect(client.stream(ChatRequest(messages=user("read notes.md"), tools=[READ_TOOL])))
        assert client.streams_tools is False  # tools answered only unstreamed: not streamed again
        collect(client.stream(ChatRequest(messages=user("read notes.md"), tools=[READ_TOOL])))
        assert endpoint.streamed == [True, False, True, False, False]
    finally:
        server.stop()


@pytest.mark.parametrize("words, refused", [
    ("Automatic streaming tool choice is not supported", True),
    ("streaming is not supported with tools", True),
    ("Tool calls cannot be streamed by this backend", True),
    ("This model does not support streaming function calls", True),
    ("the stream was interrupted after 0 characters: Connection error.", False),
    ("'tools' must be a list of tool objects", False),
    ("streaming failed: internal error", False),
])
def test_refusals_to_stream_tools_are_recognised_by_their_words(words, refused):
    assert bool(STREAMED_TOOLS_REFUSED.search(words)) == refused


def test_tool_choice_goes_only_with_tools_and_null_assistant_content_goes_as_empty_text():
    client = OpenAICompatProvider("http://127.0.0.1:9/v1", None, "m")
    call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    history = [*user("read it"), {"role": "assistant", "content": None, "tool_calls": [call]}]
    with_tools = client._arguments(ChatRequest(messages=history, tools=[READ_TOOL], extra={"tool_choice": "auto"}))
    without = client._arguments(ChatRequest(messages=history, extra={"tool_choice": "auto"}))
    assert with_tools["tool_choice"] == "auto" and "tool_choice" not in without and "extra_body" not in without
    assert with_tools["messages"][1]["content"] == "" and history[1]["content"] is None
    client.close()


_ROLES = st.sampled_from(["user", "assistant", "tool", "recalled"])


def _own(message: dict) -> bool:
    return message.get("role") == "user" and not any(key.startswith("_") for key in message)


@given(st.lists(st.tuples(_ROLES, st.text(max_size=8)), max_size=12))
def test_runs_of_the_users_own_messages_are_sent_as_one(specs):
    messages = [{"role": "user", "content": text, "_memory_context_synthetic": True} if role == "recalled"
                else {"role": role, "content": text} for role, text in specs]
    sent = alternating(messages)
    assert not any(_own(a) and _own(b) for a, b in itertools.pairwise(sent))
    assert [m for m in sent if not _own(m)] == [m for m in messages if not _own(m)]
    runs = [list(group) for own, group in itertools.groupby(messages, key=_own) if own]
    expected = [run[0]["content"] if len(run) == 1 else "\n\n".join(m["content"] for m in run if m["content"])
                for run in runs]
    assert [m["content"] for m in sent if _own(m)] == expected
