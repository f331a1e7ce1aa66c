"""Each fault as the real `openai` client receives it from the fault server, and the endpoint's memory."""

from __future__ import annotations

import pytest

from hermeslab.context.error_limits import parse_context_limit
from hermeslab.core.messages import has_surrogates, parse_tool_arguments
from hermeslab.providers import OfflineModel, OpenAICompatProvider
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError
from hermeslab.providers.faults import THOUGHT, FaultSchedule, Injection, serve_with_faults
from hermeslab.recovery import SessionSize, classify

READ_TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}


def ask(text: str, tools: bool = False) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], tools=[READ_TOOL] if tools else None)


class Hosted:
    """The offline model behind a fault server, and a client; ``call`` sends one request."""

    def __init__(self, kind: str, *, at=(0,), timeout: float = 10.0, **options):
        self.server = serve_with_faults(OfflineModel(), FaultSchedule.single(kind, at=at, **options))
        self.client = OpenAICompatProvider(self.server.base_url, None, "hermeslab-offline", timeout=timeout)

    def call(self, request: ChatRequest, stream: bool = False) -> ChatResponse:
        if not stream:
            return self.client.complete(request)
        return list(self.client.stream(request))[-1]

    def close(self) -> None:
        self.client.close()
        self.server.endpoint.close()
        self.server.stop()


@pytest.fixture
def hosted(request):
    made = []

    def make(kind, **options):
        made.append(Hosted(kind, **options))
        return made[-1]

    yield make
    for item in made:
        item.close()


@pytest.mark.parametrize("kind, status, fault, limit", [
    ("overflow_openai", 400, "context_overflow", 6000),
    ("overflow_anthropic", 400, "context_overflow", 6000),
    ("overflow_vllm", 400, "context_overflow", 6000),
    ("overflow_llamacpp", 400, "context_overflow", 6000),
    ("payload_too_large", 413, "payload_too_large", None),
    ("rate_limit_bare", 429, "rate_limit", None),
    ("server_error", 500, "server_error", None),
    ("bad_gateway", 502, "server_error", None),
    ("unavailable", 503, "overloaded", None),
    ("overloaded", 529, "overloaded", None),
    ("auth", 401, "auth", None),
    ("billing", 403, "billing", None),
    ("model_not_found", 404, "model_not_found", None),
])
@pytest.mark.parametrize("stream", [False, True])
def test_http_faults_arrive_with_their_status_wording_and_class(hosted, kind, status, fault, limit, stream):
    options = {"window": 6000} if kind.startswith("overflow_") else {}
    server = hosted(kind, **options)
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("Who are you?"), stream)
    error = excinfo.value
    assert error.status == status
    classified = classify(error)
    assert classified.name == fault and parse_context_limit(classified.text) == limit
    assert "offline model" in server.call(ask("Who are you?"), stream).message["content"]
    assert server.server.endpoint.injected == [Injection(0, kind, True)]


@pytest.mark.parametrize("kind", ["output_cap_anthropic", "output_cap_openai", "output_cap_openrouter",
                                  "output_cap_vllm"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_output_cap_states_its_budget_and_answers_a_request_within_it(hosted, kind, stream):
    server = hosted(kind, at=(0, 1), available=500)
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("Who are you?"), stream)
    fault = classify(excinfo.value)
    assert (excinfo.value.status, fault.name, fault.output_budget) == (400, "output_cap", 500)
    within = ChatRequest(messages=[{"role": "user", "content": "Who are you?"}], max_tokens=500)
    assert "offline model" in server.call(within, stream).message["content"]
    assert server.server.endpoint.injected == [Injection(0, kind, True), Injection(1, kind, False)]


@pytest.mark.parametrize("kind, rule", [("disconnect_message", "disconnect wording"),
                                        ("tls_alert_message", "transient TLS alert"),
                                        ("connect_error_message", "connection never established")])
@pytest.mark.parametrize("stream", [False, True])
def test_a_transport_fault_without_status_or_type_is_read_by_its_words(hosted, kind, rule, stream):
    with pytest.raises(ProviderError) as excinfo:
        hosted(kind).call(ask("hi"), stream)
    error = excinfo.value
    assert error.status is None and error.error_type in ("invalid_response", "stream_interrupted")
    small = classify(error, SessionSize(tokens=2_000, messages=10, window=128_000))
    large = classify(error, SessionSize(tokens=100_000, messages=300, window=128_000))
    assert (small.name, small.rule) == ("connection", rule)
    assert large.name == ("context_overflow" if kind == "disconnect_message" else "connection")


def test_a_rate_limit_carries_retry_after(hosted):
    server = hosted("rate_limit", retry_after=2.5)
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("hi"))
    assert excinfo.value.retry_after == 2.5 and "try again in 2.5s" in excinfo.value.message


def test_a_slow_reply_is_a_client_timeout(hosted):
    server = hosted("slow", delay=0.6, timeout=0.2)
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("hi"), stream=True)
    assert classify(excinfo.value).name == "timeout"


@pytest.mark.parametrize("stream", [False, True])
def test_a_reset_connection_is_a_connection_failure(hosted, stream):
    server = hosted("connection_reset")
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("hi"), stream)
    assert classify(excinfo.value).name == "connection"


def test_a_cut_stream_delivers_half_the_text_and_no_usage(hosted):
    server = hosted("stream_cut", at=(1,))
    full = server.call(ask("Who are you?"), stream=True).message["content"]
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("Who are you?"), stream=True)
    partial = classify(excinfo.value).partial_text
    assert excinfo.value.error_type == "stream_interrupted"
    assert partial and full.startswith(partial) and len(partial) < len(full)


def test_a_cut_plain_request_is_a_reset(hosted):
    server = hosted("stream_cut")
    with pytest.raises(ProviderError) as excinfo:
        server.call(ask("hi"))
    assert classify(excinfo.value).name == "connection"


@pytest.mark.parametrize("stream", [False, True])
def test_spoiled_answers_arrive_as_a_normal_200(hosted, stream):
    empty = hosted("empty", at=(0,)).call(ask("Who are you?"), stream)
    assert empty.message["content"] in ("", None) and "tool_calls" not in empty.message
    thinking = hosted("reasoning_only").call(ask("Who are you?"), stream)
    assert thinking.message["content"] == THOUGHT
    surrogate = hosted("surrogates").call(ask("Who are you?"), stream)
    assert has_surrogates(surrogate.message["content"]) and surrogate.message["content"].endswith("\ud83d")
    broken = hosted("bad_tool_json").call(ask("read notes.md", tools=True), stream)
    with pytest.raises(ValueError):
        parse_tool_arguments(broken.message["tool_calls"][0]["function"]["arguments"])


@pytest.mark.parametrize("stream", [False, True])
def test_a_length_fault_cuts_text_in_half_and_the_continuation_gets_the_rest(hosted, stream):
    server = hosted("length", at=(1,))
    full = server.call(ask("Who are you?"), stream).message["content"]
    cut = server.call(ask("Who are you?"), stream)
    assert cut.finish_reason == "length" and full.startswith(cut.message["content"])
    head = cut.message["content"]
    follow_up = ChatRequest(messages=[{"role": "user", "content": "Who are you?"},
                                      {"role": "assistant", "content": head},
                                      {"role": "user", "content": "[continue where you stopped]"}])
    rest = server.call(follow_up, stream)
    assert head + rest.message["content"] == full and rest.finish_reason == "stop"


def test_a_length_fault_on_a_tool_call_cuts_its_arguments(hosted):
    cut = hosted("length").call(ask("read notes.md", tools=True))
    assert cut.finish_reason == "length"
    with pytest.raises(ValueError):
        parse_tool_arguments(cut.message["tool_calls"][0]["function"]["arguments"])


def test_withheld_answers_serve_a_retry_or_a_nudge_but_never_a_new_request(hosted):
    server = hosted("empty", at=(0, 2))
    question = [{"role": "user", "content": "Who are you?"}]
    assert server.call(ChatRequest(messages=question)).message["content"] == ""
    nudge = question + [{"role": "assistant", "content": "(empty)"}, {"role": "user", "content": "please go on"}]
    assert "offline model" in server.call(ChatRequest(messages=nudge)).message["content"]
    assert server.call(ChatRequest(messages=question)).message["content"] == ""
    new_request = question + [{"role": "user", "content": "list files please"}]
    answer = server.call(ChatRequest(messages=new_request)).message
    assert "offline model" not in (answer.get("content") or "")


def test_faults_with_nothing_to_spoil_are_logged_as_not_applied(hosted):
    server = hosted("bad_tool_json")
    answer = server.call(ask("Who are you?"))
    assert "offline model" in answer.message["content"]
    assert server.server.endpoint.injected == [Injection(0, "bad_tool_json", False)]
