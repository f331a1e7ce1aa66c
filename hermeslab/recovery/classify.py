"""From a failed model call to a fault class: status, body text and exception type.

Providers report the same failure in many shapes: OpenAI, Anthropic, vLLM,
llama.cpp and gateways differ in status codes, JSON layout and wording, and
custom providers often raise plain exceptions whose only signal is their
message. The classifier reads them all through one ordered table of rules
(first match wins), so adding a provider's wording is one line, and each fault
class says in one row what may cure it: a retry, a compression, a new
credential, another provider, or a one-off repair of the request.

Statusless failures are read by their words first and by their exception type
last: a custom provider's ``RuntimeError("Server disconnected ...")`` must take
the same path as httpx's typed error. One wording needs numbers as well as
words: an output cap too large for the prompt ("max_tokens: X > context_window:
Y - input_tokens: Z = available_tokens: W") is cured by asking for less output,
so ``output_budget`` reads what the provider says still fits.
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
    #: The provider will not recover within the retry window: fall back at the first failure, unless a
    #: credential refresh is still available to try (Hermes switches at once when no rotation can help).
    fall_back_first: bool = False
    #: A change to the outgoing request that may cure it, tried once per call.
    repair: str | None = None
    #: Retries worth making whatever ``agent.api_max_retries`` allows, each after this fixed pause (None:
    #: the configured count and backoff). A refused connection deserves one quick look, not a minute of waits.
    quick_retries: tuple[int, float] | None = None
    #: What a person should do when recovery gives up.
    advice: str = ""


_CLASSES = (
    FaultClass("auth", retryable=False, rotate_credential=True, fall_back=True,
               advice="the provider rejected the credentials; check model.api_key"),
    FaultClass("billing", retryable=False, rotate_credential=True, fall_back=True,
               advice="the account is out of credit or over its spending limit; add credit or raise the limit"),
    FaultClass("rate_limit", retryable=True, rotate_credential=True, fall_back=True, fall_back_first=True,
               advice="the provider kept rate-limiting the requests; wait or lower the request rate"),
    FaultClass("overloaded", retryable=True, fall_back=True, eager_fallback=True,
               advice="the provider stayed overloaded; try again later or configure recovery.fallback_providers"),
    FaultClass("server_error", retryable=True, fall_back=True,
               advice="the provider kept failing with server errors; try again later"),
    FaultClass("timeout", retryable=True, fall_back=True, eager_fallback=True,
               advice="the provider did not answer within model.timeout; raise it or try again later"),
    FaultClass("connection_refused", retryable=True, fall_back=True, quick_retries=(1, 0.5),
               advice="nothing is listening at the endpoint; start the server there or fix model.base_url"),
    FaultClass("connection", retryable=True, fall_back=True, eager_fallback=True,
               advice="the connection to the provider kept breaking; check the endpoint and the network"),
    FaultClass("tls_certificate", retryable=False, fall_back=True,
               advice="the provider's TLS certificate could not be verified; install the CA that signs it "
                      "(a proxy's, or the system bundle) or fix the endpoint's certificate"),
    FaultClass("invalid_response", retryable=True, fall_back=True,
               advice="the provider kept sending responses without an answer"),
    FaultClass("context_overflow", retryable=True, compress=True,
               advice="the prompt does not fit the model's context window even after compression"),
    FaultClass("payload_too_large", retryable=True, compress=True,
               advice="the request is larger than the provider accepts even after compression"),
    FaultClass("output_cap", retryable=False, repair="lower_output_cap",
               advice="the requested output (model.max_tokens) does not fit beside this prompt; "
                      "lower model.max_tokens (compressing cannot help: the prompt itself fits)"),
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
    #: Output tokens the provider says would still fit beside the prompt (output-cap errors only).
    output_budget: int | None = None
    #: The conversation's size when the call failed.
    size: SessionSize | None = None

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
    r"context[_ ]length[_ ]exceeded", r"maximum context length", r"context[_ ](?:window|limit|size|length)\b",
    r"prompt is too long", r"prompt too long", r"input is too long", r"prompt exceeds (?:the )?max(?:imum)? length",
    r"prompt length", r"max_model_len", r"maximum model length", r"exceeds? the available context",
    r"exceed_context_size", r"\bn_ctx(?:_slot)?\b", r"slot context", r"reduce the length of the (?:messages|input|prompt)",
    r"maximum number of (?:input )?tokens", r"input token count", r"max(?:imum)? input tokens?",
    r"too large for model with \d+ maximum", r"exceeds the model'?s? (?:context|maximum)",
    r"longer than the model'?s? (?:context|maximum)", r"maximum allowed input length", r"\btoo many (?:input )?tokens\b",
    r"\btoken limit\b", r"tokens in request more than max tokens allowed", r"超过最大长度", r"上下文长度",
)
#: Anthropic's 429 for a prompt above the standard tier's 200K tokens: compressing below it cures it.
LONG_CONTEXT_TIER = _words(r"extra usage\b.{0,80}\blong context|long context\b.{0,80}\bextra usage")
RATE_LIMIT = _words(
    r"rate[ _-]?limit", r"too many requests", r"(?:tokens|requests) per (?:min|minute|day|second)", r"\b[tr]pm\b",
    r"resource[ _-]?exhausted", r"throttl", r"rate increased too quickly", r"too many concurrent requests",
    r"service ?quota ?exceeded", r"try again in \d", r"please retry after",
)
#: A usage or quota limit: transient when it comes with a reset (``USAGE_RESETS``), otherwise billing.
USAGE_LIMIT = _words(r"usage limit", r"\bquota\b", r"limit exceeded")
USAGE_RESETS = _words(r"try again", r"\bretry", r"resets?\b", r"\bwait\b", r"requests remaining", r"periodic",
                      r"\bwindow\b", r"available (?:again )?in \d")
BILLING = _words(
    r"billing", r"credit balance", r"insufficient[_ ](?:credits?|balance|funds|quota)", r"payment required",
    r"spending limit", r"key limit exceeded", r"exceeded your current quota", r"out of (?:credits?|funds)",
    r"(?:add|purchase|buy|top up) (?:more )?(?:your )?credits", r"out of extra usage", r"credits? (?:have been |are )?"
    r"(?:exhausted|depleted)", r"no usable credits", r"balance[_ ](?:depleted|is too low)", r"account is deactivated",
    r"plan does not include", r"free[ _-]?tier", r"requires? (?:available|more|paid) credits",
    r"upgrade (?:your |to a )?(?:plan|account|subscription|paid)",
)
OVERLOADED = _words(r"overloaded", r"server is busy", r"over capacity", r"at capacity", r"no capacity",
                    r"loading model")
AUTH = _words(
    r"invalid[_ ]api[_ ]key", r"incorrect api key", r"invalid x-api-key", r"unauthori[sz]ed", r"authentication",
    r"invalid (?:bearer )?token", r"api key (?:is )?(?:missing|invalid|not valid|expired)", r"no api key",
    r"token (?:expired|revoked|has expired)", r"access denied", r"\bforbidden\b",
)
MODEL_MISSING = _words(
    r"model[_ ]not[_ ](?:found|available)", r"\bmodel\b[^.\n]{0,80}?(?:does not exist|not found|is not (?:available|"
    r"supported))", r"no such model", r"unknown model", r"invalid[_ ]model", r"not a valid model", r"unsupported model",
    r"no endpoints found that support", r"\bmodel: [\w.:/-]+",
)
CONTENT_POLICY = _words(
    r"content[_ ]policy", r"content management policy", r"safety system", r"content_filter", r"flagged (?:as|by|for)",
    r"violat\w* (?:our |the |[\w-]+'s )?(?:usage |content )?polic", r"responsible ?ai ?polic",
    r"trusted access for cyber", r"responses cannot be generated due to safety", r"new_sensitive",
)
THINKING_SIGNATURE = _words(r"thinking\b.{0,80}(?:signature|cannot be modified|must remain)")
TOOL_IMAGES = _words(
    r"image[_ ]urls? (?:are|is) only allowed for messages with role", r"(?:tool|function) (?:messages?|results?|"
    r"content) (?:cannot|can ?not|must not|do not|does not) (?:contain|include|support) images?",
    r"images? (?:are|is) not supported in (?:tool|function)", r"unknown variant `image_url`",
    r"tool(?:[_ ]call)?(?:[._ ]message)?[._ ]content must be (?:a )?string", r"tool message must be (?:a )?string",
    r"expected (?:a )?string,? (?:but )?got (?:a |an )?(?:list|array)", r"\btext is not set\b",
)
UNSUPPORTED_PARAMETER = _words(
    r"unknown[_ ]parameter", r"unsupported[_ ]parameter", r"unrecognized request argument",
    r"extra inputs are not permitted", r"additional properties are not allowed",
)
#: A body a server's schema rejected, in the words of the usual validators: pydantic (v1 and v2), JSON
#: Schema, serde, Go's encoding/json and generic request validation.
SCHEMA_REJECTION = _words(
    r"\bvalidation errors? for\b", r"\binput should be (?:a )?(?:valid|greater|less|at (?:least|most))\b",
    r"\[type=\w+(?:, |\])", r"\bfield required\b", r"\bvalue is not a valid\b", r"\bextra_forbidden\b",
    r"\bis not of type '", r"\bis a required property\b", r"\binvalid type: \w+(?: \S+)?, expected\b",
    r"\bmissing field `", r"\bunknown field `", r"\bfailed to deserialize\b", r"\bcannot unmarshal\b.{0,80}\binto\b",
    r"\brequest (?:body )?validation (?:error|failed)\b", r"\binvalid request body\b",
)
#: A request the server refused as malformed, in any status: a 5xx saying this is no passing outage.
REQUEST_VALIDATION = _words(UNSUPPORTED_PARAMETER.pattern, r"invalid_request_error", SCHEMA_REJECTION.pattern)
#: A provider's note that the model answered with nothing, often blaming a low max_tokens: retry, not compress.
EMPTY_ANSWER = _words(r"returned an empty response", r"empty response despite retries", r"empty response stream",
                      r"model returning empty responses")
PAYLOAD_TOO_LARGE = _words(r"request entity too large", r"payload too large", r"error code: 413",
                           r"request_too_large")
#: Nothing accepts connections at the address: a server not started, or the wrong port.
CONNECT_REFUSED = _words(r"connection refused", r"econnrefused", r"errno 111\b", r"actively refused")
#: The connection never got established: never read as an overflow, however large the session.
CONNECT_FAILED = _words(
    r"getaddrinfo", r"name resolution", r"nodename nor servname",
    r"name or service not known", r"no route to host", r"network is unreachable", r"failed to fetch",
    r"fetch failed", r"upstream connect error", r"failed to establish a new connection", r"\bconnecterror\b",
)
#: The server hung up mid-request: a transport hiccup, or a gateway refusing a prompt too large to read.
DISCONNECT = _words(
    r"server disconnected", r"peer closed connection", r"connection reset by peer", r"connection was closed",
    r"network connection lost", r"unexpected eof", r"incomplete chunked read", r"remote end closed connection",
)
CERTIFICATE = _words(
    r"certificate[ _]verify[ _]failed", r"unable to get local issuer certificate", r"self[- ]signed certificate",
    r"certificate has expired", r"certificate is not valid", r"unable to verify the first certificate",
)
TLS_ALERT = _words(r"\b(?:ssl|tls)(?:v\d)?[ _/](?:tls[ _])?alert", r"bad[ _]record[ _]mac", r"ssl handshake failure",
                   r"\[ssl:", r"\bssl(?:eof|zeroreturn|syscall)?error\b", r"decryption failed or bad record")
TIMEOUT_WORDS = _words(r"timed? ?out", r"timeout", r"deadline exceeded")

TIMEOUT_TYPES = frozenset({
    "APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "timeout",
})
CONNECTION_TYPES = frozenset({
    "APIConnectionError", "ConnectionError", "ConnectionResetError", "ConnectionRefusedError",
    "ConnectionAbortedError", "BrokenPipeError", "RemoteProtocolError", "ReadError", "WriteError", "ConnectError",
    "NetworkError", "LocalProtocolError", "ServerDisconnectedError", "IncompleteRead", "ProtocolError",
    "SSLError", "SSLEOFError", "SSLZeroReturnError", "SSLSyscallError", "SSLWantReadError", "SSLWantWriteError",
    "stream_interrupted", "OSError",
})
CODEC_TYPES = frozenset({"UnicodeEncodeError", "UnicodeDecodeError"})


# ---------------------------------------------------------------- the output budget

#: Parameter names providers use for the output cap.
_OUTPUT_PARAMETER = _words(r"max_(?:completion_|output_|new_)?tokens")
#: Words saying the output cap is over a limit (used when no number can be read).
_OUTPUT_OVER = _words(
    r"available[_ ]tokens", r"in the output\)", r"requested \d+ output tokens", r"range of max_tokens",
    r"(?:must|should) be (?:less than|<=|at most|no (?:more|greater) than|smaller than|in \[|within|between)",
    r"less than or equal", r"too large", r"supports at most", r"exceeds? (?:the )?(?:model'?s? )?(?:max|limit)",
)
#: Words saying the *input* is what is too long; an error with these is an overflow even if it names max_tokens.
_INPUT_OVER = _words(r"prompt is too long", r"prompt too long", r"input is too long", r"prompt length",
                     r"reduce the length of the (?:messages|input|prompt)")

_N = r"(\d[\d,]*)"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


#: Each provider's way of stating how much output would fit: a pattern and the budget it implies.
_OUTPUT_BUDGETS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], int]], ...] = (
    # DashScope / Qwen: "Range of max_tokens should be [1, 8192]"
    (re.compile(r"range of max_tokens should be\s*\[\s*\d+\s*,\s*" + _N + r"\s*\]", re.IGNORECASE), lambda m: _int(m[1])),
    # Anthropic: "max_tokens: 128000 > context_window: 200000 - input_tokens: 180000 = available_tokens: 20000"
    (re.compile(r"available[_ ]tokens[\s:=]{0,3}(-?\d[\d,]*)", re.IGNORECASE), lambda m: _int(m[1])),
    # OpenAI: "max_tokens is too large: 100000. This model supports at most 16384 completion tokens"
    (re.compile(r"supports at most " + _N + r" (?:completion|output) tokens", re.IGNORECASE), lambda m: _int(m[1])),
    # OpenRouter: "maximum context length is 131072 tokens. However, you requested about 140000 tokens
    # (100000 of text input, 2000 of tool input, 38000 in the output)"
    (re.compile(r"maximum context length is " + _N + r" tokens.{0,200}?\(" + _N + r" of text input(?:, " + _N
                + r" of tool input)?, \d[\d,]* in the output\)", re.IGNORECASE | re.DOTALL),
     lambda m: _int(m[1]) - _int(m[2]) - _int(m[3] or "0")),
    # vLLM: "... maximum context length is 32768 tokens. However, you requested 16384 output tokens and your
    # prompt contains at least 16500 input tokens"
    (re.compile(r"maximum context length is " + _N + r" tokens.{0,200}?requested \d[\d,]* output tokens.{0,80}?"
                r"prompt contains (?:at least )?" + _N + r" input tokens", re.IGNORECASE | re.DOTALL),
     lambda m: _int(m[1]) - _int(m[2])),
    # LM Studio: the same, with the prompt in characters (about three per token, counted generously)
    (re.compile(r"maximum context length is " + _N + r" tokens.{0,200}?requested \d[\d,]* output tokens.{0,80}?"
                r"prompt contains " + _N + r" characters", re.IGNORECASE | re.DOTALL),
     lambda m: _int(m[1]) - (_int(m[2]) + 2) // 3),
    # vLLM (OpenAI server): "'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's maximum
    # context length is 4096 tokens and your request has 1000 input tokens (4000 > 4096 - 1000)"
    (re.compile(r"max_(?:completion_)?tokens\W{0,40}(?:or \W*max_completion_tokens\W*)?is too large.{0,80}?maximum "
                r"context length is " + _N + r" tokens and your request has " + _N + r" input tokens", re.IGNORECASE | re.DOTALL),
     lambda m: _int(m[1]) - _int(m[2])),
    # generic: "max_tokens must be less than or equal to 8192"
    (re.compile(r"max_(?:completion_|output_|new_)?tokens\W{0,3}.{0,40}?(?:must|should) be (?:less than or equal to"
                r"|<=|at most|no (?:more|greater) than) " + _N, re.IGNORECASE), lambda m: _int(m[1])),
)


def output_budget(text: str) -> int | None:
    """The output tokens an output-cap error says would fit, or None (no such wording, or nothing fits)."""
    for pattern, budget in _OUTPUT_BUDGETS:
        match = pattern.search(text)
        if match is not None:
            value = budget(match)
            return value if value >= 1 else None
    return None


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
    """Gateways that cannot read a huge prompt sometimes just hang up."""
    return _large(failure.size, 0.6, 120_000, 200)


def _output_cap(failure: Failure) -> bool:
    """The output cap is over what fits: a budget is stated, or output-cap words come without input-overflow words.

    A stated budget of nothing means the prompt alone fills the window: that is an overflow.
    """
    if any(pattern.search(failure.text) for pattern, _ in _OUTPUT_BUDGETS):
        return output_budget(failure.text) is not None
    return bool(_OUTPUT_PARAMETER.search(failure.text) and _OUTPUT_OVER.search(failure.text)
                and not _INPUT_OVER.search(failure.text))


@dataclass(frozen=True)
class Rule:
    fault: str
    #: Names the rule in the log; unique.
    label: str
    #: Statuses the rule applies to (``None`` in the set: no status); None: any.
    statuses: frozenset[int | None] | None = None
    words: re.Pattern[str] | None = None
    types: frozenset[str] | None = None
    when: Predicate | None = None
    #: A second wording that must appear as well.
    also: re.Pattern[str] | None = None
    #: A wording that rules this one out (a throttle that mentions tokens is no overflow).
    unless: re.Pattern[str] | None = None

    def matches(self, failure: Failure) -> bool:
        if self.statuses is not None and failure.status not in self.statuses:
            return False
        if self.types is not None and failure.error_type not in self.types:
            return False
        for pattern in (self.words, self.also):
            if pattern is not None and not pattern.search(failure.text):
                return False
        if self.unless is not None and self.unless.search(failure.text):
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
    Rule("multimodal_tool_content", "images refused in tool results", _s(400, 422, None), TOOL_IMAGES),
    Rule("context_overflow", "429 long-context tier", _s(429), LONG_CONTEXT_TIER),
    Rule("output_cap", "output cap over what fits", _s(400, 422, None), when=_output_cap,
         unless=UNSUPPORTED_PARAMETER),
    # the status, refined by the wording
    Rule("auth", "401", _s(401)),
    Rule("rate_limit", "402 usage limit that resets", _s(402), USAGE_LIMIT, also=USAGE_RESETS),
    Rule("billing", "402", _s(402)),
    Rule("billing", "403 with billing wording", _s(403), BILLING),
    Rule("auth", "403", _s(403)),
    Rule("billing", "404 with billing wording", _s(404), BILLING),
    Rule("model_not_found", "404 naming the model", _s(404), MODEL_MISSING),
    Rule("unknown", "404 without a model (a wrong path or a passing routing fault)", _s(404)),
    Rule("timeout", "408", _s(408)),
    Rule("payload_too_large", "413", _s(413)),
    Rule("overloaded", "429 saying overloaded", _s(429), OVERLOADED),
    Rule("billing", "429 about quota or billing", _s(429), BILLING),
    Rule("rate_limit", "429", _s(429)),
    Rule("format_error", "400 naming an unsupported parameter", _s(400), UNSUPPORTED_PARAMETER),
    Rule("format_error", "5xx refusing the request as malformed", _SERVER_ERRORS, REQUEST_VALIDATION),
    Rule("server_error", "advisory of an empty answer", _s(400, 500, 502, 503, 529, None), EMPTY_ANSWER),
    Rule("context_overflow", "overflow wording", _s(400, 500, 502, 503, 529, None), OVERFLOW, unless=RATE_LIMIT),
    Rule("model_not_found", "400 naming a missing model", _s(400), MODEL_MISSING),
    Rule("rate_limit", "400 with rate-limit wording", _s(400), RATE_LIMIT),
    Rule("billing", "400 with billing wording", _s(400), BILLING),
    Rule("context_overflow", "bare 400 for a large session", _s(400), when=_bare_and_large),
    Rule("format_error", "400 or 422", _s(400, 422)),
    Rule("server_error", "500 or 502", _s(500, 502)),
    Rule("overloaded", "503 or 529", _s(503, 529)),
    Rule("format_error", "other 4xx", _CLIENT_ERRORS),
    Rule("server_error", "other 5xx", _SERVER_ERRORS),
    # no status: the words first (custom providers raise untyped errors), then the exception type
    Rule("payload_too_large", "payload-too-large wording", _NO_STATUS, PAYLOAD_TOO_LARGE),
    Rule("rate_limit", "RateLimitError without a status", _NO_STATUS, types=frozenset({"RateLimitError"})),
    Rule("rate_limit", "usage limit that resets", _NO_STATUS, USAGE_LIMIT, also=USAGE_RESETS),
    Rule("overloaded", "overloaded wording", _NO_STATUS, OVERLOADED),
    Rule("billing", "billing wording", _NO_STATUS, BILLING),
    Rule("rate_limit", "rate-limit wording", _NO_STATUS, RATE_LIMIT),
    Rule("billing", "usage limit without a reset", _NO_STATUS, USAGE_LIMIT),
    Rule("auth", "authentication wording", _NO_STATUS, AUTH),
    Rule("model_not_found", "missing-model wording", _NO_STATUS, MODEL_MISSING),
    Rule("tls_certificate", "certificate verification failure", _NO_STATUS, CERTIFICATE),
    Rule("connection_refused", "nothing listening", _NO_STATUS, CONNECT_REFUSED),
    Rule("connection", "connection never established", _NO_STATUS, CONNECT_FAILED),
    Rule("connection", "transient TLS alert", _NO_STATUS, TLS_ALERT),
    Rule("context_overflow", "disconnect in a large session", _NO_STATUS, DISCONNECT, when=_dropped_and_large),
    Rule("connection", "disconnect wording", _NO_STATUS, DISCONNECT),
    Rule("timeout", "timeout exception", _NO_STATUS, types=TIMEOUT_TYPES),
    Rule("timeout", "timeout wording", _NO_STATUS, TIMEOUT_WORDS),
    Rule("connection", "connection failure", _NO_STATUS, types=CONNECTION_TYPES),
    Rule("invalid_response", "response without an answer", _NO_STATUS, types=frozenset({"invalid_response"})),
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
    budget = output_budget(failure.text) if fault.name == "output_cap" else None
    return Classification(fault=fault, status=failure.status, message=message, rule=label, retry_after=retry_after,
                          text=failure.text, partial_text=partial, output_budget=budget, size=size)


#: Body members that hold what a cut stream delivered: the model's words, not the provider's.
_DELIVERED = ("partial_text", "partial_tool_calls")


def _failure_of(error: BaseException, size: SessionSize | None) -> tuple[Failure, str, float | None, str]:
    if isinstance(error, ProviderError):
        body = error.body
        partial = body.get("partial_text", "") if isinstance(body, dict) else ""
        if isinstance(body, dict):
            body = {key: value for key, value in body.items() if key not in _DELIVERED} or None
        body_message = _body_message(body)
        text = " ".join(part for part in (error.message, error.error_type or "", _compact(body)) if part)
        failure = Failure(status=error.status, text=text, error_type=error.error_type or "",
                          body_message=body_message if body_message is not None else error.message, size=size)
        return failure, error.message, error.retry_after, partial if isinstance(partial, str) else ""
    status, body = _status_and_body(error)
    message = str(error) or type(error).__name__
    body_message = _body_message(body)
    text = " ".join(part for part in (message, type(error).__name__, _compact(body)) if part)
    failure = Failure(status=status, text=text, error_type=type(error).__name__,
                      body_message=body_message if body_message is not None else message, size=size)
    return failure, body_message or message, None, ""


def _status_and_body(error: BaseException) -> tuple[int | None, Any]:
    """A status and a body from a foreign exception or its causes (SDKs call them ``status_code`` or ``status``)."""
    status, body, current = None, None, error
    for _ in range(5):
        for name in ("status_code", "status"):
            code = getattr(current, name, None)
            if status is None and isinstance(code, int) and not isinstance(code, bool) and 100 <= code < 600:
                status = code
        candidate = getattr(current, "body", None)
        if body is None and isinstance(candidate, (dict, str)) and candidate:
            body = candidate
        cause = current.__cause__ or current.__context__
        if cause is None or cause is current:
            break
        current = cause
    return status, body


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
