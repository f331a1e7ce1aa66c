"""A Provider test double that answers from a script of assistant messages or errors."""

from __future__ import annotations

import threading
from typing import Any, Iterator

from hermeslab.core.tokens import count_text, default_counter
from hermeslab.core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class ScriptedProvider:
    """Returns the scripted steps in order; a ProviderError step is raised instead."""

    name = "scripted"

    def __init__(self, steps: list[dict[str, Any] | ProviderError], *, chunk_gate: threading.Event | None = None):
        self.steps = list(steps)
        self.requests: list[ChatRequest] = []
        self.chunk_gate = chunk_gate

    def _next(self, request: ChatRequest) -> dict[str, Any]:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError("the script ran out of steps")
        step = self.steps.pop(0)
        if isinstance(step, ProviderError):
            raise step
        return step

    def _response(self, request: ChatRequest, message: dict[str, Any]) -> ChatResponse:
        completion = count_text(message.get("content") or "")
        usage = Usage(prompt_tokens=default_counter.count_request(request.messages, request.tools),
                      completion_tokens=completion)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return ChatResponse(message={"role": "assistant", **message}, finish_reason=finish, usage=usage,
                            model="scripted")

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self._response(request, self._next(request))

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        message = self._next(request)
        for word in (message.get("content") or "").split(" "):
            if self.chunk_gate is not None:
                self.chunk_gate.wait(0.05)
            yield StreamDelta(text=word + " ")
        yield self._response(request, message)
