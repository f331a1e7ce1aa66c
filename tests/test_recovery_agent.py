"""Failed calls inside the agent loop: what is retried, repaired, refreshed, compressed, and what ends a turn."""

from __future__ import annotations

import random

import pytest

from hermeslab.agent import Agent
from hermeslab.context.compactor import Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.core.config import Config
from hermeslab.core.events import ApiCallFinished, ErrorEvent, EventBus, RecoveryEvent
from hermeslab.core.messages import validate_messages
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.core.provider import ProviderError
from hermeslab.recovery import ProviderSlot
from hermeslab.store import StoreWriter
from hermeslab.store import open as open_lab
from hermeslab.tools import builtin_registry
from hermeslab.tools.registry import Tool, ToolRegistry

from scripted_provider import ScriptedProvider, tool_call

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


class Sleeps:
    """A clock that records the waits instead of sleeping, and may interrupt the agent while it waits."""

    def __init__(self, agent_ref: list | None = None):
        self.total = 0.0
        self.agent_ref = agent_ref

    def __call__(self, seconds: float) -> None:
        self.total += seconds
        if self.agent_ref:
            self.agent_ref[0].interrupt()


def make_agent(tmp_path, steps, *, fallbacks=(), refresh=None, compactor=False, tools=None, sleep=None,
               bus=None, **overrides):
    config = Config().with_overrides({"tools.workspace": str(tmp_path), "compression.summariser": "extractive",
                                      **overrides})
    bus = bus or EventBus()
    events = []
    bus.subscribe(events.append)
    provider = ScriptedProvider(steps)
    agent = Agent(provider, config=config, tools=tools or builtin_registry(config.tools), bus=bus,
                  sleep=sleep or Sleeps(), fallbacks=fallbacks, refresh_credentials=refresh, rng=random.Random(5),
                  compactor=Compactor(config, ExtractiveSummariser()) if compactor else None)
    return agent, provider, events


def of(events, kind):
    return [e for e in events if isinstance(e, kind)]


def test_a_transient_failure_is_retried_after_a_jittered_pause_and_logged_with_its_outcome(tmp_path):
    sleeps = Sleeps()
    agent, _, events = make_agent(tmp_path, [ProviderError("upstream failed", status=502), {"content": "ok"}],
                                  sleep=sleeps)
    assert agent.chat("hi").text == "ok"
    (event,) = of(events, RecoveryEvent)
    assert (event.fault_class, event.action, event.attempt, event.outcome) == ("server_error", "retry", 1, "recovered")
    assert 2.0 <= event.delay_s <= 3.0 and sleeps.total == pytest.approx(event.delay_s)
    failed = of(events, ApiCallFinished)[0]
    assert (failed.error_class, failed.status_code, failed.attempt) == ("server_error", 502, 1)


def test_retry_after_sets_the_pause(tmp_path):
    sleeps = Sleeps()
    agent, _, _ = make_agent(tmp_path, [ProviderError("slow down", status=429, retry_after=7.0), {"content": "ok"}],
                             sleep=sleeps)
    agent.chat("hi")
    assert sleeps.total == pytest.approx(7.0)


def test_a_zero_backoff_base_waits_the_cap_between_retries(tmp_path):
    sleeps = Sleeps()
    agent, _, events = make_agent(tmp_path, [ProviderError("upstream failed", status=502), {"content": "ok"}],
                                  sleep=sleeps, **{"recovery.backoff_base": 0, "recovery.backoff_cap": 4.0})
    assert agent.chat("hi").text == "ok"
    (event,) = of(events, RecoveryEvent)
    assert 4.0 <= event.delay_s <= 6.0 and sleeps.total == pytest.approx(event.delay_s)


def test_an_output_cap_that_does_not_say_what_fits_ends_the_turn_with_advice(tmp_path):
    agent, provider, events = make_agent(
        tmp_path, [ProviderError("max_tokens exceeds the model's maximum output length", status=400)],
        **{"model.max_tokens": 200_000})
    result = agent.chat("hi")
    assert result.status == "failed" and "lower model.max_tokens" in result.error and len(provider.requests) == 1
    assert [(e.fault_class, e.action) for e in of(events, RecoveryEvent)] == [("output_cap", "give_up")]


def test_a_stop_request_ends_the_backoff_wait(tmp_path):
    holder: list = []
    agent, _, events = make_agent(tmp_path, [ProviderError("overloaded", status=503), {"content": "late"}],
                                  sleep=Sleeps(holder))
    holder.append(agent)
    result = agent.chat("hi")
    assert result.status == "interrupted"
    assert of(events, RecoveryEvent)[0].outcome == "turn interrupted"


def test_a_permanent_failure_switches_to_the_fallback_for_this_turn_only(tmp_path):
    backup = ScriptedProvider([{"content": "answered by the backup"}])
    agent, primary, events = make_agent(
        tmp_path, [ProviderError("The model `x` does not exist", status=404), {"content": "primary again"}],
        fallbacks=[ProviderSlot(backup, "backup-model")])
    assert agent.chat("first").text == "answered by the backup"
    assert backup.requests[0].model == "backup-model"
    assert agent.chat("second").text == "primary again"
    assert [(e.fault_class, e.action, e.outcome) for e in of(events, RecoveryEvent)] == [
        ("model_not_found", "fallback", "recovered")]


def test_a_refused_credential_is_refreshed_once_and_the_new_provider_kept(tmp_path):
    fresh = ScriptedProvider([{"content": "with the new key"}, {"content": "still the new key"}])
    seen = []

    def refresh(provider):
        seen.append(provider)
        return fresh

    agent, old, _ = make_agent(tmp_path, [ProviderError("bad key", status=401)], refresh=refresh)
    assert agent.chat("hi").text == "with the new key"
    assert seen == [old] and agent.provider is fresh
    assert agent.chat("again").text == "still the new key"


def test_giving_up_ends_the_turn_with_advice_an_error_event_and_rows_in_the_lab(tmp_path):
    bus = EventBus()
    writer = StoreWriter(tmp_path / "lab.duckdb")
    writer.attach(bus)
    agent, provider, events = make_agent(tmp_path, [ProviderError("flaky", status=500)] * 3,
                                         bus=bus, **{"agent.api_max_retries": 2})
    result = agent.chat("hi")
    agent.close()
    writer.close()
    assert result.status == "failed" and len(provider.requests) == 3
    assert "server errors" in result.error and "gave up after 3 attempts" in result.error
    assert of(events, ErrorEvent)[0].error_class == "server_error"
    rows = open_lab(tmp_path / "lab.duckdb").recoveries(agent.session.id)
    assert list(rows["action"]) == ["retry", "retry", "give_up"]
    assert list(rows["outcome"])[:2] == ["failed: server_error"] * 2
    assert rows["turn"].tolist() == [1, 1, 1]


def test_an_overflow_lowers_the_window_compresses_and_asks_again(tmp_path):
    long = "The ledger lists item_{i} with {i}7 units in aisle {i}. " * 30
    steps = [{"content": long.format(i=i)} for i in range(8)]
    steps += [ProviderError("This model's maximum context length is 4096 tokens. However, your messages resulted "
                            "in 5100 tokens.", status=400, error_type="context_length_exceeded"),
              {"content": "fits now"}]
    agent, provider, events = make_agent(tmp_path, steps, compactor=True, **{"model.context_length": 200_000})
    for i in range(8):
        agent.chat(f"Tell me about item_{i}.")
    agent.compactor.state.auto_disabled = True  # the anti-thrash breaker does not stop an overflow compression
    assert agent.chat("Summarise the ledger.").text == "fits now"
    assert agent.compactor.window == 4096
    actions = [(e.action, e.outcome) for e in of(events, RecoveryEvent)]
    assert ("lower_window", "recovered") in actions and ("compress", "recovered") in actions
    size = [sum(len(str(m.get("content"))) for m in request.messages) for request in provider.requests[-2:]]
    assert size[1] < 0.7 * size[0]


def test_overflow_attempts_are_bounded_per_turn(tmp_path):
    overflow = ProviderError("prompt is too long: 9000 tokens > 8000 maximum", status=400)
    agent, provider, _ = make_agent(tmp_path, [overflow] * 5, compactor=True)
    result = agent.chat("hello")
    assert result.status == "failed" and len(provider.requests) == 4
    assert "overflow compressions already this turn" in result.error


def test_an_overflow_without_compression_is_a_clear_failure(tmp_path):
    agent, _, _ = make_agent(tmp_path, [ProviderError("prompt is too long: 9000 tokens > 8000 maximum", status=400)])
    result = agent.chat("hello")
    assert result.status == "failed" and "compression is disabled" in result.error


def seeded_tool_history(agent: Agent, tool_content, **assistant_fields) -> None:
    agent.session.append({"role": "user", "content": "take a screenshot"})
    agent.session.append({"role": "assistant", "content": None, **assistant_fields,
                          "tool_calls": [tool_call("shot", "screenshot", "{}")]})
    agent.session.append({"role": "tool", "tool_call_id": "shot", "content": tool_content})
    agent.session.append({"role": "assistant", "content": "Here it is."})


def test_images_in_tool_results_are_stripped_for_a_provider_that_refuses_them(tmp_path):
    agent, provider, events = make_agent(tmp_path, [
        ProviderError("Image URLs are only allowed for messages with role 'user', but this message with role 'tool' "
                      "contains an image URL.", status=400),
        {"content": "described"}, {"content": "again"}])
    seeded_tool_history(agent, [{"type": "text", "text": "screen"}, IMAGE])
    assert agent.chat("describe it").text == "described"
    sent = [m for m in provider.requests[1].messages if m["role"] == "tool"][0]
    assert [p["type"] for p in sent["content"]] == ["text", "text"]
    assert agent.messages[3]["content"][1] == IMAGE
    agent.chat("and now?")
    assert [p["type"] for p in provider.requests[2].messages[3]["content"]] == ["text", "text"]
    assert ("multimodal_tool_content", "strip_images", "recovered") in [
        (e.fault_class, e.action, e.outcome) for e in of(events, RecoveryEvent)]


def test_a_payload_too_large_that_compression_cannot_fix_strips_tool_images(tmp_path):
    agent, provider, _ = make_agent(tmp_path, [ProviderError("Request Entity Too Large", status=413),
                                               {"content": "ok"}], compactor=True)
    seeded_tool_history(agent, [{"type": "text", "text": "screen"}, IMAGE])
    assert agent.chat("describe it").text == "ok"
    assert all(p["type"] == "text" for p in provider.requests[1].messages[3]["content"])


def test_rejected_reasoning_blocks_are_dropped_from_the_request(tmp_path):
    agent, provider, _ = make_agent(tmp_path, [
        ProviderError("messages.2.content.0.thinking: Invalid `signature` in `thinking` block", status=400),
        {"content": "ok"}])
    seeded_tool_history(agent, "screen", reasoning_details=[{"type": "thinking", "signature": "abc"}])
    assert agent.chat("go on").text == "ok"
    assert "reasoning_details" in provider.requests[0].messages[2]
    assert "reasoning_details" not in provider.requests[1].messages[2]


def test_unencodable_tool_output_is_repaired_for_good_through_the_real_client(tmp_path):
    """A lone surrogate in the history makes the openai client fail before sending; the chain repairs it."""
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    registry.register(Tool("list_dir", "list a directory", schema, lambda args: "report\udcff.txt", read_only=True))
    with LocalServer(OfflineModel()) as server:
        client = OpenAICompatProvider(server.base_url, None, "hermeslab-offline", timeout=10)
        bus, events = EventBus(), []
        bus.subscribe(events.append)
        agent = Agent(client, config=Config(), tools=registry, bus=bus, sleep=lambda s: None)
        result = agent.chat("list files")
        client.close()
    assert result.status == "completed" and "report\ufffd.txt" in result.text
    tool_message = next(m for m in agent.messages if m["role"] == "tool")
    assert tool_message["content"] == "report\ufffd.txt"
    assert [(e.fault_class, e.action, e.outcome) for e in of(events, RecoveryEvent)] == [
        ("codec_error", "repair_encoding", "recovered")]
    validate_messages(agent.messages)


def test_the_runtime_builds_the_fallback_chain_from_the_config(tmp_path):
    from hermeslab.providers.faults import FaultSchedule, serve_with_faults
    from hermeslab.runtime import Runtime

    broken = serve_with_faults(OfflineModel(), FaultSchedule.single("model_not_found", at=(0,)))
    with LocalServer(OfflineModel()) as healthy:
        config = Config().with_overrides({
            "model.base_url": broken.base_url, "model.name": "hermeslab-offline",
            "store.path": str(tmp_path / "lab.duckdb"), "tools.workspace": str(tmp_path),
            "recovery.fallback_providers": [{"model": "hermeslab-offline", "base_url": healthy.base_url}]})
        with Runtime(config) as runtime:
            result = runtime.agent.chat("Who are you?")
            session_id = runtime.agent.session.id
        assert healthy.calls == 1
    broken.stop()
    assert result.status == "completed" and "offline model" in result.text
    rows = open_lab(tmp_path / "lab.duckdb").recoveries(session_id)
    assert list(zip(rows["fault_class"], rows["action"], rows["outcome"])) == [
        ("model_not_found", "fallback", "recovered")]


def test_a_refused_connection_gets_one_quick_retry_then_says_nothing_is_listening(tmp_path):
    import socket

    from hermeslab.providers.openai_compat import OpenAICompatProvider

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}/v1"
    sleeps = Sleeps()
    events: list = []
    bus = EventBus()
    bus.subscribe(events.append)
    config = Config().with_overrides({"tools.workspace": str(tmp_path)})
    agent = Agent(OpenAICompatProvider(endpoint, None, "m", timeout=5.0), config=config, bus=bus, sleep=sleeps,
                  rng=random.Random(5))
    result = agent.chat("hello")
    assert result.status == "failed" and "nothing is listening" in result.text and endpoint in result.text
    assert [(e.fault_class, e.action) for e in of(events, RecoveryEvent)] == [
        ("connection_refused", "retry"), ("connection_refused", "give_up")]
    assert sleeps.total == pytest.approx(0.5)
