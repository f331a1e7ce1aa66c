"""Inspect AI's own compaction handler stepped over a recording, before each recorded assistant reply.

The messages arrive as ``{"key", "role", "tokens", "calls", "answers"}`` and
become Inspect chat messages whose id and text are the key. The handler is
Inspect's own ``compaction()`` with its own ``CompactionSummary`` or
``CompactionTrim`` at their defaults, on Inspect's offline ``mockllm`` model
whose token counts read the counts given (a summary: the count given for the
stub), whose input limit is the window and whose summary call answers a fixed
text (or fails, when asked to). Before each reply the handler gets the whole
history, as Inspect's agents call it, and a summary it returns joins the
history. A compaction that raises leaves the handler's state as it was.
"""

from __future__ import annotations

import asyncio
from typing import Any

SUMMARY = "summary"


def describe() -> dict:
    from importlib.metadata import version

    return {"agent": "inspect-ai", "version": version("inspect-ai")}


def _message(wire: dict) -> Any:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    key = wire["key"]
    if wire["role"] == "system":
        return ChatMessageSystem(id=key, content=key)
    if wire["role"] == "assistant":
        calls = [ToolCall(id=call_id, function="tool", arguments={}) for call_id in wire["calls"]]
        return ChatMessageAssistant(id=key, content=key, tool_calls=calls or None)
    if wire["role"] == "tool":
        return ChatMessageTool(id=key, content=key, tool_call_id=wire["answers"] or "")
    return ChatMessageUser(id=key, content=key)


def _view(messages: list[Any], tokens: dict[str, int]) -> list[str]:
    """Each message's key (a summary's fixed name), an assistant's with the number of calls it still makes."""
    keys = []
    for message in messages:
        key = message.text if message.text in tokens else SUMMARY
        if message.role == "assistant" and message.tool_calls:
            key += f":{len(message.tool_calls)}"
        keys.append(key)
    return keys


_ATTEMPTS: list[bool] = []


def _count_compactions(orchestration: Any) -> list[bool]:
    """A list that grows by one at each compaction Inspect attempts, emptied for this replay (wrapped once only:
    a wrapper around a wrapper per replay would nest until Python's recursion limit)."""
    if not getattr(orchestration, "_hermeslab_counted", False):
        original = orchestration._perform_compaction

        async def counted(*args: Any, **kwargs: Any) -> Any:
            _ATTEMPTS.append(True)
            return await original(*args, **kwargs)

        orchestration._perform_compaction = counted
        orchestration._hermeslab_counted = True
    _ATTEMPTS.clear()
    return _ATTEMPTS


def replay(messages: list[dict], params: dict) -> list[dict]:
    return asyncio.run(_replay(messages, params))


async def _replay(messages: list[dict], params: dict) -> list[dict]:
    from inspect_ai.model import ModelOutput, get_model
    from inspect_ai.model._compaction import _compaction as orchestration
    from inspect_ai.model._compaction.summary import CompactionSummary
    from inspect_ai.model._compaction.trim import CompactionTrim

    tokens = {wire["key"]: wire["tokens"] for wire in messages}
    model = get_model("mockllm/model")

    async def count_tokens(items: Any, config: Any = None) -> int:
        return sum(tokens.get(item.text, params["summary_tokens"]) for item in items)

    async def count_tool_tokens(tools: Any) -> int:
        return 0

    async def generate(input: Any, *args: Any, **kwargs: Any) -> Any:
        if params.get("fails"):
            raise RuntimeError("the summary model is down")
        return ModelOutput.from_content(model="mockllm/model", content="the stub summary")

    model.count_tokens = count_tokens
    model.count_tool_tokens = count_tool_tokens
    model.generate = generate
    orchestration.get_model_input_tokens = lambda target: params["window"]
    performed = _count_compactions(orchestration)
    strategy = CompactionSummary() if params["strategy"] == "summary" else CompactionTrim()
    handler = orchestration.compaction(strategy, prefix=[], model=model)
    history: list[Any] = []
    steps = []
    for index, wire in enumerate(messages):
        if wire["role"] == "assistant":
            before = len(performed)
            try:
                sent, summary = await handler.compact_input(history)
            except RuntimeError:
                sent, summary = None, None
            if summary is not None:
                history.append(summary)
            steps.append({"at": index, "compacted": len(performed) > before,
                          "view": _view(sent, tokens) if sent is not None else None})
        history.append(_message(wire))
    return steps
