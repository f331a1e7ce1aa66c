"""OpenHands 0.62's own condensers (``openhands.memory.condenser``) stepped through a recorded conversation.

The recording becomes the event stream OpenHands 0.62's function-calling agent
kept: a system message action, user and agent message actions, one command
action per tool call and one command output observation per tool result,
numbered in order as the event stream numbers them. Before each recorded
assistant reply the agent's step is run: ``View.from_events`` over the stream,
then the condenser; a ``Condensation`` puts its action in the stream (with the
next number) and the step repeats, a ``View`` is what the model would see:
for amortized forgetting, as its conversation memory starts a prompt from it
(a system prompt first when the view has none left) and then filters it
(calls without results and results without calls left out).
Records use the same keys as the SDK worker: ``m<index>``, ``m<index>.<call>``
for a reply's calls, and ``!masked`` after the key of a masked observation.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from litellm import ChatCompletionMessageToolCall
from openhands.core.config import AgentConfig
from openhands.core.message import Message, TextContent
from openhands.events.action import CmdRunAction, MessageAction
from openhands.events.action.message import SystemMessageAction
from openhands.events.observation import CmdOutputObservation
from openhands.events.observation.agent import AgentCondensationObservation
from openhands.memory.condenser.condenser import Condensation
from openhands.memory.condenser.impl.amortized_forgetting_condenser import (
    AmortizedForgettingCondenser,
)
from openhands.memory.condenser.impl.observation_masking_condenser import (
    ObservationMaskingCondenser,
)
from openhands.memory.conversation_memory import ConversationMemory
from openhands.memory.view import View

from oh_messages import message_text

MAX_CONDENSATIONS_PER_STEP = 10
CONDENSERS = {"observation_masking": ObservationMaskingCondenser, "amortized_forgetting": AmortizedForgettingCondenser}


def describe() -> dict:
    return {"family": "openhands-ai", "version": metadata.version("openhands-ai"), "condensers": sorted(CONDENSERS)}


def call_ids(index: int, message: dict) -> dict[str, str]:
    """Event key → tool call id, for the calls and the result of recorded message ``index``."""
    if message.get("role") == "tool":
        return {f"m{index}": str(message.get("tool_call_id") or "")}
    return {f"m{index}.{number}": str(call.get("id") or "") for number, call in enumerate(message.get("tool_calls") or [])}


def events_for(index: int, message: dict) -> list[tuple[str, Any]]:
    """(key, event) for the events OpenHands 0.62 logs for recorded message ``index``."""
    role, key, text = message.get("role"), f"m{index}", message_text(message)
    if role == "system" and index == 0:
        return [(key, SystemMessageAction(content=text))]
    if role == "assistant" and message.get("tool_calls"):
        return [(f"{key}.{number}", CmdRunAction(command=(call.get("function") or {}).get("arguments") or ""))
                for number, call in enumerate(message["tool_calls"])]
    if role == "tool":
        return [(key, CmdOutputObservation(content=text, command=""))]
    return [(key, MessageAction(content=text))]


class RecordedPrompt:
    """The prompt manager's one duty here: the system prompt, the recording's own."""

    def __init__(self, text: str):
        self.text = text

    def get_system_message(self, cli_mode: bool = False) -> str:
        return self.text


def replay(messages: list[dict], condenser_name: str, params: dict) -> list[dict]:
    """One record per recorded assistant reply: the condensations made before it and the view shown."""
    if condenser_name not in CONDENSERS:
        raise ValueError(f"unknown condenser {condenser_name!r}; expected one of {', '.join(sorted(CONDENSERS))}")
    condenser = CONDENSERS[condenser_name](**params)
    first = messages[0] if messages else {}
    system = message_text(first) if first.get("role") == "system" else ""
    memory = ConversationMemory(AgentConfig(), RecordedPrompt(system))
    stream: list[Any] = []
    keys: dict[int, str] = {}
    calls: dict[str, str] = {}
    steps = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            steps.append(_step(index, stream, keys, calls, condenser, memory))
        calls.update(call_ids(index, message))
        for key, event in events_for(index, message):
            _add(stream, keys, key, event)
    return steps


def _add(stream: list[Any], keys: dict[int, str], key: str, event: Any) -> None:
    event._id = len(stream)  # the event stream's numbering
    keys[event.id] = key
    stream.append(event)


def sent(shown: list[str], calls: dict[str, str]) -> list[str]:
    """The keys of ``shown`` that OpenHands' conversation memory sends: its own filter
    (``ConversationMemory._filter_unmatched_tool_calls``) drops tool calls whose results are gone
    and results whose calls are gone. ``calls`` maps action and observation keys to call ids."""
    messages, plain = [], {}
    actions = {calls[key]: key for key in shown if "." in key and key in calls}
    results = {calls[key]: key for key in shown if "." not in key and key in calls}
    for key in shown:
        if key in actions.values():
            reply = key.split(".")[0]
            if messages and messages[-1].role == "assistant" and actions[messages[-1].tool_calls[0].id].split(".")[0] == reply:
                messages[-1].tool_calls.append(_tool_call(calls[key]))
            else:
                messages.append(Message(role="assistant", content=[], tool_calls=[_tool_call(calls[key])]))
        elif key in results.values():
            messages.append(Message(role="tool", content=[TextContent(text="")], tool_call_id=calls[key]))
        else:
            message = Message(role="user", content=[TextContent(text="")])
            plain[id(message)] = key
            messages.append(message)
    out = []
    for message in ConversationMemory._filter_unmatched_tool_calls(messages):
        if message.role == "assistant":
            out += [actions[call.id] for call in message.tool_calls]
        elif message.role == "tool":
            out.append(results[message.tool_call_id])
        else:
            out.append(plain[id(message)])
    return out


def _tool_call(call_id: str) -> Any:
    return ChatCompletionMessageToolCall(id=call_id, type="function", function={"name": "run", "arguments": "{}"})


def prompt_keys(events: list[Any], keys: dict[int, str], memory: ConversationMemory) -> list[str]:
    """The keys of ``events`` once the memory put a system prompt first where none is left
    (``ConversationMemory._ensure_system_message``); that prompt is the recording's, ``m0``."""
    events = list(events)
    memory._ensure_system_message(events)
    return [keys.get(event.id, "m0" if isinstance(event, SystemMessageAction) else "summary") for event in events]


def _step(index: int, stream: list[Any], keys: dict[int, str], calls: dict[str, str], condenser: Any,
          memory: ConversationMemory) -> dict:
    condensations = []
    for number in range(MAX_CONDENSATIONS_PER_STEP + 1):
        view = View.from_events(stream)
        outcome = condenser.condense(view)
        if not isinstance(outcome, Condensation):
            if len(outcome.events) != len(view.events):
                raise RuntimeError("the condenser changed the number of events in a view")
            if isinstance(condenser, ObservationMaskingCondenser):
                # Masking is compared as the condenser decided it: OpenHands' memory would then turn each
                # masked result into a user message and drop its call, which hermeslab does not copy.
                shown = []
                for before, after in zip(view.events, outcome.events):
                    masked = isinstance(after, AgentCondensationObservation) and after is not before
                    shown.append(keys.get(before.id, "summary") + ("!masked" if masked else ""))
                return {"at": index, "condensations": condensations, "view": shown}
            return {"at": index, "condensations": condensations,
                    "view": sent(prompt_keys(outcome.events, keys, memory), calls)}
        action = outcome.action
        forgotten = [keys[event.id] for event in view.events if event.id in set(action.forgotten)]
        condensations.append({"forgotten": forgotten, "offset": action.summary_offset,
                              "summary": action.summary is not None})
        _add(stream, keys, f"c{number}", action)
    raise RuntimeError(f"the condenser kept condensing before message {index}")
