"""A provider that answers from a recording: the k-th model call gets the k-th recorded assistant message.

Replaying a recorded session under another compression config changes what
the context holds and what each call costs, never what the model says. So the
answers come from the recording, and the usage is measured on the request as
it was actually sent: the prompt with a token counter (tiktoken, or the rough
chars/4 arithmetic Hermes's own replay measures), the completion on the
recorded message.

With ``context_length`` set, a prompt above it is refused the way an
OpenAI-compatible endpoint refuses it (HTTP 400, "maximum context length"),
so the agent's overflow recovery runs as it would live. A refused call does
not consume a recorded message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..core.cache import bounded_put
from ..core.messages import tool_calls_of
from ..core.rough import (
    rough_list_share_tokens,
    rough_messages_tokens,
    rough_reply_tokens,
    rough_tool_schema_tokens,
)
from ..core.tokens import REPLY_PRIMING, TokenCounter, count_text, counter_for, default_counter
from ..core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage, context_overflow

#: Names a counter can be chosen by.
COUNTERS = ("tiktoken", "tiktoken:<encoding>", "rough")


class ReplayExhausted(ProviderError):
    """A call the recording holds no reply for.

    Raised as a provider's refusal of a malformed request (HTTP 400), so an
    agent ends the turn cleanly as failed, with the reason in its log, instead
    of retrying a call no recording can answer.
    """

    def __init__(self, message: str):
        super().__init__(message, status=400, error_type="replay_exhausted")


class RoughCounter(TokenCounter):
    """Hermes's chars/4 estimate behind the TokenCounter interface.

    A request counts as the repr length of its messages / 4 (images at a flat
    rate) plus the characters of the tool schemas / 4: the unit the ``rough``
    estimator compares with its thresholds, and what Hermes's replay reports.
    """

    def __init__(self) -> None:
        super().__init__()
        self.encoding = "rough chars/4"

    def count_message(self, message: dict[str, Any]) -> int:
        return rough_list_share_tokens(message)

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return rough_messages_tokens(messages)

    def count_tools(self, tools: Sequence[dict] | None) -> int:
        return rough_tool_schema_tokens(tools)

    def count_request(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict] | None = None) -> int:
        return rough_messages_tokens(messages) + rough_tool_schema_tokens(tools)


def make_counter(name: str) -> TokenCounter:
    """The counter called ``name``: ``tiktoken`` (cl100k_base), ``tiktoken:<encoding>``, or ``rough``."""
    if name == "tiktoken":
        return default_counter
    if name.startswith("tiktoken:"):
        return counter_for(name.partition(":")[2])
    if name == "rough":
        return RoughCounter()
    raise ValueError(f"unknown token counter {name!r} (expected one of {', '.join(COUNTERS)})")


def completion_tokens(message: dict[str, Any], counter: TokenCounter) -> int:
    """Tokens a reply costs to produce: its text plus each tool call's name and arguments."""
    if isinstance(counter, RoughCounter):
        return rough_reply_tokens(message)
    tokens = _text_tokens(message.get("content") or "")
    for call in tool_calls_of(message):
        function = call.get("function") or {}
        tokens += _text_tokens(function.get("name") or "") + _text_tokens(function.get("arguments") or "")
    return tokens


#: tiktoken counts of recorded texts: replaying a recording again (another config) re-encodes none of them.
_TEXT_TOKENS: dict[str, int] = {}
_TEXT_TOKENS_MAX = 100_000


def _text_tokens(text: str) -> int:
    tokens = _TEXT_TOKENS.get(text)
    if tokens is None:
        tokens = count_text(text)
        bounded_put(_TEXT_TOKENS, text, tokens, _TEXT_TOKENS_MAX)
    return tokens


def billed_prompt_tokens(counter: TokenCounter, messages: Sequence[dict[str, Any]],
                        tools: Sequence[dict] | None) -> int:
    """A request's prompt tokens as the replay provider bills them (tiktoken counts include reply priming)."""
    if type(counter) is TokenCounter:
        return counter.count_request(messages, tools) + REPLY_PRIMING
    return counter.count_request(messages, tools)


@dataclass(frozen=True)
class Refusal:
    """A prompt turned away as longer than the window."""

    #: Calls answered before it (the refused call would have been ``served[call]``).
    call: int
    #: The recorded reply it asked for, by position among the recording's assistant messages.
    reply_index: int
    messages: list[dict[str, Any]]
    prompt_tokens: int


@dataclass(frozen=True)
class ServedCall:
    """One answered call: which recorded reply it got and what it was sent."""

    #: Position of the reply among the recording's assistant messages.
    reply_index: int
    #: The request's messages, as sent (the list object the provider received).
    messages: list[dict[str, Any]]
    prompt_tokens: int
    completion_tokens: int
    #: The prompt in the unit of the config's own estimator, when the replay asked for it.
    decision_tokens: int | None = None


class RunningBill:
    """Prompt tokens of successive requests; a tiktoken count of a request that extends the previous one (the
    history only grew) adds just the new messages, and the rough estimate keeps such a running sum itself."""

    def __init__(self, counter: TokenCounter):
        self.counter = counter
        self._last: tuple[list[dict[str, Any]], int] = ([], 0)

    def tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        if type(self.counter) is not TokenCounter:
            return billed_prompt_tokens(self.counter, messages, tools)
        last, total = self._last
        count = len(last)
        if not count or len(messages) < count or messages[count - 1] is not last[-1] or messages[:count] != last:
            count, total = 0, 0
        total += sum(self.counter.count_message(m) for m in messages[count:])
        self._last = (list(messages), total)
        return total + REPLY_PRIMING + self.counter.count_tools(tools)


class ReplayProvider:
    """Answers calls in order with the recorded assistant messages (see the module docstring).

    ``position`` is the index of the next reply and ``end`` the index where
    the replies on offer stop (the recording's end unless a driver that knows
    the recording's turns narrows it). ``served`` lists every answered call,
    ``refusals`` lists every prompt turned away as too long (``refused`` counts
    them) and ``unanswered`` counts the calls asked for at or past ``end``.
    """

    name = "replay"

    def __init__(self, messages: Sequence[dict[str, Any]], *, counter: str | TokenCounter = "tiktoken",
                 context_length: int | None = None, model: str = "replay",
                 decision_counter: TokenCounter | None = None):
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise TypeError(f"messages must be a list of chat messages, got {type(messages).__name__}")
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                raise TypeError(f"message {index} must be an object, got {type(message).__name__}")
        if context_length is not None and (isinstance(context_length, bool) or not isinstance(context_length, int)
                                           or context_length <= 0):
            raise ValueError(f"context_length must be a positive integer or None, got {context_length!r}")
        self.counter = make_counter(counter) if isinstance(counter, str) else counter
        if not isinstance(self.counter, TokenCounter):
            raise TypeError(f"counter must be a name ({', '.join(COUNTERS)}) or a TokenCounter, "
                            f"got {type(counter).__name__}")
        self.replies = [_reply(message) for message in messages if message.get("role") == "assistant"]
        self.context_length = context_length
        self.model = model
        self.position = 0
        self.end = len(self.replies)
        self.served: list[ServedCall] = []
        self._bill = RunningBill(self.counter)
        #: Also measures each answered prompt in this unit (a config's own estimator), when given.
        self._decisions = RunningBill(decision_counter) if decision_counter is not None else None
        self.refusals: list[Refusal] = []
        self.unanswered = 0

    @property
    def decision_unit(self) -> str | None:
        """The unit of ``ServedCall.decision_tokens`` (None when they are not measured)."""
        return self._decisions.counter.encoding if self._decisions is not None else None

    @property
    def refused(self) -> int:
        return len(self.refusals)

    def complete(self, request: ChatRequest) -> ChatResponse:
        if self.position >= self.end:
            self.unanswered += 1
            if self.end >= len(self.replies):
                raise ReplayExhausted(f"reply {self.position + 1} was asked for, but the recording holds only "
                                      f"{len(self.replies)} assistant messages")
            raise ReplayExhausted(f"the recording has no reply here: the next recorded assistant message "
                                  f"({self.end + 1} of {len(self.replies)}) comes after another message")
        prompt = self.prompt_tokens(request.messages, request.tools)
        if self.context_length is not None and prompt > self.context_length:
            self.refusals.append(Refusal(len(self.served), self.position, request.messages, prompt))
            raise context_overflow(self.context_length, prompt)
        index = self.position
        message = self.replies[index]
        self.position += 1
        completion = completion_tokens(message, self.counter)
        decided = None
        if self._decisions is not None:  # the same unit as the bill needs no second count
            same = self._decisions.counter.encoding == self.counter.encoding
            decided = prompt if same else self._decisions.tokens(request.messages, request.tools)
        self.served.append(ServedCall(index, request.messages, prompt, completion, decided))
        return ChatResponse(message=dict(message), finish_reason="tool_calls" if message.get("tool_calls") else "stop",
                            usage=Usage(prompt_tokens=prompt, completion_tokens=completion),
                            model=request.model or self.model)

    def prompt_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        """A request's size as this provider bills it."""
        return self._bill.tokens(messages, tools)

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        response = self.complete(request)
        text = response.message.get("content")
        if text:
            yield StreamDelta(text=text)
        yield response


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a recorded assistant message a model produces: its text and its tool calls."""
    reply: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    calls = message.get("tool_calls")
    if calls:
        reply["tool_calls"] = calls
    return reply
