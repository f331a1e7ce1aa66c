"""The offline model as a Provider: validation, usage counting and word-sized streaming."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ...core.messages import (
    MessageValidationError,
    validate_messages,
)
from ...core.tokens import count_text, default_counter, encoding
from ...core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage, context_overflow
from .conversation import compose_reply

Message = dict[str, Any]

MODEL_NAME = "hermeslab-offline"


class OfflineModel:
    """The Provider; all decisions live in the pure functions below.

    With a ``context_length`` it refuses longer prompts the way a hosted model
    does, so the overflow path runs against the embedded default too.
    """

    name = MODEL_NAME
    model = MODEL_NAME

    def __init__(self, context_length: int | None = None):
        self.context_length = context_length

    def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            validate_messages(request.messages)
        except MessageValidationError as exc:
            raise ProviderError(f"invalid messages: {exc}", status=400, error_type="invalid_request_error") from None
        if request.max_tokens is not None and request.max_tokens < 1:
            raise ProviderError(
                f"max_tokens must be at least 1, got {request.max_tokens}", status=400, error_type="invalid_request_error"
            )
        prompt_tokens = default_counter.count_request(request.messages, request.tools)
        if self.context_length is not None and prompt_tokens > self.context_length:
            raise context_overflow(self.context_length, prompt_tokens)
        draft = compose_reply(request.messages, request.tools)
        text, finish = draft.text, "tool_calls" if draft.tool_calls else "stop"
        if not draft.tool_calls and request.max_tokens is not None:
            text, cut = truncate_to_tokens(text, request.max_tokens)
            finish = "length" if cut else finish
        message: Message = {"role": "assistant", "content": text if text or not draft.tool_calls else None}
        if draft.tool_calls:
            message["tool_calls"] = draft.tool_calls
        usage = Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens(message),
        )
        return ChatResponse(message=message, finish_reason=finish, usage=usage, model=request.model or MODEL_NAME)

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        response = self.complete(request)
        for piece in word_pieces(response.message.get("content") or ""):
            yield StreamDelta(text=piece)
        yield response


def completion_tokens(message: Message) -> int:
    """Tokens of the produced text plus each tool call's name and arguments."""
    tokens = count_text(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        tokens += count_text(call["function"]["name"]) + count_text(call["function"]["arguments"])
    return tokens


def truncate_to_tokens(text: str, limit: int) -> tuple[str, bool]:
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text, False
    return encoding().decode(tokens[:limit]), True


def word_pieces(text: str) -> list[str]:
    """Word-sized stream deltas that join back to exactly ``text``."""
    return re.findall(r"\S+\s*|\s+", text)
