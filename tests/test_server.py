"""LocalServer over raw HTTP: the OpenAI wire shapes, SSE framing, errors, auth, counting, the endpoint seam."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any, Iterator

import pytest

from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage
from hermeslab.providers.offline import OfflineModel
from hermeslab.providers.server import CompletionEndpoint, LocalServer, error_reply

WRITE_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "write a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]},
    },
}


class Echo:
    """Answers with the last user text, word by word, and a fixed usage."""

    name = "echo"
    model = "echo-1"

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return ChatResponse(message={"role": "assistant", "content": request.messages[-1]["content"], "_local": 1},
                            usage=Usage(prompt_tokens=11, completion_tokens=3, cache_read_tokens=4))

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        response = self.complete(request)
        for word in response.message["content"].split(" "):
            yield StreamDelta(text=word + " ")
        yield response


class Failing:
    name = "failing"

    def __init__(self, error: Exception):
        self.error = error

    def complete(self, request: ChatRequest) -> ChatResponse:
        raise self.error

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        raise self.error
        yield  # a generator that fails on its first step


def post(server: LocalServer, body: Any, *, headers: dict[str, str] | None = None, path: str = "/v1/chat/completions",
         raw: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        data = raw if raw is not None else json.dumps(body).encode()
        connection.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def get(server: LocalServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def sse_events(data: bytes) -> list[Any]:
    events = [block[len("data: "):] for block in data.decode().split("\n\n") if block]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


@pytest.fixture
def echo_server():
    provider = Echo()
    with LocalServer(provider) as server:
        yield server, provider


# ---------------------------------------------------------------- lifecycle


def test_start_binds_a_free_port_and_stop_is_idempotent():
    server = LocalServer(Echo())
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url
    url = server.start()
    assert url == f"http://127.0.0.1:{server.port}/v1" and server.port > 0
    assert server.start() == url
    server.stop()
    server.stop()
    with pytest.raises(ConnectionRefusedError):
        get(server, "/v1/models")


def test_serve_forever_blocks_until_stopped():
    server = LocalServer(Echo())
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    deadline = time.monotonic() + 5
    while not server.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert get(server, "/v1/models")[0] == 200
    server.stop()
    thread.join(5)
    assert not thread.is_alive()


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="chunk_delay"):
        LocalServer(Echo(), chunk_delay=-1)
    with pytest.raises(ValueError, match="port"):
        LocalServer(Echo(), port=70000)
    with pytest.raises(ValueError, match="context_window"):
        LocalServer(Echo(), personality="vllm", context_window=0)
    with pytest.raises(ValueError, match="unknown server personality 'lmstudio'"):
        LocalServer(Echo(), personality="lmstudio")


# ---------------------------------------------------------------- wire shapes


def test_models_lists_the_hosted_model(echo_server):
    server, _ = echo_server
    status, body = get(server, "/v1/models")
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "echo-1"


def test_a_completion_has_the_openai_shape_and_the_providers_usage(echo_server):
    server, provider = echo_server
    status, headers, body = post(server, chat("hello there", temperature=0.5, max_tokens=9, seed=4))
    assert status == 200 and headers["content-type"] == "application/json"
    data = json.loads(body)
    assert set(data) == {"id", "object", "created", "model", "choices", "usage"}
    assert data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-")
    assert data["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "hello there"},
                                "finish_reason": "stop", "logprobs": None}]
    assert data["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14,
                             "prompt_tokens_details": {"cached_tokens": 4},
                             "completion_tokens_details": {"reasoning_tokens": 0}}
    request = provider.requests[-1]
    assert (request.temperature, request.max_tokens, request.extra) == (0.5, 9, {"seed": 4})


def test_a_stream_is_role_text_finish_usage_then_done(echo_server):
    server, _ = echo_server
    status, headers, body = post(server, chat("one two three", stream=True, stream_options={"include_usage": True}))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert headers["transfer-encoding"] == "chunked"
    events = sse_events(body)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [e["choices"][0]["delta"]["content"] for e in events[1:4]] == ["one ", "two ", "three "]
    assert events[4]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    assert events[5]["choices"] == [] and events[5]["usage"]["prompt_tokens"] == 11
    assert len(events) == 6
    assert {e["object"] for e in events} == {"chat.completion.chunk"} and len({e["id"] for e in events}) == 1


def test_a_stream_without_include_usage_has_no_usage_chunk(echo_server):
    server, _ = echo_server
    events = sse_events(post(server, chat("a b", stream=True))[2])
    assert all(e["choices"] for e in events) and "usage" not in events[-1]


def test_tool_calls_stream_as_a_header_then_argument_fragments():
    with LocalServer(OfflineModel()) as server:
        body = chat('write "some content long enough to split" to notes.txt', stream=True, tools=[WRITE_TOOL])
        events = sse_events(post(server, body)[2])
        plain = json.loads(post(server, {**body, "stream": False})[2])
    fragments = [e["choices"][0]["delta"]["tool_calls"][0] for e in events if "tool_calls" in e["choices"][0]["delta"]]
    header, pieces = fragments[0], fragments[1:]
    expected = plain["choices"][0]["message"]["tool_calls"][0]
    assert header == {"index": 0, "id": expected["id"], "type": "function",
                      "function": {"name": "write_file", "arguments": ""}}
    assert len(pieces) > 2 and all(set(p) == {"index", "function"} for p in pieces)
    assert "".join(p["function"]["arguments"] for p in pieces) == expected["function"]["arguments"]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert plain["model"] == "m"


def test_chunk_delay_paces_the_stream():
    with LocalServer(Echo(), chunk_delay=0.05) as server:
        started = time.monotonic()
        events = sse_events(post(server, chat("a b c d", stream=True))[2])
        elapsed = time.monotonic() - started
    assert len(events) == 6 and elapsed >= 5 * 0.05


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("raw, fragment", [
    (b"{not json", "not valid JSON"),
    (b"", "body is empty"),
    (b"[1, 2]", "must be a JSON object, got list"),
    (json.dumps({"model": "m"}).encode(), "'messages' must be a non-empty list"),
    (json.dumps(chat("x", stream="yes")).encode(), "'stream' must be true or false"),
    (json.dumps(chat("x", max_tokens=0)).encode(), "'max_tokens' must be a positive integer"),
    (json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(), "unknown role 'wizard'"),
])
def test_malformed_requests_are_400_with_a_clear_message(echo_server, raw, fragment):
    server, provider = echo_server
    status, headers, body = post(server, None, raw=raw)
    assert status == 400 and headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert fragment in error["message"] and error["type"] == "invalid_request_error"
    assert provider.requests == []


def test_unknown_paths_are_404(echo_server):
    server, _ = echo_server
    assert post(server, chat("x"), path="/v1/embeddings")[0] == 404
    status, body = get(server, "/v2/models")
    assert status == 404 and "no such endpoint: GET /v2/models" in json.loads(body)["error"]["message"]


def test_an_api_key_is_required_when_set():
    with LocalServer(Echo(), api_key="k-123") as server:
        status, _, body = post(server, chat("x"))
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
        assert post(server, chat("x"), headers={"Authorization": "Bearer wrong"})[0] == 401
        assert get(server, "/v1/models")[0] == 401
        assert post(server, chat("x"), headers={"Authorization": "Bearer k-123"})[0] == 200


@pytest.mark.parametrize("stream", [False, True])
def test_provider_errors_keep_their_status_code_and_retry_after(stream):
    error = ProviderError("too many requests", status=429, error_type="rate_limit_exceeded", retry_after=2.5)
    with LocalServer(Failing(error)) as server:
        status, headers, body = post(server, chat("x", stream=stream))
    assert status == 429
    assert headers["retry-after"] == "3" and headers["retry-after-ms"] == "2500"
    assert json.loads(body) == {"error": {"message": "too many requests", "type": "rate_limit_error",
                                          "code": "rate_limit_exceeded"}}


def test_a_context_overflow_and_a_statusless_failure():
    overflow = ProviderError("maximum context length is 8192 tokens", status=400, error_type="context_length_exceeded")
    with LocalServer(Failing(overflow)) as server:
        status, _, body = post(server, chat("x"))
    assert status == 400 and json.loads(body)["error"]["code"] == "context_length_exceeded"
    with LocalServer(Failing(ProviderError("upstream timed out", error_type="APITimeoutError"))) as server:
        status, _, body = post(server, chat("x"))
    assert status == 502 and json.loads(body)["error"]["type"] == "server_error"


def test_a_crashing_provider_is_a_500_and_the_server_keeps_serving():
    with LocalServer(Failing(KeyError("boom"))) as server:
        status, _, body = post(server, chat("x"))
        assert status == 500 and "KeyError" in json.loads(body)["error"]["message"]
        assert get(server, "/v1/models")[0] == 200


# ---------------------------------------------------------------- counting and the endpoint seam


def test_calls_are_counted_across_threads(echo_server):
    server, _ = echo_server
    statuses: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        status = post(server, chat("hi"))[0]
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    get(server, "/v1/models")
    assert statuses == [200] * 8 and server.calls == 8


class FailSecondCall(CompletionEndpoint):
    def __init__(self, provider):
        super().__init__(provider)
        self.seen: list[int] = []

    def respond(self, call_index, payload):
        self.seen.append(call_index)
        if call_index == 1:
            return error_reply(503, "overloaded", code="overloaded")
        return super().respond(call_index, payload)


def test_an_endpoint_can_replace_the_reply_for_a_chosen_call_index(echo_server):
    server, _ = echo_server
    server.endpoint = FailSecondCall(server.provider)
    statuses = [post(server, chat("hi"))[0] for _ in range(3)]
    assert statuses == [200, 503, 200]
    assert server.endpoint.seen == [0, 1, 2]
