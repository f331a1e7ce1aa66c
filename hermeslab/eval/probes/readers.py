"""Answerers: who is asked a probe, given the messages of an arm, the tool schemas sent with them, a question.

An answerer has a ``name`` (what its answers are cached and reported under),
a ``window`` (the prompt tokens it takes, None: no limit) and
``answer(messages, tools, question) -> str``. Two optional attributes change
how the runner treats it: ``reads_gold`` (it is also given the probe, and its
answers are cached per gold) and ``cheap`` (its answers cost nothing to redo,
so the cache may write them in batches rather than one by one).

* ``PerfectReader`` — gives the gold exactly when the context it receives
  holds it (for a set, the members it holds), ``unknown`` otherwise: with it
  the ceiling is 1.0 and the floor 0.0, or the bank or the matcher is wrong;
* ``SilentReader`` — always ``unknown``: every arm scores 0;
* ``EndpointAnswerer`` — any OpenAI-compatible endpoint through the
  project's client, the question appended last to the arm's messages so
  that probes sharing a context share a prompt prefix, which a server's
  prompt cache then serves. Each call's prompt tokens, and the tokens the
  server took from its cache where it says (llama-server's ``timings``, an
  OpenAI-style ``prompt_tokens_details.cached_tokens``), are kept in
  ``last_call``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import openai

from hermeslab.context.extractive import strip_think
from hermeslab.core.cache import bounded_put
from hermeslab.core.provider import ChatRequest, ChatResponse
from hermeslab.providers.openai_compat import OpenAICompatProvider, provider_error_from, response_from_completion

from ..metrics import message_text
from .bank import Probe
from .calls import OnCall, reported_complete
from .text import UNKNOWN, normal, normal_answer

#: What the endpoint is told with every question; it comes after the context, so the context stays a shared prefix.
ANSWER_INSTRUCTION = (
    "Answer the question below from the conversation above and nothing else. Reply with the answer only, "
    f"exactly as the conversation states it, in as few words as possible. If the conversation does not say, "
    f"reply with exactly: {UNKNOWN}"
)


class Answerer(Protocol):
    name: str
    window: int | None

    def answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, question: str) -> str: ...


#: Normal texts of messages by identity, with the message kept so its id is not reused (bounded).
_NORMAL: dict[int, tuple[dict[str, Any], str]] = {}
_NORMAL_MAX = 200_000


def _normal_text(message: dict[str, Any]) -> str:
    entry = _NORMAL.get(id(message))
    if entry is not None and entry[0] is message:
        return entry[1]
    text = normal(message_text(message))
    bounded_put(_NORMAL, id(message), (message, text), _NORMAL_MAX)
    return text


class PerfectReader:
    """The gold when the context holds it, else ``unknown`` (see the module docstring)."""

    reads_gold = True
    cheap = True

    def __init__(self, window: int | None = None):
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be a positive number of tokens or None, got {window!r}")
        self.window = window
        self.name = "perfect-reader-1"
        self._context: tuple[Any, int, str] = (None, 0, "")

    def answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, question: str, *,
               probe: Probe) -> str:
        text = self._text(messages)
        held = [gold for gold in probe.golds if normal_answer(gold) in text]
        if isinstance(probe.gold, tuple):
            return "\n".join(held) if held else UNKNOWN
        return probe.gold if held else UNKNOWN

    def _text(self, messages: list[dict[str, Any]]) -> str:
        """The context's normal text; probes asked of one context one after another read it once."""
        last, count, text = self._context
        if last is not messages or count != len(messages):
            text = "\n".join([_normal_text(m) for m in messages])
            self._context = (messages, len(messages), text)
        return text


class SilentReader:
    """Always ``unknown``."""

    cheap = True
    name = "silent-reader-1"

    def __init__(self, window: int | None = None):
        self.window = window

    def answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, question: str) -> str:
        return UNKNOWN


@dataclass(frozen=True)
class CallUsage:
    """What one endpoint call cost: prompt tokens as the server counted them, and those it served from its
    cache (NaN when it does not say)."""

    prompt_tokens: float = math.nan
    server_cached_tokens: float = math.nan


class _TimedClient(OpenAICompatProvider):
    """The project's OpenAI-compatible client, also keeping the raw body of the last completion."""

    last_body: Mapping[str, Any] = {}

    def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            completion = self._client.chat.completions.create(**self._arguments(request))
        except openai.OpenAIError as exc:
            raise provider_error_from(exc, self.base_url) from exc
        self.last_body = completion.model_dump() if hasattr(completion, "model_dump") else dict(completion)
        return self._counted(request, response_from_completion(completion))


def call_usage(body: Mapping[str, Any]) -> CallUsage:
    """Prompt and cached tokens from a completion body: llama-server's ``timings`` first, then ``usage``."""
    usage = body.get("usage") or {}
    prompt = usage.get("prompt_tokens")
    timings = body.get("timings") or {}
    cached: Any = timings.get("cache_n")
    if cached is None:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if prompt is None and timings.get("prompt_n") is not None and timings.get("cache_n") is not None:
        prompt = timings["prompt_n"] + timings["cache_n"]
    return CallUsage(float(prompt) if isinstance(prompt, (int, float)) else math.nan,
                     float(cached) if isinstance(cached, (int, float)) else math.nan)


class EndpointAnswerer:
    """Probes asked of an OpenAI-compatible endpoint (see the module docstring).

    ``max_tokens`` caps each answer (a few words are asked for); tool schemas
    are sent as the arm had them, with ``tool_choice`` ``none`` so the reply is
    text. The name holds the model, the instruction's digest and the cap, not
    the address: the same model behind another port answers the same.
    """

    def __init__(self, base_url: str | None, model: str, api_key: str | None = None, *, window: int | None = None,
                 max_tokens: int = 64, timeout: float = 120.0):
        if not isinstance(model, str) or not model.strip():
            raise ValueError("EndpointAnswerer needs a model name")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        self.model, self.window, self.max_tokens = model, window, max_tokens
        self.client = _TimedClient(base_url, api_key, model, timeout=timeout)
        digest = hashlib.sha256(ANSWER_INSTRUCTION.encode()).hexdigest()[:8]
        self.name = f"endpoint:{model}:{digest}:max{max_tokens}"
        self.last_call = CallUsage()
        #: Told the fields of every call, answered or failed (the exam logs them in its lab); None: not told.
        self.on_call: OnCall | None = None

    def answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, question: str) -> str:
        asked = [*messages, {"role": "user", "content": f"{ANSWER_INSTRUCTION}\n\nQUESTION: {question}"}]
        request = ChatRequest(messages=asked, model=self.model, tools=list(tools) if tools else None,
                              max_tokens=self.max_tokens, temperature=0.0,
                              extra={"tool_choice": "none"} if tools else {})
        self.last_call = CallUsage()
        response = reported_complete(self.client.complete, request, self.on_call)
        self.last_call = call_usage(self.client.last_body)
        return strip_think(response.message.get("content") or "").strip()

    def close(self) -> None:
        self.client.close()

