"""The provider contract: what every model backend takes, returns and raises.

A provider takes a ``ChatRequest`` and either returns a whole ``ChatResponse``
(``complete``) or yields ``StreamDelta`` fragments followed by exactly one
``ChatResponse`` as the last item (``stream``). Failures are raised as
``ProviderError`` carrying what the recovery chain needs to classify them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from .tokens import count_text


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]
    model: str = ""
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    #: Extra body fields passed through to OpenAI-compatible endpoints.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatResponse:
    #: The assistant message in chat format (``role``, ``content``, optional ``tool_calls``).
    message: dict[str, Any]
    finish_reason: str | None = "stop"
    #: None when the provider reported no usage.
    usage: Usage | None = None
    model: str = ""
    #: Reasoning text the provider returned separately from the content, if any.
    reasoning: str | None = None
    #: Where ``usage`` came from: ``reported`` with the answer, or counted afterwards by the server's
    #: tokenizer (``server_template``, ``server_tokenizer``) when the answer carried none.
    usage_source: str = "reported"


@dataclass
class StreamDelta:
    text: str = ""
    reasoning: str = ""


class ProviderError(Exception):
    """A failed model call: HTTP status, the provider's message and what can be parsed from it."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Any = None,
        error_type: str | None = None,
        retry_after: float | None = None,
        context_limit: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body
        #: The exception class or error code behind the failure (``APITimeoutError``, ``context_length_exceeded``).
        self.error_type = error_type
        self.retry_after = retry_after
        self.context_limit = context_limit

    def __str__(self) -> str:
        prefix = f"HTTP {self.status}: " if self.status else ""
        return f"{prefix}{self.message}"


@runtime_checkable
class Provider(Protocol):
    #: Name used in logs and the sessions table.
    name: str

    def complete(self, request: ChatRequest) -> ChatResponse: ...

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]: ...


def context_overflow(limit: int, prompt_tokens: int) -> ProviderError:
    """The refusal an OpenAI-compatible endpoint sends for a prompt longer than its window."""
    return ProviderError(
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{prompt_tokens} tokens. Please reduce the length of the messages.",
        status=400, error_type="context_length_exceeded", context_limit=limit)


def receive(provider: Provider, request: ChatRequest, *, stream: bool, on_delta: Callable[[StreamDelta], None],
            stopped: Callable[[], bool]) -> ChatResponse:
    """One response from ``provider``, streamed when asked: each fragment goes to ``on_delta``.

    When ``stopped()`` turns true mid-stream, the text so far comes back as an
    assistant message marked ``_interrupted``, so the caller can keep it.
    """
    if not stream:
        return provider.complete(request)
    parts: list[str] = []
    fragments = provider.stream(request)
    try:
        for item in fragments:
            if isinstance(item, ChatResponse):
                return item
            if isinstance(item, StreamDelta):
                parts.append(item.text)
                on_delta(item)
            if stopped():
                return ChatResponse(message={"role": "assistant", "content": "".join(parts), "_interrupted": True},
                                    finish_reason="interrupted", usage=None, model=request.model)
    finally:
        if callable(getattr(fragments, "close", None)):
            fragments.close()
    raise ProviderError("the stream ended without a final response", error_type="invalid_response")


#: Where a call's token figures came from. The server reported them; the server's tokenizer counted the
#: prompt its own chat template made of the messages; the server's tokenizer counted the messages' text
#: (no template markers); or our own count of the request (the only figures shown with a ``~``).
REPORTED, SERVER_TEMPLATE, SERVER_TOKENIZER, ESTIMATE = "reported", "server_template", "server_tokenizer", "estimate"

#: What an estimated prompt figure counts, for the labels that show one. It is not calibrated: with no
#: reading from the provider there is nothing honest to correct it by.
ESTIMATE_COUNTS = ("local count of the messages and tool schemas sent, "
                   "more than the server counts if its template drops any")


def usage_or_estimate(response: ChatResponse, estimate: int) -> tuple[Usage, bool]:
    """The provider's usage, or (flagged True) our figures where the provider gave none.

    ``estimate`` is the local count of the request as sent (messages, tool schemas
    and reply priming), which a server whose chat template drops the tool schemas
    or the system prompt never saw: it is a figure to label, never to present as
    measured. Figures the server's tokenizer counted are the server's, not ours.
    A usage object of all zeros (what some servers send when they do not count)
    is no report; a report without a prompt count keeps its other counts and
    takes ``estimate`` for the prompt, still flagged.
    """
    usage = response.usage
    if usage is not None and usage.prompt_tokens > 0:
        return usage, False  # reported, or counted by the server's tokenizer (``response.usage_source``)
    if usage is not None and usage.completion_tokens > 0:
        return Usage(prompt_tokens=estimate, completion_tokens=usage.completion_tokens,
                     cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens,
                     reasoning_tokens=usage.reasoning_tokens), True
    message = response.message
    reasoning = count_text(response.reasoning or "")
    completion = count_text(message.get("content") or "") + reasoning + sum(
        count_text((call.get("function") or {}).get("arguments") or "") for call in message.get("tool_calls") or ())
    return Usage(prompt_tokens=estimate, completion_tokens=completion, reasoning_tokens=reasoning), True


def usage_source(response: ChatResponse, estimated: bool) -> str:
    """The source of the figures ``usage_or_estimate`` gave for ``response``."""
    return ESTIMATE if estimated else response.usage_source
