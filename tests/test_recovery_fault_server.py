"""Recovery behaviours end to end: the agent, the real `openai` client and the fault server.

The server records what each request asked for, so the tests see the retry
itself: the output cap it was sent with, and which provider received it.
"""

from __future__ import annotations

import random
from typing import Any, Mapping

import pytest

from hermeslab.agent import Agent
from hermeslab.core.config import Config
from hermeslab.core.events import CompressionEvent, EventBus, RecoveryEvent
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.providers.faults import FaultSchedule, Injection, serve_with_faults
from hermeslab.recovery import ProviderSlot
from hermeslab.recovery.turn import OUTPUT_CAP_MARGIN

MODEL = "hermeslab-offline"
OUTPUT_CAPS = ("output_cap_anthropic", "output_cap_openai", "output_cap_openrouter", "output_cap_vllm")


class Hosted:
    """A server (faulty or not) that remembers the ``max_tokens`` of every request it received."""

    def __init__(self, schedule: FaultSchedule | None):
        self.server = serve_with_faults(OfflineModel(), schedule) if schedule else LocalServer(OfflineModel())
        self.base_url = self.server.base_url if schedule else self.server.start()
        self.max_tokens: list[int | None] = []
        respond = self.server.endpoint.respond

        def recording(call_index: int, payload: Mapping[str, Any]):
            self.max_tokens.append(payload.get("max_tokens"))
            return respond(call_index, payload)

        self.server.endpoint.respond = recording
        self.client = OpenAICompatProvider(self.base_url, None, MODEL, timeout=10, name="hosted")

    def close(self) -> None:
        self.client.close()
        close = getattr(self.server.endpoint, "close", None)
        if close is not None:
            close()
        self.server.stop()


@pytest.fixture
def hosted():
    made: list[Hosted] = []

    def make(schedule: FaultSchedule | None = None) -> Hosted:
        made.append(Hosted(schedule))
        return made[-1]

    yield make
    for item in made:
        item.close()


def agent_for(primary: Hosted, *fallbacks: Hosted, **overrides: Any) -> tuple[Agent, list]:
    config = Config().with_overrides({"compression.summariser": "extractive", **overrides})
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    agent = Agent(primary.client, config=config, bus=bus, sleep=lambda seconds: None, rng=random.Random(3),
                  fallbacks=[ProviderSlot(backup.client, MODEL) for backup in fallbacks])
    return agent, events


@pytest.mark.parametrize("kind", OUTPUT_CAPS)
def test_an_output_cap_is_retried_once_just_under_the_stated_budget_and_the_window_is_kept(hosted, kind):
    expected = agent_for(hosted(), **{"model.max_tokens": 4096})[0].chat("Who are you?").text
    server = hosted(FaultSchedule.single(kind, at=(0, 1), available=1000))
    agent, events = agent_for(server, **{"model.max_tokens": 4096})
    window = agent.context.window
    result = agent.chat("Who are you?")
    assert result.status == "completed" and result.text == expected
    assert server.max_tokens == [4096, 1000 - OUTPUT_CAP_MARGIN]
    assert server.server.endpoint.injected == [Injection(0, kind, True), Injection(1, kind, False)]
    assert agent.context.window == window and not [e for e in events if isinstance(e, CompressionEvent)]
    assert [(e.fault_class, e.action, e.outcome) for e in events if isinstance(e, RecoveryEvent)] == [
        ("output_cap", "lower_output_cap", "recovered")]
    assert agent.chat("Who are you?").status == "completed" and server.max_tokens[-1] == 4096  # for this call only


def test_a_lowered_output_cap_also_stays_below_what_the_window_leaves(hosted):
    server = hosted(FaultSchedule.single("output_cap_anthropic", at=(0,), available=50_000))
    agent, _ = agent_for(server, **{"model.max_tokens": 60_000, "model.context_length": 32_768})
    assert agent.chat("Who are you?").status == "completed"
    assert server.max_tokens[0] == 60_000 and server.max_tokens[1] < 32_768 - OUTPUT_CAP_MARGIN


def test_a_rate_limited_primary_hands_over_to_the_fallback_after_one_request(hosted):
    primary = hosted(FaultSchedule.single("rate_limit", at=(0, 1, 2, 3), retry_after=30))
    backup = hosted()
    agent, events = agent_for(primary, backup)
    result = agent.chat("Who are you?")
    assert result.status == "completed" and "offline model" in result.text
    assert (primary.server.calls, backup.server.calls) == (1, 1)
    assert [(e.fault_class, e.action) for e in events if isinstance(e, RecoveryEvent)] == [("rate_limit", "fallback")]


@pytest.mark.parametrize("kind", ["disconnect_message", "tls_alert_message", "connect_error_message"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_transport_failure_told_only_in_words_is_retried(hosted, kind, stream):
    server = hosted(FaultSchedule.single(kind, at=(0,)))
    agent, events = agent_for(server, **{"agent.stream": stream})
    assert agent.chat("Who are you?").status == "completed"
    assert [(e.fault_class, e.action, e.outcome) for e in events if isinstance(e, RecoveryEvent)] == [
        ("connection", "retry", "recovered")]
