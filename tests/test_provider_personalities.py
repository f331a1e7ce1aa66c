"""hermeslab against servers that behave like llama-cpp-python, llama-server, vLLM, Ollama and OpenAI.

Every test goes through the real ``openai`` client over HTTP to a local
server given a personality, so what is checked is what a real deployment
meets: the status and words of each refusal, streams that end with nothing,
usage present or absent, tool_choice semantics and a single-slot server.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from pathlib import Path
from typing import Any, Mapping

import openai
import pytest

from hermeslab.agent import Agent
from hermeslab.cli import main as cli_main
from hermeslab.context.compactor import Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.core.config import Config, ConfigError
from hermeslab.core.events import ApiCallFinished, CompressionEvent, EventBus, RecoveryEvent
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta
from hermeslab.eval.fault_matrix import prepare_workspace
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.providers.faults import FaultSchedule, serve_with_faults
from hermeslab.providers.personalities import PERSONALITIES, personality_named
from hermeslab.policies.loading import with_overrides
from hermeslab.recovery import SessionSize, classify
from hermeslab.tools import builtin_registry

MODEL = "hermeslab-offline"
READ_TOOL = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the workspace.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
ASK_FOR_A_TOOL = [{"role": "user", "content": "read notes.md"}]
SESSION = ("read notes.md", 'write "Ship 2.4 on Friday." to plan.txt', "Who are you?")
#: Personalities that refuse an overlong prompt (Ollama drops old messages instead).
REFUSING = [name for name, p in PERSONALITIES.items() if p.overflow is not None]
FILLER = "Background for later, no action needed: " + "The lab keeps a record of every token it sends. " * 30


class Hosted:
    """A local server with a personality, the request bodies it received, and a client for it."""

    def __init__(self, personality: Any, *, context_window: int | None = None, chunk_delay: float = 0.0,
                 schedule: FaultSchedule | None = None):
        options = {"personality": personality, "context_window": context_window, "chunk_delay": chunk_delay}
        if schedule is not None:
            self.server = serve_with_faults(OfflineModel(), schedule, **options)
        else:
            self.server = LocalServer(OfflineModel(), **options)
            self.server.start()
        self.payloads: list[dict[str, Any]] = []
        respond = self.server.respond

        def recording(call_index: int, payload: Mapping[str, Any]):
            self.payloads.append(dict(payload))
            return respond(call_index, payload)

        self.server.respond = recording
        self.client = OpenAICompatProvider(self.server.base_url, None, MODEL, timeout=10, name="hosted")
        self.raw = openai.OpenAI(base_url=self.server.base_url, api_key="none", max_retries=0, timeout=10)

    def close(self) -> None:
        self.client.close()
        self.raw.close()
        close = getattr(self.server.endpoint, "close", None)
        if close is not None:
            close()
        self.server.stop()


@pytest.fixture
def hosted():
    made: list[Hosted] = []

    def make(personality: Any, **options: Any) -> Hosted:
        made.append(Hosted(personality, **options))
        return made[-1]

    yield make
    for item in made:
        item.close()


def agent_for(server: Hosted, workspace: Path, **overrides: Any) -> tuple[Agent, list]:
    prepare_workspace(workspace)
    config = with_overrides(Config(), {"tools.workspace": str(workspace), "compression.summariser": "extractive",
                                       **overrides})
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    agent = Agent(server.client, config=config, tools=builtin_registry(config.tools), bus=bus,
                  sleep=lambda seconds: None, rng=random.Random(5), compactor=Compactor(config, ExtractiveSummariser()))
    return agent, events


def collected(items) -> tuple[str, ChatResponse]:
    items = list(items)
    text = "".join(item.text for item in items if isinstance(item, StreamDelta))
    assert isinstance(items[-1], ChatResponse)
    return text, items[-1]


def roles_alternate(messages: list[dict[str, Any]]) -> bool:
    roles = [m["role"] for m in messages if m["role"] in ("user", "assistant")]
    return all(not (a == b == "user") for a, b in itertools.pairwise(roles))


# ---------------------------------------------------------------- the personalities themselves


def test_an_unknown_personality_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="unknown server personality 'tgi'.*llama-cpp-python"):
        personality_named("tgi")
    with pytest.raises(SystemExit, match="unknown server personality"):
        cli_main(["serve", "--personality", "tgi", "--port", "0"])


def test_llama_cpp_python_ends_a_streamed_auto_tool_request_with_no_chunk_but_answers_it_unstreamed(hosted):
    server = hosted("llama-cpp-python")
    stream = server.raw.chat.completions.create(model=MODEL, messages=ASK_FOR_A_TOOL, tools=READ_TOOL,
                                                tool_choice="auto", stream=True)
    assert list(stream) == []
    plain = server.raw.chat.completions.create(model=MODEL, messages=ASK_FOR_A_TOOL, tools=READ_TOOL,
                                               tool_choice="auto")
    assert plain.choices[0].message.tool_calls[0].function.name == "read_file"


@pytest.mark.parametrize("name", list(PERSONALITIES))
def test_a_missing_tool_choice_means_what_the_server_says(hosted, name):
    server = hosted(name)
    reply = server.raw.chat.completions.create(model=MODEL, messages=ASK_FOR_A_TOOL, tools=READ_TOOL)
    called = bool(reply.choices[0].message.tool_calls)
    assert called == (PERSONALITIES[name].default_tool_choice == "auto")
    chosen = server.raw.chat.completions.create(model=MODEL, messages=ASK_FOR_A_TOOL, tools=READ_TOOL,
                                                tool_choice="auto")
    assert chosen.choices[0].message.tool_calls
    declined = server.raw.chat.completions.create(model=MODEL, messages=ASK_FOR_A_TOOL, tools=READ_TOOL,
                                                  tool_choice="none")
    assert bool(declined.choices[0].message.tool_calls) == PERSONALITIES[name].ignores_tool_choice


@pytest.mark.parametrize("name", list(PERSONALITIES))
def test_usage_comes_in_streams_only_where_the_server_sends_it(hosted, name):
    server = hosted(name)
    chunks = list(server.raw.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Who are you?"}], stream=True,
        stream_options={"include_usage": True}))
    assert any(chunk.usage is not None for chunk in chunks) == PERSONALITIES[name].usage_in_streams
    question = [{"role": "user", "content": "Who are you?"}]
    text, response = collected(server.client.stream(ChatRequest(messages=question)))
    # A server without usage in streams is asked its tokenizer instead (each such personality offers one).
    assert text and (response.usage_source == "reported") == PERSONALITIES[name].usage_in_streams


@pytest.mark.parametrize("name", REFUSING)
def test_each_overflow_wording_is_read_as_an_overflow(hosted, name):
    server = hosted(name, context_window=200)
    request = ChatRequest(messages=[{"role": "user", "content": FILLER}])
    with pytest.raises(ProviderError) as refused:
        server.client.complete(request)
    assert refused.value.status == 400
    assert classify(refused.value, SessionSize(500, 1, 65_536)).name == "context_overflow"


def test_ollama_drops_the_oldest_messages_of_an_overlong_prompt_and_answers(hosted):
    server = hosted("ollama", context_window=300)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": FILLER},
                {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Who are you?"}]
    response = server.client.complete(ChatRequest(messages=messages))
    assert response.message["content"] and response.usage.prompt_tokens <= 300


def test_a_single_slot_server_cuts_the_running_stream_when_another_request_comes(hosted):
    server = hosted("llama-cpp-python", chunk_delay=0.05)
    stream = server.client.stream(ChatRequest(messages=[{"role": "user", "content": "Who are you?"}]))
    first = next(stream)
    assert isinstance(first, StreamDelta)
    server.client.complete(ChatRequest(messages=[{"role": "user", "content": "Who are you?"}]))
    with pytest.raises(ProviderError) as cut:
        list(stream)
    assert cut.value.error_type == "stream_interrupted" and cut.value.body["partial_text"].startswith(first.text)
    assert classify(cut.value).name == "connection"


def test_a_server_with_several_slots_serves_both(hosted):
    server = hosted("vllm", chunk_delay=0.02)
    stream = server.client.stream(ChatRequest(messages=[{"role": "user", "content": "Who are you?"}]))
    next(stream)
    server.client.complete(ChatRequest(messages=[{"role": "user", "content": "Who are you?"}]))
    assert isinstance(list(stream)[-1], ChatResponse)


# ---------------------------------------------------------------- the client's answers to them


def test_an_empty_stream_is_asked_again_unstreamed_and_its_overflow_is_an_overflow(hosted):
    server = hosted("llama-cpp-python", context_window=200)
    request = ChatRequest(messages=[{"role": "user", "content": FILLER}])
    with pytest.raises(ProviderError) as refused:
        list(server.client.stream(request))
    assert [p.get("stream", False) for p in server.payloads] == [True, False]
    assert refused.value.status == 400 and classify(refused.value).name == "context_overflow"


def test_an_empty_stream_in_a_large_session_is_never_an_overflow_by_size_alone(hosted):
    server = hosted("llama-cpp-python")
    messages = [{"role": "user", "content": "Who are you?"}]
    text, response = collected(server.client.stream(ChatRequest(messages=messages, tools=READ_TOOL,
                                                                extra={"tool_choice": "auto"})))
    assert text and response.finish_reason == "stop"
    size = SessionSize(tokens=900_000, messages=900, window=100_000)
    for clean_but_empty in (
            ProviderError("the stream ended without any choices", error_type="invalid_response"),
            ProviderError("the stream was interrupted after 0 characters: the stream ended without a finish_reason",
                          error_type="stream_interrupted", body={"partial_text": "", "partial_tool_calls": []})):
        assert classify(clean_but_empty, size).name != "context_overflow"


def test_tools_that_cannot_be_streamed_are_sent_unstreamed_for_the_rest_of_the_session(hosted):
    server = hosted("llama-cpp-python")
    request = ChatRequest(messages=ASK_FOR_A_TOOL, tools=READ_TOOL, extra={"tool_choice": "auto"})
    _, first = collected(server.client.stream(request))
    assert first.message["tool_calls"] and server.client.streams_tools is False
    _, again = collected(server.client.stream(request))
    assert again.message["tool_calls"]
    assert [p.get("stream", False) for p in server.payloads] == [True, False, False]
    collected(server.client.stream(ChatRequest(messages=[{"role": "user", "content": "Who are you?"}])))
    assert server.payloads[-1]["stream"] is True  # without tools the stream is still used


def test_a_refusal_in_words_to_stream_tools_switches_to_unstreamed_tool_requests(hosted):
    worded = dataclasses.replace(PERSONALITIES["llama-cpp-python"], streamed_errors_have_status=True)
    server = hosted(worded)
    request = ChatRequest(messages=ASK_FOR_A_TOOL, tools=READ_TOOL, extra={"tool_choice": "auto"})
    _, response = collected(server.client.stream(request))
    assert response.message["tool_calls"] and server.client.streams_tools is False
    assert [p.get("stream", False) for p in server.payloads] == [True, False]


@pytest.mark.parametrize("setting, sent", [("auto", "auto"), ("none", "none"), ("required", "required"),
                                           (None, None), ("omit", None)])
def test_tool_choice_is_sent_as_configured_when_tools_are_offered(hosted, tmp_path, setting, sent):
    server = hosted("vllm")
    agent, _ = agent_for(server, tmp_path / "ws", **{"model.tool_choice": setting})
    agent.chat("Who are you?")
    assert server.payloads[0].get("tool_choice") == sent and server.payloads[0]["tools"]


def test_a_tool_choice_setting_that_no_server_knows_is_refused():
    with pytest.raises(ConfigError, match="model.tool_choice"):
        Config().with_overrides({"model.tool_choice": "sometimes"})


def test_an_assistant_message_is_never_sent_with_null_content(hosted):
    server = hosted("llama-cpp-python")
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    messages = [{"role": "user", "content": "read a"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "alpha"}]
    response = server.client.complete(ChatRequest(messages=messages))
    assert response.message["content"]
    assert server.payloads[0]["messages"][1]["content"] == ""
    with pytest.raises(openai.InternalServerError) as refused:  # what the server does with a null
        server.raw.chat.completions.create(model=MODEL, messages=messages)
    assert "Input should be a valid string" in str(refused.value)


def test_a_validation_error_sent_as_500_is_a_bad_request_and_is_not_retried(hosted, tmp_path):
    server = hosted("llama-cpp-python")
    agent, events = agent_for(server, tmp_path / "ws")
    parts = [{"type": "text", "text": "Earlier answer."}]
    agent.resume("20260101_000000_abcdef", [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Hi"},
                                            {"role": "assistant", "content": parts}], next_seq=3)
    result = agent.chat("Who are you?")
    calls = [e for e in events if isinstance(e, ApiCallFinished)]
    assert result.status == "failed" and "malformed" in result.error
    assert [(c.error_class, c.status_code) for c in calls] == [("format_error", 500)]
    assert not [e for e in events if isinstance(e, RecoveryEvent) and e.action == "retry"]


def test_a_tool_call_cut_at_the_output_cap_under_a_tool_calls_finish_is_retried_as_truncated(hosted, tmp_path):
    server = hosted("llama-cpp-python")
    note = "Ship the release on Friday after the review meeting with the whole team and the partners."
    agent, events = agent_for(server, tmp_path / "ws", **{"model.max_tokens": 20})
    result = agent.chat(f'write "{note}" to plan.txt')
    recoveries = [(e.fault_class, e.action, e.outcome) for e in events if isinstance(e, RecoveryEvent)]
    assert ("truncated_tool_call", "retry", "recovered") in recoveries
    assert not [r for r in recoveries if r[0] == "malformed_tool_arguments"]
    assert (tmp_path / "ws" / "plan.txt").read_text() == note
    assert [p.get("max_tokens") for p in server.payloads if not p.get("stream")][:2] == [20, 40]
    assert result.status == "completed"


def test_text_streamed_before_a_connection_loss_is_logged_as_partial(hosted, tmp_path):
    server = hosted("vllm", schedule=FaultSchedule.single("stream_cut", at=(0,)))
    agent, events = agent_for(server, tmp_path / "ws")
    result = agent.chat("Who are you?")
    failed, answered = [e for e in events if isinstance(e, ApiCallFinished)]
    assert failed.finish_reason == "partial" and failed.partial_text and result.text.startswith(failed.partial_text)
    assert failed.error_class == "connection" and failed.completion_tokens and failed.usage_estimated
    assert answered.finish_reason == "stop"


def test_a_failed_turn_leaves_no_two_user_messages_in_a_row(hosted, tmp_path):
    server = hosted("vllm", schedule=FaultSchedule.single("auth", at=(0,)))
    agent, _ = agent_for(server, tmp_path / "ws")
    assert agent.chat("Who are you?").status == "failed"
    assert agent.chat("Who are you?").status == "completed"
    assert roles_alternate(agent.messages) and roles_alternate(server.payloads[-1]["messages"])


def test_under_hermes_a_failed_turn_keeps_its_question_and_the_wire_still_alternates(hosted, tmp_path):
    """Hermes keeps an unanswered message in the context; the client still sends one user message."""
    server = hosted("vllm", schedule=FaultSchedule.single("auth", at=(0,)))
    agent, _ = agent_for(server, tmp_path / "ws", **{"compression.preset": "hermes-0.19"})
    assert agent.chat("Who are you?").status == "failed"
    assert agent.chat("What can you do?").status == "completed"
    users = [m["content"] for m in agent.messages if m["role"] == "user"]
    assert users[:2] == ["Who are you?", "What can you do?"]
    assert roles_alternate(server.payloads[-1]["messages"])


def test_user_texts_that_arrived_together_are_sent_as_one_message(hosted, tmp_path):
    server = hosted("llama-cpp-python")
    agent, _ = agent_for(server, tmp_path / "ws")
    agent.run_turn(["Hello.", "Who are you?"])
    sent = server.payloads[0]["messages"]
    assert sent[-1] == {"role": "user", "content": "Hello.\n\nWho are you?"} and roles_alternate(sent)


# ---------------------------------------------------------------- the loop, against every personality


@pytest.fixture(scope="module")
def plain_answers(tmp_path_factory) -> list[str]:
    server = Hosted(None)
    try:
        agent, _ = agent_for(server, tmp_path_factory.mktemp("plain") / "ws")
        return [agent.chat(text).text for text in SESSION]
    finally:
        server.close()


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("name", list(PERSONALITIES))
def test_a_session_with_tools_completes_as_on_the_plain_server(hosted, tmp_path, plain_answers, name, stream):
    server = hosted(name)
    agent, _ = agent_for(server, tmp_path / "ws", **{"agent.stream": stream})
    results = [agent.chat(text) for text in SESSION]
    assert [r.status for r in results] == ["completed"] * 3
    assert [r.text for r in results] == plain_answers
    assert (tmp_path / "ws" / "plan.txt").read_text() == "Ship 2.4 on Friday."
    assert all(p.get("tool_choice") == "auto" for p in server.payloads if p.get("tools"))


@pytest.mark.parametrize("name", list(PERSONALITIES))
def test_a_history_that_outgrows_the_server_window_still_completes_every_turn(hosted, tmp_path, name):
    """hermeslab believes the window is large; the server knows better and says so its own way."""
    server = hosted(name, context_window=2_000)
    agent, events = agent_for(server, tmp_path / "ws", **{"model.tool_choice": "omit"})
    results = [agent.chat(text) for text in (*SESSION, FILLER, FILLER, FILLER, "Who are you?")]
    assert [r.status for r in results] == ["completed"] * len(results)
    overflows = [e for e in events if isinstance(e, ApiCallFinished) and e.error_class == "context_overflow"]
    compressed = [e for e in events if isinstance(e, CompressionEvent) and e.trigger == "overflow"]
    if PERSONALITIES[name].truncates_prompt:
        assert not overflows  # the server dropped old messages without a word
    else:
        assert overflows and compressed


def test_a_streamed_overflow_at_llama_cpp_python_leads_to_compression(hosted, tmp_path):
    server = hosted("llama-cpp-python", context_window=2_000)
    agent, events = agent_for(server, tmp_path / "ws", **{"model.tool_choice": "omit"})
    for text in (*SESSION, FILLER, FILLER, FILLER):
        assert agent.chat(text).status == "completed"
    refused = [i for i, p in enumerate(server.payloads) if p.get("stream")
               and i + 1 < len(server.payloads) and not server.payloads[i + 1].get("stream")]
    assert refused, "an empty stream was asked again unstreamed"
    assert any(isinstance(e, CompressionEvent) and e.trigger == "overflow" for e in events)


def test_a_continuation_with_no_room_left_keeps_the_text_instead_of_compressing_the_question_away(hosted, tmp_path):
    """A small output cap cuts every reply; continuing fills the window. The cut answer is kept, each turn ends."""
    server = hosted("llama-cpp-python", context_window=2_048)
    agent, events = agent_for(server, tmp_path / "ws", **{"model.max_tokens": 64, "model.context_length": 8_192,
                                                          "agent.max_iterations": 6})
    long_part = "The quick brown fox jumps over the lazy dog while the lab records every token. " * 55
    results = [agent.chat(f"Part {n}: {long_part}Reply with one word.") for n in range(3)]
    assert [r.status for r in results] == ["completed"] * 3
    assert all(r.text for r in results)
    gave_up = [e for e in events if isinstance(e, RecoveryEvent) and e.action == "give_up"]
    assert gave_up and all("kept the text" in e.outcome for e in gave_up)
    overflow_compressions = [e for e in events if isinstance(e, CompressionEvent) and e.trigger == "overflow"]
    assert len(overflow_compressions) <= len(results)  # never a compression per continuation
