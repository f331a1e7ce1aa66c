"""A call the server answered without usage is counted by the server's tokenizer where it has one.

Each test goes through the real ``openai`` client and HTTP to a local server
with a llama.cpp-family personality, whose tokenizer routes count with the
offline model's tokenizer on what its chat template makes of the request.
"""

from __future__ import annotations

import dataclasses
import io
import random
import time
from pathlib import Path
from typing import Any, Mapping

import httpx2
import pytest

from hermeslab.agent import Agent
from hermeslab.console import ConsoleTranscript
from hermeslab.context.compactor import Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.core.config import Config
from hermeslab.core.events import ApiCallFinished, EventBus, TurnFinished
from hermeslab.core.figures import counted_note
from hermeslab.core.provider import ChatRequest, ChatResponse, Usage, usage_or_estimate, usage_source
from hermeslab.core.tokens import count_text, default_counter
from hermeslab.eval.fault_matrix import prepare_workspace
from hermeslab.notebook.transcript import Transcript
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.providers.chat_template import templated_prompt
from hermeslab.providers.personalities import PERSONALITIES
from hermeslab.providers.server import Reply, error_reply
from hermeslab.providers.server_tokenizer import messages_text, reply_text
from hermeslab.store import Lab, StoreWriter
from hermeslab.tools import builtin_registry

MODEL = "hermeslab-offline"
READ_TOOL = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the workspace, by its path relative to the workspace root.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
SYSTEM = {"role": "system", "content": "You are a careful assistant who answers in one short paragraph. " * 6}
QUESTION = [SYSTEM, {"role": "user", "content": "Who are you?"}]
#: llama-server as the llama.cpp family mostly behaves: no usage in streams.
SILENT_LLAMA_SERVER = dataclasses.replace(PERSONALITIES["llama-server"], usage_in_streams=False)


class Served:
    """A personality's local server, the chat bodies it received, its tokenizer requests, and a client."""

    def __init__(self, personality: Any, *, timeout: float | None = None):
        self.server = LocalServer(OfflineModel(), personality=personality)
        self.server.start()
        self.payloads: list[dict[str, Any]] = []
        self.tokenizer_paths: list[str] = []
        respond, route = self.server.respond, self.server.tokenizer_route

        def recording(call_index: int, payload: Mapping[str, Any]) -> Reply:
            self.payloads.append(dict(payload))
            return respond(call_index, payload)

        def counting(path: str, raw: bytes) -> Reply:
            self.tokenizer_paths.append(path)
            return route(path, raw)

        self.server.respond, self.server.tokenizer_route = recording, counting
        self.client = OpenAICompatProvider(self.server.base_url, None, MODEL, timeout=10)
        if timeout is not None:
            self.client.tokenizer._http.timeout = httpx2.Timeout(timeout)

    @property
    def root(self) -> str:
        return self.server.base_url[:-len("/v1")]

    def close(self) -> None:
        self.client.close()
        self.server.stop()


@pytest.fixture
def served():
    made: list[Served] = []

    def make(personality: Any, **options: Any) -> Served:
        made.append(Served(personality, **options))
        return made[-1]

    yield make
    for item in made:
        item.close()


def streamed(client: OpenAICompatProvider, request: ChatRequest) -> ChatResponse:
    items = list(client.stream(request))
    assert isinstance(items[-1], ChatResponse)
    return items[-1]


def sent_body(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {key: payload[key] for key in ("messages", "tools", "tool_choice") if key in payload}


# ---------------------------------------------------------------- the routes as the servers answer them


def test_the_routes_answer_in_each_servers_shape(served):
    llama = served("llama-server")
    template = httpx2.post(f"{llama.root}/apply-template", json={"messages": QUESTION}).json()
    assert template["prompt"].endswith("<|im_start|>assistant\n") and SYSTEM["content"] in template["prompt"]
    tokens = httpx2.post(f"{llama.root}/tokenize", json={"content": "Who are you?", "add_special": True}).json()
    assert len(tokens["tokens"]) == count_text("Who are you?")
    python = served("llama-cpp-python")
    assert httpx2.post(f"{python.root}/extras/tokenize", json={"input": "Who are you?"}).json()["tokens"] == \
        tokens["tokens"]
    assert httpx2.post(f"{python.root}/extras/tokenize/count",
                      json={"input": "Who are you?", "model": MODEL}).json() == {"count": count_text("Who are you?")}
    # Each server has only its own dialect; bad bodies get a clear 400.
    assert httpx2.post(f"{python.root}/apply-template", json={"messages": QUESTION}).status_code == 404
    assert httpx2.post(f"{llama.root}/extras/tokenize/count", json={"input": "x"}).status_code == 404
    refused = httpx2.post(f"{llama.root}/tokenize", json={"content": 7})
    assert refused.status_code == 400 and "'content' must be a string" in refused.json()["error"]["message"]


def test_the_template_carries_the_tool_schemas_only_where_the_tool_choice_keeps_them():
    personality = PERSONALITIES["llama-server"]
    offered = {"messages": QUESTION, "tools": READ_TOOL}
    assert "read_file" in templated_prompt(personality, offered)
    assert "read_file" not in templated_prompt(personality, {**offered, "tool_choice": "none"})
    # llama-cpp-python's default tool choice is none: a request that names none carries no schemas.
    assert "read_file" not in templated_prompt(PERSONALITIES["llama-cpp-python"], offered)


# ---------------------------------------------------------------- the client's calibrated figures


@pytest.mark.parametrize("choice", ["none", "auto"])
def test_a_silent_llama_server_is_counted_on_its_own_template(served, choice):
    server = served(SILENT_LLAMA_SERVER)
    request = ChatRequest(messages=QUESTION, tools=READ_TOOL, extra={"tool_choice": choice})
    response = streamed(server.client, request)
    asked = list(server.tokenizer_paths)  # the prompt templated and counted, then the reply counted
    assert response.usage_source == "server_template"
    payload = server.payloads[-1]
    server_counts = len(httpx2.post(f"{server.root}/tokenize", json={
        "content": templated_prompt(SILENT_LLAMA_SERVER, payload), "add_special": True}).json()["tokens"])
    assert response.usage.prompt_tokens == server_counts
    assert server_counts == count_text(templated_prompt(SILENT_LLAMA_SERVER, payload))
    ours = default_counter.count_request(payload["messages"], payload.get("tools"))
    if choice == "none":  # the template dropped the tool schemas our estimate counts
        assert response.usage.prompt_tokens < ours
    assert response.usage.prompt_tokens != ours
    assert response.usage.completion_tokens == count_text(reply_text(response)) > 0
    assert asked == ["/apply-template", "/tokenize", "/tokenize"]


def test_llama_cpp_python_counts_the_messages_text_with_its_tokenizer(served):
    server = served("llama-cpp-python")
    response = streamed(server.client, ChatRequest(messages=QUESTION, tools=READ_TOOL))
    assert response.usage_source == "server_tokenizer"
    payload = server.payloads[-1]
    text = messages_text(payload["messages"])
    server_counts = httpx2.post(f"{server.root}/extras/tokenize/count", json={"input": text}).json()["count"]
    assert response.usage.prompt_tokens == server_counts
    assert response.usage.prompt_tokens < default_counter.count_request(payload["messages"], payload.get("tools"))
    assert response.usage.completion_tokens == count_text(reply_text(response))
    # llama-server's routes were missing once and are never asked again.
    assert server.client.tokenizer.dialects == ["llama-cpp-python"]
    streamed(server.client, ChatRequest(messages=QUESTION))
    assert server.tokenizer_paths.count("/apply-template") == 1


def test_a_server_that_reports_usage_is_never_asked(served):
    server = served("llama-server")
    response = streamed(server.client, ChatRequest(messages=QUESTION))
    assert response.usage_source == "reported" and response.usage.prompt_tokens > 0
    server.client.complete(ChatRequest(messages=QUESTION))
    assert server.tokenizer_paths == []


def test_a_server_without_a_tokenizer_is_asked_once_and_its_calls_stay_estimates(served):
    server = served(dataclasses.replace(PERSONALITIES["vllm"], usage_in_streams=False))
    for _ in range(3):
        response = streamed(server.client, ChatRequest(messages=QUESTION))
        assert response.usage is None and response.usage_source == "reported"
    assert server.tokenizer_paths == ["/apply-template", "/extras/tokenize/count"]
    assert not server.client.tokenizer.available
    usage, estimated = usage_or_estimate(response, 321)
    assert estimated and usage.prompt_tokens == 321 and usage_source(response, estimated) == "estimate"


def test_a_failing_or_slow_tokenizer_never_fails_the_call_and_is_asked_again(served):
    server = served(SILENT_LLAMA_SERVER, timeout=0.3)
    route = server.server.tokenizer_route
    server.server.tokenizer_route = lambda path, raw: error_reply(500, "the tokenizer crashed")
    response = streamed(server.client, ChatRequest(messages=QUESTION))
    assert response.usage is None and server.client.tokenizer.dialects == ["llama-server", "llama-cpp-python"]

    def slow(path: str, raw: bytes) -> Reply:
        time.sleep(3.0)
        return route(path, raw)

    server.server.tokenizer_route = slow
    started = time.perf_counter()
    assert streamed(server.client, ChatRequest(messages=QUESTION)).usage is None
    assert time.perf_counter() - started < 2.0  # gave up on the tokenizer (0.3 s timeout), with room for a busy machine
    server.server.tokenizer_route = route
    assert streamed(server.client, ChatRequest(messages=QUESTION)).usage_source == "server_template"


# ---------------------------------------------------------------- the source, logged and shown


def test_an_agent_logs_and_shows_server_counted_figures_without_the_estimate_mark(served, tmp_path: Path):
    server = served("llama-cpp-python")
    workspace = tmp_path / "work"
    prepare_workspace(workspace)
    config = Config().with_overrides({"tools.workspace": str(workspace), "compression.summariser": "extractive",
                                      "model.tool_choice": "omit", "agent.stream": True})
    bus, events, out = EventBus(), [], io.StringIO()
    bus.subscribe(events.append)
    bus.subscribe(ConsoleTranscript(out))
    transcript = Transcript()
    bus.subscribe(transcript.observe)
    agent = Agent(server.client, config=config, tools=builtin_registry(config.tools), bus=bus,
                  sleep=lambda seconds: None, rng=random.Random(5), compactor=Compactor(config, ExtractiveSummariser()))
    with StoreWriter(tmp_path / "lab.duckdb") as writer:
        writer.attach(bus)
        agent.chat("Who are you?")
    finished = [e for e in events if isinstance(e, ApiCallFinished)]
    assert finished and all(e.usage_source == "server_tokenizer" and not e.usage_estimated for e in finished)
    assert all(e.prompt_tokens < e.estimated_prompt_tokens for e in finished)
    turn = next(e for e in events if isinstance(e, TurnFinished))
    line = out.getvalue()
    assert "counted by the server's tokenizer on the messages' text" in line and "~" not in line
    assert f"in {turn.prompt_tokens:,} / out {turn.completion_tokens:,}" in line
    assert "counted by the server's tokenizer" in transcript.footer() and "~" not in transcript.footer()
    lab = Lab(tmp_path / "lab.duckdb")
    assert set(lab.api_calls()["usage_source"]) == {"server_tokenizer"}
    assert lab.turns()["estimated_calls"].tolist() == [0]


def test_the_counted_note_names_the_source_and_share_of_calls():
    assert counted_note({}, 2) == "" and counted_note({"server_template": 0}, 2) == ""
    assert counted_note({"server_template": 1}, 1).startswith(
        "counted by the server's tokenizer on the prompt its chat template made for its call")
    both = counted_note({"server_tokenizer": 1, "server_template": 2}, 3)
    assert "prompt its chat template made for 2 of 3 calls" in both and "markers for 1 of 3 calls" in both


def test_figures_the_server_counted_are_not_flagged_as_estimates():
    response = ChatResponse(message={"role": "assistant", "content": "Hi."},
                            usage=Usage(prompt_tokens=166, completion_tokens=3), usage_source="server_template")
    usage, estimated = usage_or_estimate(response, 1_303)
    assert (usage.prompt_tokens, estimated, usage_source(response, estimated)) == (166, False, "server_template")
