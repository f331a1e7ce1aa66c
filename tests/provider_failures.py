"""Provider failures as data: built into hermeslab's errors here, and into Hermes's inside its own venv.

One spec names a failure the way it reaches a client: an HTTP status with the
provider's JSON body (translated by the real ``openai`` SDK), a status with a
bare message, or an exception with no status at all (its type and message are
all a custom provider gives). ``CASES`` holds the wording families the
classifier must tell apart; each says what hermeslab decides and, where it
deliberately differs, what Hermes 0.19.0 decides and why.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

from hermeslab.core.provider import ProviderError
from hermeslab.providers.openai_compat import provider_error_from
from hermeslab.recovery import SessionSize

#: hermeslab's class names where Hermes's reason is named differently.
HERMES_NAMES = {
    "connection": "timeout",
    "content_policy": "content_policy_blocked",
    "multimodal_tool_content": "multimodal_tool_content_unsupported",
    "output_cap": "context_overflow",
    "tls_certificate": "ssl_cert_verification",
}


#: Why hermeslab names a refused connection where Hermes 0.19.0 waits on it as a timeout.
REFUSED_WHY = ("nothing listening is not a passing fault: one quick retry, then the turn ends saying where "
               "nothing listened, instead of a minute of backoff")


@dataclass(frozen=True)
class Spec:
    id: str
    expected: str
    message: str = ""
    status: int | None = None
    body: dict[str, Any] | None = None
    #: The exception class for a failure without a status (a builtin of that name, else a plain subclass).
    type_name: str = "RuntimeError"
    #: (tokens, messages, window) of the session, for the rules that read size.
    size: tuple[int, int, int] | None = None
    #: The output budget an output-cap error states.
    budget: int | None = None
    #: Hermes 0.19.0's reason where hermeslab deliberately decides otherwise, and why.
    hermes: str | None = None
    why: str = ""

    @property
    def hermes_reason(self) -> str:
        return self.hermes or HERMES_NAMES.get(self.expected, self.expected)

    def session(self) -> SessionSize | None:
        return SessionSize(*self.size) if self.size else None

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "message": self.message, "status": self.status, "body": self.body,
                "type_name": self.type_name, "size": self.size}


def sdk_error(status: int, body: object, headers: dict[str, str] | None = None) -> ProviderError:
    """What OpenAICompatProvider raises when an endpoint answers ``status`` with ``body``."""
    request = httpx2.Request("POST", "http://provider.test/v1/chat/completions")
    response = httpx2.Response(status, json=body, headers=headers or {}, request=request)
    detail = body.get("error", body) if isinstance(body, dict) else body
    return provider_error_from(openai.APIStatusError(f"Error code: {status}", response=response, body=detail))


def exception_named(name: str, message: str) -> BaseException:
    kind = getattr(builtins, name, None)
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        kind = type(name, (Exception,), {})
    return kind(message)


def build(spec: Spec) -> BaseException:
    if spec.status is not None and spec.body is not None:
        return sdk_error(spec.status, spec.body)
    if spec.status is not None:
        return ProviderError(spec.message, status=spec.status)
    return exception_named(spec.type_name, spec.message)


def _err(message: str, **fields: Any) -> dict[str, Any]:
    return {"error": {"message": message, **fields}}


LARGE = (150_000, 120, 200_000)
NEAR_WINDOW = (180_000, 400, 200_000)
SMALL = (2_000, 10, 200_000)

CASES: tuple[Spec, ...] = (
    # context overflow, in the wordings of many providers, with and without a status
    Spec("zai-tokens-in-request", "context_overflow", status=400,
         body=_err("tokens in request more than max tokens allowed", code="1210")),
    Spec("prompt-exceeds-max-length", "context_overflow", status=400, body=_err("Prompt exceeds max length")),
    Spec("input-longer-than-context", "context_overflow", status=400,
         body=_err("The input (301455 tokens) is longer than the model's context length (262144 tokens).")),
    Spec("too-many-tokens-400", "context_overflow", status=400, body=_err("Too many tokens")),
    Spec("too-many-tokens-statusless", "context_overflow", "Too many tokens"),
    Spec("prompt-too-long-statusless", "context_overflow", "prompt is too long: 208310 tokens > 200000 maximum"),
    Spec("llamacpp-overflow-500", "context_overflow", status=500,
         body=_err("the request exceeds the available context size, try increasing it",
                   type="exceed_context_size_error", n_ctx=4096)),
    Spec("maximum-allowed-input-length", "context_overflow",
         "Input length 40211 exceeds the maximum allowed input length of 32768 tokens.",
         hermes="unknown", why="0.19.0 has no wording for it; later Hermes releases read it as an overflow"),
    Spec("throttle-exception-naming-tokens", "rate_limit",
         "ThrottlingException: Too many tokens, please wait before trying again."),
    Spec("throttling-naming-tokens", "rate_limit", "Request throttling: too many tokens in flight, wait and resend.",
         hermes="context_overflow", why="a throttle is not an overflow; later Hermes releases agree"),
    # the output cap: what fits beside the prompt is stated, the window stays as it is
    Spec("anthropic-output-cap", "output_cap", status=400, budget=20_000, body={"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "max_tokens: 128000 > context_window: 200000 - input_tokens: 180000 = available_tokens: 20000"}}),
    Spec("openai-output-cap", "output_cap", status=400, budget=16_384, body=_err(
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you provided "
        "100000.", type="invalid_request_error", param="max_tokens", code="invalid_value")),
    Spec("openrouter-output-cap", "output_cap", status=400, budget=29_072, body=_err(
        "This endpoint's maximum context length is 131072 tokens. However, you requested about 140000 tokens (100000 "
        "of text input, 2000 of tool input, 38000 in the output). Please reduce the length of either one.", code=400)),
    Spec("vllm-output-cap", "output_cap", status=400, budget=16_268, body={"object": "error", "message": (
        "This model's maximum context length is 32768 tokens. However, you requested 16384 output tokens and your "
        "prompt contains at least 16500 input tokens, for a total of at least 32884 tokens. Please reduce the "
        "length of the input prompt or the number of requested output tokens."), "type": "BadRequestError",
        "code": 400}),
    Spec("vllm-openai-server-output-cap", "output_cap", status=400, budget=3_096, body=_err(
        "'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's maximum context length is 4096 "
        "tokens and your request has 1000 input tokens (4000 > 4096 - 1000).", type="BadRequestError", code=400)),
    Spec("lmstudio-output-cap", "output_cap", status=400, budget=19_101, body=_err(
        "This model's maximum context length is 32768 tokens. However, you requested 32768 output tokens and your "
        "prompt contains 41000 characters (more than the model's context length).")),
    Spec("dashscope-output-cap", "output_cap", status=400, budget=8_192,
         body=_err("Range of max_tokens should be [1, 8192]", code="InvalidParameter")),
    Spec("output-cap-without-a-number", "output_cap", status=400,
         body=_err("max_tokens exceeds the model's maximum output length")),
    Spec("nothing-fits-is-an-overflow", "context_overflow", status=400, body=_err(
        "This endpoint's maximum context length is 131072 tokens. However, you requested about 140000 tokens "
        "(139000 of text input, 1000 in the output). Please reduce the length of either one.")),
    Spec("unsupported-max-tokens-parameter", "format_error", status=400, body=_err(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        type="invalid_request_error", param="max_tokens", code="unsupported_parameter")),
    # disconnects: a probable overflow in a large session, a transport hiccup otherwise
    Spec("peer-closed-large", "context_overflow",
         "peer closed connection without sending complete message body (incomplete chunked read)", size=LARGE),
    Spec("peer-closed-small", "connection",
         "peer closed connection without sending complete message body (incomplete chunked read)", size=SMALL),
    Spec("server-disconnected-large", "context_overflow", "Server disconnected without sending a response",
         size=LARGE),
    Spec("reset-near-the-window", "context_overflow", "Connection reset by peer", size=NEAR_WINDOW),
    Spec("typed-disconnect-small", "connection", "Server disconnected without sending a response.",
         type_name="RemoteProtocolError", size=SMALL),
    Spec("ssl-alert-large", "connection", "[SSL: BAD_RECORD_MAC] sslv3 alert bad record mac (_ssl.c:2580)",
         size=NEAR_WINDOW),
    Spec("ssl-alert-openssl3", "connection", "ERR_SSL_SSL/TLS_ALERT_BAD_RECORD_MAC during read"),
    Spec("httpx-connect-error", "connection_refused", "[Errno 111] Connection refused", type_name="ConnectError",
         hermes="timeout", why=REFUSED_WHY),
    Spec("connection-refused-builtin", "connection_refused", "Connection refused: localhost:11434",
         type_name="ConnectionRefusedError", hermes="timeout", why=REFUSED_WHY),
    Spec("name-not-resolved", "connection", "[Errno -2] Name or service not known (getaddrinfo failed)",
         type_name="ConnectError"),
    Spec("connect-refused-message", "connection_refused", "connect ECONNREFUSED 10.1.2.3:8000", size=NEAR_WINDOW,
         hermes="unknown", why="0.19.0 reads only disconnect words; a refused connection is a transport failure"),
    Spec("certificate-unverified", "tls_certificate", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
         "unable to get local issuer certificate (_ssl.c:1000)", type_name="SSLCertVerificationError"),
    Spec("read-timeout", "timeout", "Read timed out", type_name="ReadTimeout"),
    Spec("timeout-builtin", "timeout", "timed out", type_name="TimeoutError"),
    # 404: a wrong path, a missing model, or a plan that does not include the model
    Spec("404-not-found", "unknown", "Not Found", status=404),
    Spec("404-page-not-found", "unknown", "404 page not found", status=404),
    Spec("404-model-missing", "model_not_found", status=404, body=_err(
        "The model `gpt-9` does not exist or you do not have access to it.", code="model_not_found")),
    Spec("404-free-tier", "billing", status=404, body={"status": 404, "message": (
        "Model 'acme/large-2' is not available on the free tier; choose a free model or add a payment method.")}),
    Spec("404-anthropic-model", "model_not_found", status=404,
         body={"type": "error", "error": {"type": "not_found_error", "message": "model: claude-9-opus"}},
         hermes="unknown", why="Anthropic names the missing model this way; retrying it cannot help"),
    # billing, quota and rate limits in their several statuses
    Spec("out-of-extra-usage", "billing", status=400, body=_err(
        "You're out of extra usage. Add more in your account settings to continue.",
        type="invalid_request_error")),
    Spec("credit-balance-too-low", "billing", status=400,
         body=_err("Your credit balance is too low to access the Anthropic API.")),
    Spec("402-plain", "billing", "Payment Required", status=402),
    Spec("402-usage-limit-resets", "rate_limit", status=402,
         body=_err("Usage limit reached; try again in 12 minutes")),
    Spec("quota-429", "billing", status=429, body=_err(
        "You exceeded your current quota, please check your plan and billing details.", code="insufficient_quota"),
         hermes="rate_limit", why="an exhausted quota does not recover within the retry window"),
    Spec("rate-increased-too-quickly", "rate_limit", status=400, body=_err(
        "Request rate increased too quickly; spread the requests out and retry.")),
    Spec("rate-limit-on-400", "rate_limit", status=400, body=_err("rate limit exceeded on this model")),
    Spec("rate-limit-error-without-status", "rate_limit", "You have exceeded your rate limit.",
         type_name="RateLimitError"),
    Spec("resource-exhausted-statusless", "rate_limit",
         "resource exhausted: concurrent request slots used up (8/8)",
         hermes="unknown", why="0.19.0 matches only resource_exhausted with an underscore"),
    Spec("usage-limit-that-resets-in", "rate_limit", "Daily usage limit reached. Resets in 3h 10m.",
         hermes="billing", why="'resets in' is a reset; later Hermes releases agree"),
    Spec("overloaded-429", "overloaded", "The service is temporarily overloaded, please retry shortly",
         status=429),
    Spec("overloaded-statusless", "overloaded",
         "proxy error: upstream overloaded, back off and retry"),
    Spec("long-context-tier", "context_overflow", "Extra usage is required for long context requests.",
         status=429, hermes="long_context_tier", why="Hermes names the same compression after the tier"),
    # content policy: refused as asked, never retried unchanged
    Spec("flagged-for-risk", "content_policy", "This content was flagged for possible cybersecurity risk and was not "
         "processed."),
    Spec("violates-usage-policies", "content_policy", status=400,
         body=_err("This request violates our usage policies.", code="invalid_prompt")),
    Spec("safety-system", "content_policy", status=400, body=_err(
        "Your request was rejected as a result of our safety system.", code="content_policy_violation"),
         hermes="format_error", why="a safety refusal retried or sent elsewhere unchanged is refused again"),
    # images in tool results, in other providers' words
    Spec("mimo-text-is-not-set-in-message", "multimodal_tool_content",
         "Error code: 400 - {'error': {'message': 'Param Incorrect', 'param': 'text is not set', 'code': '400'}}",
         status=400),
    Spec("mimo-text-is-not-set-in-param", "multimodal_tool_content", status=400,
         body=_err("Param Incorrect", code="400", param="text is not set", type=""),
         hermes="format_error", why="Hermes does not read the body's param, where MiMo says it"),
    Spec("tool-content-must-be-string", "multimodal_tool_content", status=400,
         body=_err("messages[3]: tool message content must be a string")),
    Spec("expected-string-got-array", "multimodal_tool_content", status=400,
         body=_err("Invalid type for 'messages[2].content': expected string, got array")),
    # a request-validation error behind a 5xx status is still a malformed request
    Spec("500-unknown-parameter", "format_error", status=500, body=_err("Unknown parameter: 'frequency_penalty'")),
    Spec("502-unsupported-parameter", "format_error", status=502,
         body=_err("Unsupported parameter: 'reasoning_effort'", type="invalid_request_error")),
    Spec("503-unknown-parameter", "format_error", status=503, body=_err("Unknown parameter: 'frequency_penalty'"),
         hermes="overloaded", why="Hermes looks for it behind 500 and 502 only"),
    # the plain statuses, and the wordings that stand in for them when there is none
    Spec("401", "auth", "Unauthorized", status=401),
    Spec("403-spending-limit", "billing", status=403, body=_err(
        "This key has reached its spending limit. Add credits or raise the limit in your billing settings.")),
    Spec("429", "rate_limit", "Too Many Requests", status=429),
    Spec("400-invalid-model", "model_not_found", status=400, body=_err("anthropic/claude-9 is not a valid model ID")),
    Spec("empty-answer-advisory", "server_error", status=400, body=_err(
        "Provider returned an empty response despite retries; a very low max_tokens may be the cause.")),
    Spec("418", "format_error", "I'm a teapot", status=418),
    Spec("504", "server_error", "Gateway Timeout", status=504),
    Spec("payload-too-large-statusless", "payload_too_large", "upstream said: 413 Request Entity Too Large"),
    Spec("billing-statusless", "billing", "Insufficient credits remaining on this key."),
    Spec("quota-without-reset-statusless", "billing", "Monthly quota reached."),
    Spec("auth-statusless", "auth", "invalid api key provided"),
    Spec("model-missing-statusless", "model_not_found", "model not found: llama-9"),
    Spec("timed-out-statusless", "timeout", "the upstream request timed out after 600s"),
    Spec("connection-aborted", "connection", "Software caused connection abort", type_name="ConnectionAbortedError"),
    Spec("403", "auth", "Forbidden", status=403),
    Spec("408", "timeout", "Request Timeout", status=408),
    Spec("413", "payload_too_large", "Request Entity Too Large", status=413),
    Spec("500", "server_error", "Internal Server Error", status=500),
    Spec("503", "overloaded", "Service Unavailable", status=503),
    Spec("bare-400-small", "format_error", "Bad Request", status=400, size=SMALL),
    Spec("bare-400-large", "context_overflow", "Bad Request", status=400, size=(100_000, 90, 128_000)),
    Spec("thinking-signature", "thinking_signature", status=400, body={"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages.1.content.0.thinking: Invalid `signature` in `thinking` "
        "block"}}),
    Spec("something-odd", "unknown", "something exploded"),
)
