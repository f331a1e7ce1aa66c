"""Fault injection for the local server: chosen calls fail the way real providers fail.

A ``FaultSchedule`` picks, for each chat request the server receives (numbered
from 0), at most one fault: by exact call index, or by rate with a seed (the
draw for a call depends only on the seed and its index, so a run is
reproducible whatever the timing). ``FaultEndpoint`` answers the chosen calls
with the fault and every other call honestly, over real HTTP, so the client
and the recovery chain see exactly what a failing provider would send.

The output-cap faults refuse only requests that ask for more output than
their ``available`` budget (the whole request when it names no cap), so a
client that lowers ``max_tokens`` below the budget gets the honest answer. The
message-only faults carry no status and no error type a client could map: only
their words say what went wrong, as with custom providers and gateways.

Faults that spoil an answer (empty, thinking-only, cut by the output limit)
keep the honest answer back. When the next request repeats the spoiled one,
or continues it with an assistant message and then only assistant and user
messages (a nudge, a thinking prefill, the partial text and a continuation
notice), the endpoint
replies with what it withheld, or with the rest of it after the text the
client already has, as a model asked to go on would. Any other request drops
what was withheld. This memory assumes one conversation at a time per server.

Schedules load from YAML or JSON (``hermeslab serve --faults FILE``)::

    seed: 7
    faults:
      - {kind: rate_limit, at: [0, 3], retry_after: 2}
      - {kind: server_error, rate: 0.1}
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from ..core.messages import text_of, tool_calls_of
from ..core.tokens import count_text, default_counter
from ..core.provider import ChatRequest, ChatResponse, Provider, ProviderError, StreamDelta, Usage
from .offline import word_pieces
from .server import (
    SSE_HEADERS,
    CompletionEndpoint,
    LocalServer,
    Reply,
    chat_request_from,
    completion_body,
    error_reply,
    provider_error_reply,
    stream_chunks,
)

log = logging.getLogger(__name__)

#: Every fault the endpoint can inject, with what the client receives.
FAULT_KINDS: dict[str, str] = {
    "overflow_openai": "400 context_length_exceeded in OpenAI's wording",
    "overflow_anthropic": "400 'prompt is too long: N tokens > M maximum' (Anthropic)",
    "overflow_vllm": "400 'maximum context length is N tokens' (vLLM's bare error object)",
    "overflow_llamacpp": "400 exceed_context_size_error with n_ctx (llama.cpp server)",
    "payload_too_large": "413 request_too_large",
    "rate_limit": "429 with Retry-After",
    "rate_limit_bare": "429 without Retry-After",
    "server_error": "500",
    "bad_gateway": "502",
    "unavailable": "503",
    "overloaded": "529 overloaded_error (Anthropic)",
    "auth": "401 invalid_api_key",
    "billing": "403 spending limit reached",
    "model_not_found": "404 model_not_found",
    "output_cap_anthropic": "400 'max_tokens: R > context_window: W - input_tokens: P = available_tokens: A' (Anthropic)",
    "output_cap_openai": "400 'max_tokens is too large: R. This model supports at most A completion tokens' (OpenAI)",
    "output_cap_openrouter": "400 'maximum context length is W tokens ... (P of text input, 0 of tool input, "
                             "R in the output)' (OpenRouter)",
    "output_cap_vllm": "400 ''max_tokens' or 'max_completion_tokens' is too large: R ... (R > W - P)' (vLLM)",
    "disconnect_message": "no status: an error event (or a 200 error body) saying only that the server disconnected",
    "tls_alert_message": "no status: an error event (or a 200 error body) quoting an SSL bad-record-mac alert",
    "connect_error_message": "no status: an error event (or a 200 error body) saying the upstream could not be reached",
    "slow": "the reply arrives after `delay` seconds (set it above the client's timeout)",
    "connection_reset": "the connection is reset before any response",
    "stream_cut": "a stream broken off half-way (no finish, no usage); a plain request is reset",
    "empty": "200 with empty content and no tool calls",
    "reasoning_only": "200 whose content is a <think> block and nothing else",
    "length": "finish_reason 'length' with half the text (or half a tool call's arguments)",
    "bad_tool_json": "tool-call arguments that are not valid JSON",
    "surrogates": "content ending in a lone UTF-16 surrogate",
}

_HTTP_ERRORS = frozenset({
    "overflow_openai", "overflow_anthropic", "overflow_vllm", "overflow_llamacpp", "payload_too_large", "rate_limit",
    "rate_limit_bare", "server_error", "bad_gateway", "unavailable", "overloaded", "auth", "billing",
    "model_not_found", "output_cap_anthropic", "output_cap_openai", "output_cap_openrouter", "output_cap_vllm",
})
#: Faults that refuse only a request asking for more output than their ``available`` budget.
_OUTPUT_CAPS = frozenset(kind for kind in FAULT_KINDS if kind.startswith("output_cap_"))
#: Faults reported by their words alone.
_MESSAGE_ONLY = {
    "disconnect_message": "Server disconnected without sending a response.",
    "tls_alert_message": "[SSL: BAD_RECORD_MAC] sslv3 alert bad record mac (_ssl.c:2580)",
    "connect_error_message": "upstream connect error or disconnect/reset before headers. reset reason: "
                             "connection failure",
}
#: The output a request that names no ``max_tokens`` is taken to ask for.
DEFAULT_OUTPUT_CAP = 8_192
#: Faults whose honest answer is kept back for a request that asks the model to go on.
_WITHHOLDING = frozenset({"empty", "reasoning_only", "length"})
#: Rule options, and the only kinds that may set them.
_OPTIONS = {"retry_after": ("rate_limit",), "window": tuple(k for k in FAULT_KINDS if k.startswith("overflow_")),
            "delay": ("slow",), "available": tuple(sorted(_OUTPUT_CAPS))}

THOUGHT = "<think>\nThe request is clear. I will work out the answer step by step before replying.\n</think>"
#: Appended by the ``surrogates`` fault: the first half of an emoji whose second half never came.
LONE_SURROGATE = "\ud83d"


# ---------------------------------------------------------------- the schedule


@dataclass(frozen=True)
class FaultRule:
    kind: str
    #: Call indices that always get this fault.
    at: frozenset[int] = frozenset()
    #: Share of the other calls that get it.
    rate: float = 0.0
    #: ``rate_limit``: the Retry-After header, in seconds.
    retry_after: float = 1.0
    #: ``overflow_*``: the context window the error states.
    window: int = 8_192
    #: ``slow``: seconds before the reply is sent.
    delay: float = 1.0
    #: ``output_cap_*``: the output tokens the error says would fit beside the prompt.
    available: int = 1_024

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {', '.join(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault {self.kind}: rate must be between 0 and 1, got {self.rate}")
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in self.at):
            raise ValueError(f"fault {self.kind}: 'at' must list call indices (integers from 0), got {sorted(self.at)}")
        if not self.at and self.rate == 0.0:
            raise ValueError(f"fault {self.kind}: give call indices ('at') or a rate above 0")
        if self.retry_after < 0 or self.delay < 0 or self.window < 1 or self.available < 1:
            raise ValueError(f"fault {self.kind}: retry_after and delay must be >= 0, window and available >= 1")


@dataclass(frozen=True)
class FaultSchedule:
    rules: tuple[FaultRule, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        total = sum(rule.rate for rule in self.rules)
        if total > 1.0 + 1e-9:
            raise ValueError(f"the fault rates add up to {total:.3f}; at most one fault per call means at most 1")

    @classmethod
    def single(cls, kind: str, *, at: tuple[int, ...] = (), rate: float = 0.0, seed: int = 0,
               **options: Any) -> "FaultSchedule":
        """One kind of fault: ``FaultSchedule.single("rate_limit", at=(0,), retry_after=2)``."""
        return cls.from_dict({"seed": seed, "faults": [{"kind": kind, "at": list(at), "rate": rate, **options}]})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FaultSchedule":
        if not isinstance(data, Mapping):
            raise ValueError(f"a fault schedule is a mapping with 'faults' (and 'seed'), got {type(data).__name__}")
        unknown = sorted(set(data) - {"seed", "faults"})
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} in the fault schedule (expected 'seed' and 'faults')")
        seed = data.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"'seed' must be an integer, got {seed!r}")
        faults = data.get("faults") or []
        if not isinstance(faults, list):
            raise ValueError("'faults' must be a list of {kind, at | rate, ...} entries")
        return cls(rules=tuple(_rule_from(entry, index) for index, entry in enumerate(faults)), seed=seed)

    @classmethod
    def from_file(cls, path: str | Path) -> "FaultSchedule":
        """A schedule from a YAML or JSON file; errors name the file."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"{path}: cannot read the fault schedule: {exc}") from None
        try:
            return cls.from_dict(data if data is not None else {})
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def fault_for(self, call_index: int) -> FaultRule | None:
        """The fault for one call: an exact index first, else one seeded draw against the rates."""
        for rule in self.rules:
            if call_index in rule.at:
                return rule
        rated = [rule for rule in self.rules if rule.rate > 0]
        if not rated:
            return None
        draw = random.Random(f"{self.seed}:{call_index}").random()
        for rule in rated:
            if draw < rule.rate:
                return rule
            draw -= rule.rate
        return None


def _rule_from(entry: Any, index: int) -> FaultRule:
    if not isinstance(entry, Mapping) or "kind" not in entry:
        raise ValueError(f"faults[{index}]: expected a mapping with a 'kind', got {entry!r}")
    kind = entry["kind"]
    allowed = {"kind", "at", "rate"} | {name for name, kinds in _OPTIONS.items() if kind in kinds}
    extra = sorted(set(entry) - allowed)
    if extra:
        raise ValueError(f"faults[{index}] ({kind}): option {extra[0]!r} does not apply to this kind")
    at = entry.get("at") or []
    if not isinstance(at, (list, tuple)):
        raise ValueError(f"faults[{index}] ({kind}): 'at' must be a list of call indices, got {at!r}")
    options = {name: entry[name] for name in _OPTIONS if name in entry}
    try:
        return FaultRule(kind=kind, at=frozenset(at), rate=float(entry.get("rate") or 0.0), **options)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"faults[{index}]: {exc}") from None


# ---------------------------------------------------------------- the endpoint


@dataclass(frozen=True)
class Injection:
    call_index: int
    kind: str
    #: False when the reply had nothing the fault could spoil (no tool call to break, no text to cut).
    applied: bool


@dataclass
class _Withheld:
    messages: list[dict[str, Any]]
    response: ChatResponse


@dataclass
class _Call:
    """One request as the endpoint sees it."""

    index: int
    payload: Mapping[str, Any]
    request: ChatRequest
    completion_id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def streamed(self) -> bool:
        return bool(self.payload.get("stream"))

    @property
    def prompt_tokens(self) -> int:
        return default_counter.count_request(self.request.messages, self.request.tools)


class FaultEndpoint(CompletionEndpoint):
    """Answers the calls the schedule picks with their fault, and all others honestly."""

    def __init__(self, provider: Provider, schedule: FaultSchedule):
        super().__init__(provider)
        self.schedule = schedule
        #: Every fault injected so far, in call order.
        self.injected: list[Injection] = []
        self._withheld: _Withheld | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def close(self) -> None:
        """Release replies that are still being held back by a ``slow`` fault."""
        self._closing.set()

    def respond(self, call_index: int, payload: Mapping[str, Any]) -> Reply:
        rule = self.schedule.fault_for(call_index)
        if rule is None and self._withheld is None:
            return super().respond(call_index, payload)
        try:
            call = _Call(call_index, payload, chat_request_from(payload))
        except ValueError as exc:
            return error_reply(400, str(exc))
        call.request.model = call.request.model or getattr(self.provider, "model", None) or self.provider.name
        if rule is not None and rule.kind in _OUTPUT_CAPS and _requested_output(call) <= rule.available:
            self._record(call_index, rule.kind, False)
            rule = None
        if rule is not None and rule.kind in _MESSAGE_ONLY:
            self._record(call_index, rule.kind, True)
            return _message_only(_MESSAGE_ONLY[rule.kind], call)
        if rule is not None and rule.kind in _HTTP_ERRORS:
            self._record(call_index, rule.kind, True)
            return _ERROR_REPLIES[rule.kind](rule, call)
        if rule is not None and rule.kind == "connection_reset":
            self._record(call_index, rule.kind, True)
            return Reply(drop=True)
        try:
            honest = self._honest(call)
        except ProviderError as exc:
            if rule is not None:
                self._record(call_index, rule.kind, False)
            return provider_error_reply(exc)
        except Exception as exc:  # a hosted provider's bug must become a 500, not a dead connection
            log.exception("hosted provider %s failed on call %d", self.provider.name, call_index)
            return error_reply(500, f"the hosted provider failed: {type(exc).__name__}: {exc}")
        if rule is None:
            return self._reply(call, honest)
        return self._inject(rule, call, honest)

    # ------------------------------------------------------------ honest answers

    def _honest(self, call: _Call) -> ChatResponse:
        """The answer withheld from the request this one continues, else the provider's."""
        with self._lock:
            withheld, self._withheld = self._withheld, None
        recalled = _continuation(withheld, call.request.messages) if withheld is not None else None
        if recalled is not None:
            return dataclasses.replace(recalled, usage=_usage(call, recalled.message))
        return self.provider.complete(call.request)

    def _inject(self, rule: FaultRule, call: _Call, honest: ChatResponse) -> Reply:
        if rule.kind == "slow":
            self._record(call.index, rule.kind, True)
            reply = self._reply(call, honest)
            self._closing.wait(rule.delay)
            return reply
        if rule.kind == "stream_cut":
            self._record(call.index, rule.kind, True)
            return self._reply(call, honest, cut=True)
        spoiled = _SPOILERS[rule.kind](honest)
        self._record(call.index, rule.kind, spoiled is not None)
        if spoiled is None:
            return self._reply(call, honest)
        if rule.kind in _WITHHOLDING:
            with self._lock:
                self._withheld = _Withheld(list(call.request.messages), honest)
        return self._reply(call, dataclasses.replace(spoiled, usage=_usage(call, spoiled.message)))

    def _record(self, call_index: int, kind: str, applied: bool) -> None:
        with self._lock:
            self.injected.append(Injection(call_index, kind, applied))

    # ------------------------------------------------------------ replies

    def _reply(self, call: _Call, response: ChatResponse, *, cut: bool = False) -> Reply:
        model = call.request.model
        if not call.streamed:
            if cut:
                return Reply(drop=True)
            return Reply(body=completion_body(response, model, call.completion_id, call.created))
        include_usage = bool((call.payload.get("stream_options") or {}).get("include_usage"))
        items: list[StreamDelta | ChatResponse] = [StreamDelta(text=p) for p in word_pieces(text_of(response.message))]
        chunks = list(stream_chunks(iter([*items, response]), model, call.completion_id, call.created, include_usage))
        stream = _cut_off(chunks, max(2, len(chunks) // 2)) if cut else iter(chunks)
        return Reply(chunks=stream, headers=dict(SSE_HEADERS))


def _message_only(message: str, call: _Call) -> Reply:
    """An error with words and nothing else: the first event of a stream, or the body of a plain 200."""
    error = {"error": {"message": message}}
    if call.streamed:
        return Reply(chunks=iter([error]), headers=dict(SSE_HEADERS))
    return Reply(body=error)


def _cut_off(chunks: list[dict[str, Any]], keep: int) -> Iterator[dict[str, Any]]:
    yield from chunks[:keep]
    raise RuntimeError(f"the fault schedule cut this stream after {keep} of {len(chunks)} chunks")


def _continuation(withheld: _Withheld, messages: list[dict[str, Any]]) -> ChatResponse | None:
    """What a model asked to go on would say: the withheld answer, or its rest after the text already given."""
    known = len(withheld.messages)
    added = messages[known:]
    if messages[:known] != withheld.messages:
        return None
    if added and added[0].get("role") != "assistant":
        return None  # a new request from the user, not an answer being continued
    if any(m.get("role") not in ("assistant", "user") or m.get("tool_calls") for m in added):
        return None
    full = text_of(withheld.response.message)
    given = next((text_of(m) for m in added if m.get("role") == "assistant"), "")
    if given and given == full:
        return None
    if given and full.startswith(given):
        return dataclasses.replace(withheld.response, message={"role": "assistant", "content": full[len(given):]})
    return withheld.response


def _usage(call: _Call, message: dict[str, Any]) -> Usage:
    completion = count_text(text_of(message)) + sum(
        count_text(c["function"].get("arguments") or "") for c in tool_calls_of(message))
    return Usage(prompt_tokens=call.prompt_tokens, completion_tokens=completion)


# ---------------------------------------------------------------- spoiled answers


def _empty(honest: ChatResponse) -> ChatResponse:
    return ChatResponse(message={"role": "assistant", "content": ""}, finish_reason="stop", model=honest.model)


def _reasoning_only(honest: ChatResponse) -> ChatResponse:
    return ChatResponse(message={"role": "assistant", "content": THOUGHT}, finish_reason="stop", model=honest.model)


def _length(honest: ChatResponse) -> ChatResponse | None:
    calls = tool_calls_of(honest.message)
    if calls:
        last = calls[-1]["function"]
        cut = {**calls[-1], "function": {**last, "arguments": last["arguments"][: len(last["arguments"]) // 2]}}
        message = {"role": "assistant", "content": honest.message.get("content"), "tool_calls": [*calls[:-1], cut]}
        return ChatResponse(message=message, finish_reason="length", model=honest.model)
    text = text_of(honest.message)
    pieces = word_pieces(text)
    head = "".join(pieces[: len(pieces) // 2]) if len(pieces) > 1 else text[: len(text) // 2]
    if not head:
        return None
    return ChatResponse(message={"role": "assistant", "content": head}, finish_reason="length", model=honest.model)


def _bad_tool_json(honest: ChatResponse) -> ChatResponse | None:
    calls = tool_calls_of(honest.message)
    if not calls:
        return None
    last = calls[-1]["function"]
    broken = {**calls[-1], "function": {**last, "arguments": (last["arguments"] or "{}")[:-1]}}
    return dataclasses.replace(honest, message={**honest.message, "tool_calls": [*calls[:-1], broken]})


def _surrogates(honest: ChatResponse) -> ChatResponse | None:
    text = text_of(honest.message)
    if not text:
        return None
    return dataclasses.replace(honest, message={**honest.message, "content": text + LONE_SURROGATE})


_SPOILERS = {"empty": _empty, "reasoning_only": _reasoning_only, "length": _length, "bad_tool_json": _bad_tool_json,
             "surrogates": _surrogates}


# ---------------------------------------------------------------- provider errors, in their own words


def _openai_error(status: int, message: str, kind: str, code: str | None, param: str | None = None,
                  headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": kind, "param": param, "code": code}},
                 headers=dict(headers or {}))


def _anthropic_error(status: int, kind: str, message: str) -> Reply:
    return Reply(status=status, body={"type": "error", "error": {"type": kind, "message": message}})


def _claimed_tokens(rule: FaultRule, call: _Call) -> int:
    """The prompt size the overflow error reports: the real one, or just over the stated window."""
    return max(call.prompt_tokens, rule.window + 1)


def _overflow_openai(rule: FaultRule, call: _Call) -> Reply:
    return _openai_error(
        400, f"This model's maximum context length is {rule.window} tokens. However, your messages resulted in "
             f"{_claimed_tokens(rule, call)} tokens. Please reduce the length of the messages.",
        "invalid_request_error", "context_length_exceeded", "messages")


def _overflow_anthropic(rule: FaultRule, call: _Call) -> Reply:
    return _anthropic_error(400, "invalid_request_error",
                            f"prompt is too long: {_claimed_tokens(rule, call)} tokens > {rule.window} maximum")


def _overflow_vllm(rule: FaultRule, call: _Call) -> Reply:
    prompt, completion = _claimed_tokens(rule, call), call.request.max_tokens or 1_024
    return Reply(status=400, body={
        "object": "error", "type": "BadRequestError", "param": None, "code": 400,
        "message": f"This model's maximum context length is {rule.window} tokens. However, you requested "
                   f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                   "Please reduce the length of the messages or completion."})


def _overflow_llamacpp(rule: FaultRule, call: _Call) -> Reply:
    return Reply(status=400, body={"error": {
        "code": 400, "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": _claimed_tokens(rule, call), "n_ctx": rule.window}})


def _requested_output(call: _Call) -> int:
    return call.request.max_tokens or DEFAULT_OUTPUT_CAP


def _output_cap_anthropic(rule: FaultRule, call: _Call) -> Reply:
    prompt = call.prompt_tokens
    return _anthropic_error(400, "invalid_request_error",
                            f"max_tokens: {_requested_output(call)} > context_window: {prompt + rule.available} - "
                            f"input_tokens: {prompt} = available_tokens: {rule.available}")


def _output_cap_openai(rule: FaultRule, call: _Call) -> Reply:
    requested = _requested_output(call)
    return _openai_error(400, f"max_tokens is too large: {requested}. This model supports at most {rule.available} "
                              f"completion tokens, whereas you provided {requested}.",
                         "invalid_request_error", "invalid_value", "max_tokens")


def _output_cap_openrouter(rule: FaultRule, call: _Call) -> Reply:
    prompt, requested = call.prompt_tokens, _requested_output(call)
    return Reply(status=400, body={"error": {"code": 400, "message": (
        f"This endpoint's maximum context length is {prompt + rule.available} tokens. However, you requested about "
        f"{prompt + requested} tokens ({prompt} of text input, 0 of tool input, {requested} in the output). Please "
        "reduce the length of either one.")}})


def _output_cap_vllm(rule: FaultRule, call: _Call) -> Reply:
    prompt, requested = call.prompt_tokens, _requested_output(call)
    window = prompt + rule.available
    return Reply(status=400, body={"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                                   "message": f"'max_tokens' or 'max_completion_tokens' is too large: {requested}. "
                                              f"This model's maximum context length is {window} tokens and your "
                                              f"request has {prompt} input tokens ({requested} > {window} - {prompt})."})


def _rate_limit(rule: FaultRule, call: _Call) -> Reply:
    wait = f"{rule.retry_after:g}"
    return _openai_error(
        429, f"Rate limit reached for {call.request.model} in organization org-hermeslab on tokens per min (TPM): "
             f"Limit 30000, Used 29500, Requested {call.prompt_tokens}. Please try again in {wait}s.",
        "tokens", "rate_limit_exceeded",
        headers={"Retry-After": wait, "retry-after-ms": str(round(rule.retry_after * 1000))})


_ERROR_REPLIES = {
    "overflow_openai": _overflow_openai,
    "overflow_anthropic": _overflow_anthropic,
    "overflow_vllm": _overflow_vllm,
    "overflow_llamacpp": _overflow_llamacpp,
    "payload_too_large": lambda rule, call: _anthropic_error(
        413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    "rate_limit": _rate_limit,
    "rate_limit_bare": lambda rule, call: _anthropic_error(
        429, "rate_limit_error", "This request would exceed your organization's rate limit of 50,000 input tokens "
                                 "per minute. Please reduce the prompt length or the maximum tokens requested."),
    "server_error": lambda rule, call: _openai_error(
        500, "The server had an error while processing your request. Sorry about that!", "server_error", None),
    "bad_gateway": lambda rule, call: _openai_error(502, "Bad gateway: the upstream model server did not answer.",
                                                    "upstream_error", None),
    "unavailable": lambda rule, call: _openai_error(503, "Service Unavailable", "service_unavailable", None),
    "overloaded": lambda rule, call: _anthropic_error(529, "overloaded_error", "Overloaded"),
    "auth": lambda rule, call: _openai_error(
        401, "Incorrect API key provided: sk-hl-****1234. You can find your API key in your account settings.",
        "invalid_request_error", "invalid_api_key"),
    "billing": lambda rule, call: _openai_error(
        403, "This key has reached its spending limit. Add credits or raise the limit in your billing settings.",
        "billing_error", "spending_limit_reached"),
    "model_not_found": lambda rule, call: _openai_error(
        404, f"The model `{call.request.model}` does not exist or you do not have access to it.",
        "invalid_request_error", "model_not_found"),
    "output_cap_anthropic": _output_cap_anthropic,
    "output_cap_openai": _output_cap_openai,
    "output_cap_openrouter": _output_cap_openrouter,
    "output_cap_vllm": _output_cap_vllm,
}


def serve_with_faults(provider: Provider, schedule: FaultSchedule, **server_options: Any) -> LocalServer:
    """A started LocalServer hosting ``provider`` behind a FaultEndpoint (``server.endpoint``)."""
    server = LocalServer(provider, **server_options)
    server.endpoint = FaultEndpoint(server.provider, schedule)
    server.start()
    return server


__all__ = ["FAULT_KINDS", "FaultEndpoint", "FaultRule", "FaultSchedule", "Injection", "serve_with_faults"]
