"""openhands-sdk's condensers stepped through a recorded conversation, as its agent steps.

Each recorded message becomes the events the SDK's agent would have logged
(see ``hermeslab.context.openhands_view`` for the mapping); event ids are the
message keys, ``m<index>`` or ``m<index>.<call>`` for the calls of one reply,
and ``c<n>`` for the n-th condensation (its summary is ``c<n>-summary``).
Before each recorded assistant reply the agent's step is run: the view is
rebuilt from every event with ``View.from_events`` and handed to the
condenser; a ``Condensation`` is appended to the log and the step repeats, as
the agent returns after one and condenses again on its next step; a view is
what the model would have been sent. The summary model is a stub that answers
with fixed text, so only decisions are compared.
"""

from __future__ import annotations

import types
from importlib import metadata
from typing import Any

from openhands.sdk.context.condenser import LLMSummarizingCondenser
from openhands.sdk.context.view import View
from openhands.sdk.event import (
    ActionEvent,
    Condensation,
    MessageEvent,
    ObservationEvent,
    SystemPromptEvent,
)
from openhands.sdk.llm import LLM, Message, MessageToolCall, TextContent
from openhands.sdk.tool.schema import Observation

from oh_messages import message_text

#: Condensations one step may produce before the worker calls it a loop.
MAX_CONDENSATIONS_PER_STEP = 10
STUB_SUMMARY = "stub summary of the forgotten events"


class RecordedObservation(Observation):
    """A tool result as recorded: its text only."""


class StubSummaryLLM(LLM):
    """The condenser's summary model: a fixed answer, no network."""

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return types.SimpleNamespace(id="stub-response",
                                     message=Message(role="assistant", content=[TextContent(text=STUB_SUMMARY)]))


def describe() -> dict:
    return {"family": "openhands-sdk", "version": metadata.version("openhands-sdk"),
            "condensers": ["llm_summarizing"]}


def events_for(index: int, message: dict, actions: dict[str, str]) -> list[Any]:
    """The events the SDK's agent logs for recorded message ``index``; ``actions`` maps call ids to event ids."""
    role, key, text = message.get("role"), f"m{index}", message_text(message)
    if role == "system" and index == 0:
        return [SystemPromptEvent(id=key, system_prompt=TextContent(text=text), tools=[])]
    if role == "assistant" and message.get("tool_calls"):
        events = []
        for number, call in enumerate(message["tool_calls"]):
            function = call.get("function") or {}
            event_id = f"{key}.{number}"
            actions[call["id"]] = event_id
            events.append(ActionEvent(
                id=event_id, thought=[TextContent(text=text)] if number == 0 and text else [],
                tool_name=function.get("name") or "tool", tool_call_id=call["id"],
                tool_call=MessageToolCall(id=call["id"], name=function.get("name") or "tool",
                                          arguments=function.get("arguments") or "{}", origin="completion"),
                llm_response_id=f"response-{index}", action=None))
        return events
    if role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        return [ObservationEvent(id=key, observation=RecordedObservation(content=[TextContent(text=text)]),
                                 action_id=actions.get(call_id, "unknown"), tool_name=message.get("name") or "tool",
                                 tool_call_id=call_id)]
    if role == "assistant":
        return [MessageEvent(id=key, source="agent", llm_response_id=f"response-{index}",
                             llm_message=Message(role="assistant", content=[TextContent(text=text)]))]
    return [MessageEvent(id=key, source="user", llm_message=Message(role="user", content=[TextContent(text=text)]))]


def build_condenser(name: str, params: dict) -> Any:
    if name != "llm_summarizing":
        raise ValueError(f"openhands-sdk has no condenser {name!r} here; it offers llm_summarizing")
    llm = StubSummaryLLM(model="stub/summary", usage_id="condenser")
    return LLMSummarizingCondenser(llm=llm, **params)


def replay(messages: list[dict], condenser_name: str, params: dict) -> list[dict]:
    """One record per recorded assistant reply: the condensations made before it and the view sent."""
    condenser = build_condenser(condenser_name, params)
    log: list[Any] = []
    actions: dict[str, str] = {}
    steps = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            steps.append(_step(index, log, condenser))
        log.extend(events_for(index, message, actions))
    return steps


def _step(index: int, log: list[Any], condenser: Any) -> dict:
    condensations = []
    for _ in range(MAX_CONDENSATIONS_PER_STEP + 1):
        view = View.from_events(log)
        outcome = condenser.condense(view, agent_llm=None)
        if not isinstance(outcome, Condensation):
            return {"at": index, "condensations": condensations, "view": [event.id for event in outcome.events]}
        number = sum(isinstance(event, Condensation) for event in log)
        outcome = outcome.model_copy(update={"id": f"c{number}"})
        order = {event.id: position for position, event in enumerate(view.events)}
        condensations.append({"forgotten": sorted(outcome.forgotten_event_ids, key=order.__getitem__),
                              "offset": outcome.summary_offset, "summary": outcome.summary is not None})
        log.append(outcome)
    raise RuntimeError(f"the condenser kept condensing before message {index}")
