"""LangChain's own ``SummarizationMiddleware`` stepped over a recording, before each recorded assistant reply.

The messages arrive as ``{"key", "role", "tokens", "calls", "answers"}``
(``calls``: the tool-call ids an assistant message makes; ``answers``: the
call a tool result answers) and become LangChain messages whose id is the
key; a leading system prompt is not part of the agent's state and is left
out. The middleware is LangChain's own, built with a fake chat model whose
profile gives the window as its input limit, a token counter that reads the
counts given (for a summary: the stub's count, or the one given for the text
LangChain writes without a call), and a summarizer answering a fixed text (or failing, when
asked to; LangChain then raises and the state stays as it was). Its
``before_model`` runs before every recorded reply and its update replaces the
state, as LangGraph's reducer applies it.
"""

from __future__ import annotations

from typing import Any

SUMMARY = "summary"


def describe() -> dict:
    from importlib.metadata import version

    return {"agent": "langchain", "version": version("langchain"), "langchain-core": version("langchain-core")}


def _message(wire: dict) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    if wire["role"] == "assistant":
        calls = [{"name": "tool", "args": {}, "id": call_id, "type": "tool_call"} for call_id in wire["calls"]]
        return AIMessage(content=wire["key"], id=wire["key"], tool_calls=calls)
    if wire["role"] == "tool":
        return ToolMessage(content=wire["key"], id=wire["key"], tool_call_id=wire["answers"] or "")
    return HumanMessage(content=wire["key"], id=wire["key"])


def _summary_tokens(item: Any, params: dict) -> int:
    """The count given for a summary: the stub's, or the one for LangChain's fixed text when no call was made."""
    return params["summary_tokens"] if "the stub summary" in str(item.content) else params["too_long_tokens"]


def replay(messages: list[dict], params: dict) -> list[dict]:
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    tokens = {wire["key"]: wire["tokens"] for wire in messages}

    def count(items: Any) -> int:
        return sum(tokens[item.id] if item.id in tokens else _summary_tokens(item, params) for item in items)

    def summarizer(items: Any) -> str:
        if params.get("fails"):
            raise RuntimeError("the summary model is down")
        return "the stub summary"

    model = FakeListChatModel(responses=["unused"], profile={"max_input_tokens": params["window"]})
    middleware = SummarizationMiddleware(model, trigger=("fraction", params["fraction"]), token_counter=count,
                                         summarizer=summarizer)
    state: list[Any] = []
    steps = []
    for index, wire in enumerate(messages):
        if wire["role"] == "system" and not state:
            continue
        if wire["role"] == "assistant":
            try:
                update = middleware.before_model({"messages": state}, None)
            except RuntimeError:
                update = None
            if update is not None:
                state = list(update["messages"][1:])
            steps.append({"at": index, "compacted": update is not None,
                          "view": [item.id if item.id in tokens else SUMMARY for item in state]})
        state.append(_message(wire))
    return steps
