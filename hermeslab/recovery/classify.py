"""From a failed model call to a fault class: status, body text and exception type.

Providers report the same failure in many shapes: OpenAI, Anthropic, vLLM,
llama.cpp and gateways differ in status codes, JSON layout and wording. The
classifier reads them all through one ordered table of rules (first match
wins), so adding a provider's wording is one line, and each fault class says
in one row what may cure it: a retry, a compression, a new credential, another
provider, or a one-off repair of the request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..core.provider import ProviderError


@dataclass(frozen=True)
class FaultClass:
    name: str
    #: Sending the same request again (after a pause) may succeed.
    retryable: bool
    #: A shorter prompt cures it.
    compress: bool = False
    #: A fresh or different credential may cure it.
    rotate_credential: bool = False
    #: Another provider may answer where this one cannot.
    fall_back: bool = False
    #: Prefer a configured fallback after ``recovery.fallback_after`` failures rather than retrying to the end.
    eager_fallback: bool = False
    #: A change to the outgoing request that may cure it, tried once per call.
    repair: str | None = None
    #: What a person should do when recovery gives up.
    advice: str = ""


_CLASSES = (
    FaultClass("auth", retryable=False, rotate_credential=True, fall_back=True,
               advice="the provider rejected the credentials; check model.api_key"),
    FaultClass("billing", retryable=False, rotate_credential=True, fall_back=True,
               advice="the account is out of credit or over its spending limit; add credit or raise the limit"),
    FaultClass("rate_limit", retryable=True, rotate_credential=True, fall_back=True, eager_fallback=True,
               advice="the provider kept rate-limiting the requests; wait or lower the request rate"),
    FaultClass("overloaded", retryable=True, fall_back=True, eager_fallback=True,
               advice="the provider stayed overloaded; try again later or configure recovery.fallback_providers"),
    FaultClass("server_error", retryable=True, fall_back=True,
               advice="the provider kept failing with server errors; try again later"),
    FaultClass("timeout", retryable=True, fall_back=True, eager_fallback=True,
               advice="the provider did not answer within model.timeout; raise it or try again later"),
    FaultClass("connection", retryable=True, fall_back=True, eager_fallback=True,
               advice="the connection to the provider kept breaking; check the endpoint and the network"),
    FaultClass("invalid_response", retryable=True, fall_back=True,
               advice="the provider kept sending responses without an answer"),
    FaultClass("context_overflow", retryable=True, compress=True,
               advice="the prompt does not fit the model's context window even after compression"),
    FaultClass("payload_too_large", retryable=True, compress=True,
               advice="the request is larger than the provider accepts even after compression"),
    FaultClass("model_not_found", retryable=False, fall_back=True,
               advice="the endpoint does not serve this model; check model.name or configure a fallback"),
    FaultClass("format_error", retryable=False, fall_back=True,
               advice="the provider rejected the request as malformed"),
    FaultClass("content_policy", retryable=False, fall_back=True,
               advice="the provider's content policy blocked the request; rephrase it"),
    FaultClass("thinking_signature", retryable=False, repair="drop_reasoning",
               advice="the provider rejected the replayed reasoning blocks"),
    FaultClass("multimodal_tool_content", retryable=False, repair="strip_images",
               advice="the provider does not accept images in tool results"),
    FaultClass("codec_error", retryable=False, repair="repair_encoding",
               advice="the conversation holds text that cannot be encoded as UTF-8"),
    FaultClass("unknown", retryable=True, fall_back=True,
               advice="the model call kept failing for an unrecognised reason"),
)

FAULT_CLASSES: dict[str, FaultClass] = {fault.name: fault for fault in _CLASSES}


@dataclass(frozen=True)
class SessionSize:
    """How big the conversation is, for the rules that read a vague failure as an overflow."""

    tokens: int
    messages: int
    window: int


@dataclass(frozen=True)
class Classification:
    fault: FaultClass
    status: int | None
    #: The provider's own words (or the exception's text).
    message: str
    #: Which rule matched, for the log.
    rule: str
    retry_after: float | None = None
    #: Everything the rules read (message, codes, body), where limits can be parsed from.
    text: str = ""
    #: Text a cut stream delivered before it broke.
    partial_text: str = ""

    @property
    def name(self) -> str:
        return self.fault.name

    def describe(self) -> str:
        status = f"HTTP {self.status}: " if self.status is not None else ""
        return f"{self.fault.advice} ({status}{self.message})"


# ---------------------------------------------------------------- the wordings


def _words(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


OVERFLOW = _words(
    r"context[_ ]length[_ ]exceeded", r"maximum context length", r"context (?:window|limit|size)",
    r"context length (?:is|of|exceeded)", r"prompt is too long", r"prompt too long", r"input is too long",
    r"max_model_len", r"maximum model length", r"exceeds? the available context", r"exceed_context_size",
    r"\bn_ctx\b", r"reduce the length of the (?:messages|input|prompt)", r"maximum number of tokens allowed",
    r"input token count", r"too large for model with \d+ maximum", r"exceeds the model'?s? (?:context|maximum)",
)
RATE_LIMIT = _words(
    r"rate[ _-]?limit", r"too many requests", r"tokens per (?:min|minute|day)", r"requests per (?:min|minute|day)",
    r"\b[tr]pm\b", r"resource[_ ]exhausted", r"throttl",
)
USAGE_RESETS = _words(r"try again", r"resets?\b", r"retry after", r"\bwindow\b")
BILLING = _words(
    r"billing", r"credit balance", r"insufficient[_ ](?:credits?|balance|funds|quota)", r"payment required",
    r"spending limit", r"key limit exceeded", r"exceeded your current quota", r"out of credits?",
    r"(?:add|purchase|buy) (?:more )?credits",
)
OVERLOADED = _words(r"overloaded", r"server is busy", r"over capacity", r"no capacity", r"loading model")
AUTH = _words(
    r"invalid[_ ]api[_ ]key", r"incorrect api key", r"invalid x-api-key", r"unauthori[sz]ed", r"authentication",
    r"invalid (?:bearer )?token", r"api key (?:is )?(?:missing|invalid|not valid|expired)", r"no api key",
)
MODEL_MISSING = _words(
    r"model[_ ]not[_ ]found", r"\bmodel\b[^.\n]{0,80}?(?:does not exist|not found|is not (?:available|supported))",
    r"no such model", r"unknown model", r"invalid model", r"not a valid model", r"\bmodel: [\w.:/-]+",
)
CONTENT_POLICY = _words(
    r"content[_ ]policy", r"content management policy", r"safety system", r"content[_ ]filter",
    r"flagged (?:as|by)", r"violat\w* (?:our |the )?(?:usage |content )?polic", r"responsible ai polic",
)
THINKING_SIGNATURE = _words(r"thinking\b.{0,80}(?:signature|cannot be modified|must remain)")
TOOL_IMAGES = _words(
    r"image[_ ]urls? (?:are|is) only allowed for messages with role", r"(?:tool|function) (?:messages?|results?|"
    r"content) (?:cannot|can ?not|must not|do not|does not) (?:contain|include|support) images?",
    r"images? (?:are|is) not supported in (?:tool|function)", r"unknown variant `image_url`",
)
UNSUPPORTED_PARAMETER = _words(
    r"unknown parameter", r"unsupported parameter", r"unrecognized request argument", r"extra inputs are not permitted",
    r"additional properties are not allowed",
)
TIMEOUT_WORDS = _words(r"timed? ?out", r"timeout", r"deadline exceeded")

TIMEOUT_TYPES = frozenset({
    "APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "timeout",
})
CONNECTION_TYPES = frozenset({
    "APIConnectionError", "ConnectionError", "ConnectionResetError", "ConnectionRefusedError",
    "ConnectionAbortedError", "BrokenPipeError", "RemoteProtocolError", "ReadError", "IncompleteRead",
    "ProtocolError", "stream_interrupted", "OSError",
})
CODEC_TYPES = frozenset({"UnicodeEncodeError", "UnicodeDecodeError"})


# ---------------------------------------------------------------- the rules


@dataclass(frozen=True)
class Failure:
    """A failure reduced to what the rules read."""

    status: int | None
    text: str
    error_type: str
    #: The body's own message, to tell a bare "Bad Request" from a worded one.
    body_message: str
    size: SessionSize | None


Predicate = Callable[[Failure], bool]


def _large(size: SessionSize | None, share: float, tokens: int, messages: int) -> bool:
    if size is None or size.window <= 0:
        return False
    return size.tokens > share * size.window or (
        size.window <= 256_000 and (size.tokens > tokens or size.messages > messages))


def _bare_and_large(failure: Failure) -> bool:
    """A 400 that says almost nothing, sent for a big prompt, is most often an unworded overflow."""
    return len(failure.body_message.strip()) < 30 and _large(failure.size, 0.4, 80_000, 80)


def _dropped_and_large(failure: Failure) -> bool:
    """Servers that cannot fit a huge prompt sometimes just hang up."""
    return _large(failure.size, 0.6, 120_000, 200)


@dataclass(frozen=True)
class Rule:
    fault: str
    label: str
    #: Statuses the rule applies to (``None`` in the set: no status); None: any.
    statuses: frozenset[int | None] | None = None
    words: re.Pattern[str] | None = None
    types: frozenset[str] | None = None
    when: Predicate | None = None

    def matches(self, failure: Failure) -> bool:
        if self.statuses is not None and failure.status not in self.statuses:
            return False
        if self.types is not None and failure.error_type not in self.types:
            return False
        if self.words is not None and not self.words.search(failure.text):
            return False
        return self.when is None or self.when(failure)


_CLIENT_ERRORS = frozenset(range(400, 500))
_SERVER_ERRORS = frozenset(range(500, 600))
_NO_STATUS: frozenset[int | None] = frozenset({None})


def _s(*codes: int | None) -> frozenset[int | None]:
    return frozenset(codes)


RULES: tuple[Rule, ...] = (
    # failures that happen before anything is sent
    Rule("codec_error", "text that UTF-8 cannot encode", types=CODEC_TYPES),
    # provider-specific wordings that win over the status
    Rule("content_policy", "content policy wording", words=CONTENT_POLICY),
    Rule("thinking_signature", "400 about replayed thinking blocks", _s(400), THINKING_SIGNATURE),
    Rule("multimodal_tool_content", "images refused in tool results", _s(400, 422), TOOL_IMAGES),
    # the status, refined by the wording
    Rule("auth", "401", _s(401)),
    Rule("rate_limit", "402 usage limit that resets", _s(402), USAGE_RESETS),
    Rule("billing", "402", _s(402)),
    Rule("billing", "403 with billing wording", _s(403), BILLING),
    Rule("auth", "403", _s(403)),
    Rule("model_not_found", "404 naming the model", _s(404), MODEL_MISSING),
    Rule("format_error", "404 without a model", _s(404)),
    Rule("timeout", "408", _s(408)),
    Rule("payload_too_large", "413", _s(413)),
    Rule("overloaded", "429 saying overloaded", _s(429), OVERLOADED),
    Rule("billing", "429 about quota or billing", _s(429), BILLING),
    Rule("rate_limit", "429", _s(429)),
    Rule("format_error", "400 naming an unsupported parameter", _s(400), UNSUPPORTED_PARAMETER),
    Rule("context_overflow", "overflow wording", _s(400, 500, 502, 503, 529, None), OVERFLOW),
    Rule("model_not_found", "400 naming a missing model", _s(400), MODEL_MISSING),
    Rule("rate_limit", "400 with rate-limit wording", _s(400), RATE_LIMIT),
    Rule("billing", "400 with billing wording", _s(400), BILLING),
    Rule("context_overflow", "bare 400 for a large session", _s(400), when=_bare_and_large),
    Rule("format_error", "400 or 422", _s(400, 422)),
    Rule("server_error", "500 or 502", _s(500, 502)),
    Rule("overloaded", "503 or 529", _s(503, 529)),
    Rule("format_error", "other 4xx", _CLIENT_ERRORS),
    Rule("server_error", "other 5xx", _SERVER_ERRORS),
    # no status: transport failures and errors met inside a stream
    Rule("timeout", "timeout exception", _NO_STATUS, types=TIMEOUT_TYPES),
    Rule("context_overflow", "dropped connection in a large session", _NO_STATUS, types=CONNECTION_TYPES,
         when=_dropped_and_large),
    Rule("connection", "connection failure", _NO_STATUS, types=CONNECTION_TYPES),
    Rule("invalid_response", "response without an answer", _NO_STATUS, types=frozenset({"invalid_response"})),
    Rule("billing", "billing wording", _NO_STATUS, BILLING),
    Rule("rate_limit", "rate-limit wording", _NO_STATUS, RATE_LIMIT),
    Rule("overloaded", "overloaded wording", _NO_STATUS, OVERLOADED),
    Rule("auth", "authentication wording", _NO_STATUS, AUTH),
    Rule("model_not_found", "missing-model wording", _NO_STATUS, MODEL_MISSING),
    Rule("timeout", "timeout wording", _NO_STATUS, TIMEOUT_WORDS),
)

_UNKNOWN_RULE = "no rule matched"


def classify(error: BaseException, size: SessionSize | None = None) -> Classification:
    """The fault class of a failed call; ``size`` lets vague failures of big sessions count as overflows."""
    failure, message, retry_after, partial = _failure_of(error, size)
    for rule in RULES:
        if rule.matches(failure):
            fault, label = FAULT_CLASSES[rule.fault], rule.label
            break
    else:
        fault, label = FAULT_CLASSES["unknown"], _UNKNOWN_RULE
    return Classification(fault=fault, status=failure.status, message=message, rule=label, retry_after=retry_after,
                          text=failure.text, partial_text=partial)


def _failure_of(error: BaseException, size: SessionSize | None) -> tuple[Failure, str, float | None, str]:
    if isinstance(error, ProviderError):
        body_message = _body_message(error.body)
        body_text = _compact(error.body)
        text = " ".join(part for part in (error.message, error.error_type or "", body_text) if part)
        partial = error.body.get("partial_text", "") if isinstance(error.body, dict) else ""
        failure = Failure(status=error.status, text=text, error_type=error.error_type or "",
                          body_message=body_message if body_message is not None else error.message, size=size)
        return failure, error.message, error.retry_after, partial if isinstance(partial, str) else ""
    message = str(error) or type(error).__name__
    failure = Failure(status=None, text=f"{message} {type(error).__name__}", error_type=type(error).__name__,
                      body_message=message, size=size)
    return failure, message, None, ""


def _body_message(body: Any) -> str | None:
    """The message inside OpenAI's ``{"error": {...}}``, Anthropic's and vLLM's bodies."""
    if not isinstance(body, dict):
        return body if isinstance(body, str) else None
    inner = body.get("error", body)
    if isinstance(inner, str):
        return inner
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return inner["message"]
    return body.get("message") if isinstance(body.get("message"), str) else None


def _compact(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(body)
