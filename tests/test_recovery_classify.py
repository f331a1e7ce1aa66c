"""The classifier on real error bodies of each provider family, passed through the SDK's error translation."""

from __future__ import annotations

import pytest
from provider_failures import CASES, build, sdk_error

from hermeslab.context.error_limits import parse_context_limit
from hermeslab.core.provider import ProviderError
from hermeslab.recovery import FAULT_CLASSES, RULES, SessionSize, classify
from hermeslab.recovery.classify import output_budget

# (family, status, body, expected class, context limit the text states)
BODIES = [
    ("openai", 400, {"error": {"message": "This model's maximum context length is 128000 tokens. However, your "
                               "messages resulted in 130521 tokens. Please reduce the length of the messages.",
                               "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
     "context_overflow", 128_000),
    ("openai", 429, {"error": {"message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min "
                               "(TPM): Limit 30000, Used 28000, Requested 4000. Please try again in 4s.",
                               "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}, "rate_limit", None),
    ("openai", 429, {"error": {"message": "You exceeded your current quota, please check your plan and billing "
                               "details.", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}},
     "billing", None),
    ("openai", 401, {"error": {"message": "Incorrect API key provided: sk-abc***. You can find your API key at "
                               "https://platform.openai.com/account/api-keys.", "type": "invalid_request_error",
                               "param": None, "code": "invalid_api_key"}}, "auth", None),
    ("openai", 404, {"error": {"message": "The model `gpt-9` does not exist or you do not have access to it.",
                               "type": "invalid_request_error", "param": None, "code": "model_not_found"}},
     "model_not_found", None),
    ("openai", 500, {"error": {"message": "The server had an error while processing your request. Sorry about that!",
                               "type": "server_error", "param": None, "code": None}}, "server_error", None),
    ("openai", 503, {"error": {"message": "The engine is currently overloaded, please try again later.",
                               "type": "server_error", "param": None, "code": None}}, "overloaded", None),
    ("openai", 400, {"error": {"message": "Your request was rejected as a result of our safety system.",
                               "type": "invalid_request_error", "code": "content_policy_violation"}},
     "content_policy", None),
    ("openai", 400, {"error": {"message": "Unrecognized request argument supplied: top_k",
                               "type": "invalid_request_error", "param": None, "code": None}}, "format_error", None),
    ("openai", 400, {"error": {"message": "Image URLs are only allowed for messages with role 'user', but this "
                               "message with role 'tool' contains an image URL.", "type": "invalid_request_error",
                               "param": "messages.[3].content.[1].type", "code": "invalid_value"}},
     "multimodal_tool_content", None),
    ("anthropic", 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "prompt is too long: 208310 tokens > 200000 maximum"}},
     "context_overflow", 200_000),
    ("anthropic", 413, {"type": "error", "error": {"type": "request_too_large",
                                                   "message": "Request exceeds the maximum allowed number of bytes."}},
     "payload_too_large", None),
    ("anthropic", 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     "overloaded", None),
    ("anthropic", 401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
     "auth", None),
    ("anthropic", 403, {"type": "error", "error": {"type": "permission_error", "message": "Your API key does not "
                                                   "have permission to use the specified resource."}}, "auth", None),
    ("anthropic", 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "Your credit balance "
                                                   "is too low to access the Anthropic API. Please go to Plans & "
                                                   "Billing to upgrade or purchase credits."}}, "billing", None),
    ("anthropic", 404, {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-9-opus"}},
     "model_not_found", None),
    ("anthropic", 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "messages.1.content.0"
                                                   ".thinking: Invalid `signature` in `thinking` block"}},
     "thinking_signature", None),
    ("anthropic", 429, {"type": "error", "error": {"type": "rate_limit_error", "message": "This request would exceed "
                                                   "the rate limit for your organization of 50,000 input tokens per "
                                                   "minute."}}, "rate_limit", None),
    ("anthropic", 500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
     "server_error", None),
    ("vllm", 400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
                   "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length "
                   "of the messages or completion.", "type": "BadRequestError", "param": None, "code": 400},
     "context_overflow", 4096),
    ("vllm", 400, {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's "
                             "maximum context length is 4096 tokens and your request has 1000 input tokens (4000 > "
                             "4096 - 1000).", "type": "BadRequestError", "param": None, "code": 400}},
     "output_cap", 4096),
    ("vllm", 404, {"object": "error", "message": "The model `llama-9` does not exist.", "type": "NotFoundError",
                   "param": None, "code": 404}, "model_not_found", None),
    ("llama.cpp", 400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                  "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000,
                                  "n_ctx": 4096}}, "context_overflow", 4096),
    ("llama.cpp", 400, {"error": {"code": 400, "message": "the request exceeds the available context size (8192 "
                                  "tokens), try increasing it", "type": "invalid_request_error"}},
     "context_overflow", 8192),
    ("llama.cpp", 503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
     "overloaded", None),
    ("openrouter", 402, {"error": {"message": "Insufficient credits. Add more using "
                                   "https://openrouter.ai/settings/credits", "code": 402}}, "billing", None),
    ("openrouter", 400, {"error": {"message": "This endpoint's maximum context length is 131072 tokens. However, you "
                                   "requested about 140000 tokens (139000 of text input, 1000 in the output). Please "
                                   "reduce the length of either one.", "code": 400}}, "context_overflow", 131_072),
    ("gemini", 400, {"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number "
                               "of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}},
     "context_overflow", 1_048_576),
    ("gemini", 429, {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                               "status": "RESOURCE_EXHAUSTED"}}, "rate_limit", None),
    ("gemini", 503, {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                               "status": "UNAVAILABLE"}}, "overloaded", None),
    ("mistral", 400, {"object": "error", "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for "
                      "model with 32768 maximum context length", "type": "invalid_request_error", "code": None},
     "context_overflow", 32_768),
    ("deepseek", 402, {"error": {"message": "Insufficient Balance", "type": "unknown_error", "code": "invalid_request_"
                                 "error"}}, "billing", None),
    ("azure", 400, {"error": {"code": "content_filter", "message": "The response was filtered due to the prompt "
                              "triggering Azure OpenAI's content management policy."}}, "content_policy", None),
    ("groq", 413, {"error": {"message": "Request too large for model `llama3-70b-8192` in organization `org_x` on "
                             "tokens per minute (TPM): Limit 6000, Requested 7000, please reduce your message size "
                             "and try again.", "type": "tokens", "code": "rate_limit_exceeded"}},
     "payload_too_large", None),
    ("ollama", 404, {"error": {"message": "model \"llama9\" not found, try pulling it first", "type": "api_error"}},
     "model_not_found", None),
    ("llama-cpp-python", 400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, you "
                                         "requested 4300 tokens (4300 in the messages, 0 in the completion). Please "
                                         "reduce the length of the messages or completion.",
                                         "type": "invalid_request_error", "param": "messages",
                                         "code": "context_length_exceeded"}}, "context_overflow", 4_096),
    ("vllm", 400, {"object": "error", "message": "This model's maximum context length is 8192 tokens. However, your "
                   "request has 9000 input tokens. Please reduce the length of the input messages.",
                   "type": "BadRequestError", "param": None, "code": 400}, "context_overflow", 8_192),
]

#: Request bodies a server's schema rejected, sent with a 5xx by servers whose validation escapes the route.
VALIDATION_500 = [
    ("2 validation errors for CreateChatCompletionRequest\nmessages.1.typed-dict.content\n  Input should be a valid "
     "string [type=string_type, input_value=None, input_type=NoneType]"),
    "1 validation error for ChatCompletionRequest\nmessages -> 1 -> content\n  field required (type=value_error.missing)",
    "json: cannot unmarshal number into Go struct field Message.messages.content of type string",
    "Failed to deserialize the JSON body into the target type: messages[1]: invalid type: null, expected a string",
    "missing field `content` at line 1 column 80",
    "None is not of type 'string'\n\nFailed validating 'type' in schema['properties']['content']",
    "Request validation failed: 'content' is a required property",
]


@pytest.mark.parametrize("family, status, body, expected, limit", BODIES,
                         ids=[f"{b[0]}-{b[1]}-{b[3]}" for b in BODIES])
def test_real_error_bodies_classify_by_status_text_and_code(family, status, body, expected, limit):
    fault = classify(sdk_error(status, body))
    assert fault.name == expected, fault.rule
    assert fault.status == status
    assert parse_context_limit(fault.text) == limit


@pytest.mark.parametrize("status", [500, 502])
@pytest.mark.parametrize("message", VALIDATION_500)
def test_a_5xx_whose_body_is_a_request_validation_error_is_a_bad_request(message, status):
    fault = classify(sdk_error(status, {"error": {"message": message, "type": "internal_server_error",
                                                  "param": None, "code": None}}))
    assert fault.name == "format_error" and not fault.fault.retryable


@pytest.mark.parametrize("message", ["Internal Server Error", "CUDA error: out of memory",
                                     "The server had an error while processing your request.",
                                     "llama_decode returned -1", "Model loading failed: the file is not a valid GGUF"])
def test_a_5xx_without_validation_wording_is_still_a_server_error(message):
    assert classify(sdk_error(500, {"error": {"message": message, "type": "server_error"}})).name == "server_error"


def test_retry_after_travels_from_the_header_into_the_classification():
    fault = classify(sdk_error(429, BODIES[1][2], headers={"retry-after": "7"}))
    assert fault.name == "rate_limit" and fault.retry_after == 7.0


@pytest.mark.parametrize("error, expected", [
    (ProviderError("Request timed out.", error_type="APITimeoutError"), "timeout"),
    (ProviderError("Connection error. (ConnectError: [Errno 111] Connection refused)",
                   error_type="APIConnectionError"), "connection_refused"),
    (ProviderError("Connection error. (ConnectError: [Errno -3] Temporary failure in name resolution)",
                   error_type="APIConnectionError"), "connection"),
    (ProviderError("the stream was interrupted after 12 characters", error_type="stream_interrupted",
                   body={"partial_text": "Hello, the a", "partial_tool_calls": []}), "connection"),
    (ProviderError("the provider returned a response without choices", error_type="invalid_response"),
     "invalid_response"),
    (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "codec_error"),
    (ConnectionResetError(104, "Connection reset by peer"), "connection"),
    (TimeoutError("timed out"), "timeout"),
    (ProviderError("upstream: rate limit exceeded, slow down"), "rate_limit"),
    (ProviderError("something odd happened"), "unknown"),
    (ProviderError("I'm a teapot", status=418), "format_error"),
    (ProviderError("Gateway Timeout", status=504), "server_error"),
    (ProviderError("Request Timeout", status=408), "timeout"),
])
def test_transport_failures_and_statusless_errors(error, expected):
    assert classify(error).name == expected


def test_a_cut_stream_keeps_its_partial_text():
    error = ProviderError("interrupted", error_type="stream_interrupted", body={"partial_text": "Half an ans"})
    assert classify(error).partial_text == "Half an ans"


def test_vague_failures_of_large_sessions_read_as_overflows():
    small = SessionSize(tokens=2_000, messages=10, window=128_000)
    large = SessionSize(tokens=100_000, messages=90, window=128_000)
    bare = ProviderError("Bad Request", status=400, body={"error": {"message": "Bad Request"}})
    assert classify(bare, small).name == "format_error"
    assert classify(bare, large).name == "context_overflow"
    dropped = ProviderError("Server disconnected without sending a response.", error_type="APIConnectionError")
    assert classify(dropped, small).name == "connection"
    assert classify(dropped, SessionSize(tokens=90_000, messages=40, window=128_000)).name == "context_overflow"
    worded = ProviderError("Invalid value for 'temperature': must be at most 2.", status=400)
    assert classify(worded, large).name == "format_error"


def test_rate_limit_wording_with_token_counts_is_not_an_overflow():
    fault = classify(ProviderError("Rate limit reached: limit 30000 tokens per minute", status=429))
    assert fault.name == "rate_limit" and parse_context_limit(fault.text) is None


#: Wordings in which servers state their window, grouped by the server family that uses them (Hermes 0.19.0
#: reads each of these; so must the overflow path, or it keeps a window the server has just said is smaller).
STATED_WINDOWS = [
    # llama.cpp's server and its wrappers
    ("Maximum context size 65536 exceeded", 65_536),
    ("maximum context size 65,536 exceeded", 65_536),
    ("the request exceeds the available context size (4096 tokens)", 4_096),
    # LM Studio, Ollama and other local servers
    ("model's max context length is 65536", 65_536),
    ("max context window: 8192", 8_192),
    ("max_context_length = 32768 exceeded", 32_768),
    # vLLM, every way it prints its model length
    ("maximum model length 131072", 131_072),
    ("maximum model length: 131072", 131_072),
    ("The decoder prompt is longer than the maximum model length of 40960.", 40_960),
    ("maximum model length is 32768", 32_768),
    ("exceeds the maximum model length (16384)", 16_384),
    ("max_model_len: 8192", 8_192),
    ("`max_model_len` (4096)", 4_096),
    # Gemini
    ("The input token count (32825) exceeds... input token count is 32825 but model only supports up to 32768",
     32_768),
]


@pytest.mark.parametrize("text, limit", STATED_WINDOWS, ids=[t for t, _ in STATED_WINDOWS])
def test_every_wording_that_states_a_window_is_read(text, limit):
    assert parse_context_limit(text) == limit
    assert parse_context_limit(text.upper()) == limit


@pytest.mark.parametrize("text", ["this model supports up to 8192 output tokens",
                                  "supports up to 4096 completion tokens", "maximum model length exceeded",
                                  "Maximum context size exceeded"])
def test_wordings_without_a_window_read_none(text):
    assert parse_context_limit(text) is None


@pytest.mark.parametrize("spec", CASES, ids=[spec.id for spec in CASES])
def test_each_wording_family_takes_its_recovery_path(spec):
    fault = classify(build(spec), spec.session())
    assert fault.name == spec.expected, fault.rule
    assert fault.output_budget == spec.budget


def test_the_output_budget_is_read_only_from_output_cap_wordings():
    assert output_budget("max_tokens: 9000 > context_window: 8192 - input_tokens: 9000 = available_tokens: -808") is None
    assert output_budget("This model's maximum context length is 8192 tokens.") is None
    assert output_budget("max_completion_tokens must be less than or equal to 8,192") == 8192
    overflow = classify(sdk_error(400, {"error": {"message": "prompt is too long: 9000 tokens > 8192 maximum"}}))
    assert overflow.name == "context_overflow" and overflow.output_budget is None


def test_a_cut_streams_delivered_text_is_never_read_as_the_providers_words():
    error = ProviderError("the stream was interrupted after 40 characters: peer closed connection",
                          error_type="stream_interrupted",
                          body={"partial_text": "the rate limit and the context window are", "partial_tool_calls": []})
    fault = classify(error, SessionSize(tokens=2_000, messages=10, window=128_000))
    assert fault.name == "connection" and fault.partial_text.startswith("the rate limit")


def test_foreign_exceptions_give_their_status_and_body_through_the_cause_chain():
    class SDKError(Exception):
        def __init__(self, message: str):
            super().__init__(message)
            self.status_code, self.body = 402, {"error": {"message": "Usage limit reached, try again in 5 minutes"}}

    try:
        try:
            raise SDKError("inner")
        except SDKError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        fault = classify(outer)
    assert (fault.name, fault.status, fault.message) == ("rate_limit", 402, "Usage limit reached, try again in 5 minutes")


#: Failures no Hermes reason exists for, to reach the last rules.
HERMESLAB_ONLY = (
    (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "text that UTF-8 cannot encode"),
    (ProviderError("the provider returned a response without choices", error_type="invalid_response"),
     "response without an answer"),
)


def test_every_rule_of_the_table_is_reachable_and_named_once():
    labels = [rule.label for rule in RULES]
    assert len(labels) == len(set(labels))
    reached = {classify(build(spec), spec.session()).rule for spec in CASES}
    reached |= {classify(error).rule for error, _ in HERMESLAB_ONLY}
    assert [label for label in labels if label not in reached] == []
    assert {label for _, label in HERMESLAB_ONLY} <= set(labels)


@pytest.mark.parametrize("name, retryable, compress, rotate, fall_back", [
    ("auth", False, False, True, True),
    ("billing", False, False, True, True),
    ("rate_limit", True, False, True, True),
    ("overloaded", True, False, False, True),
    ("server_error", True, False, False, True),
    ("timeout", True, False, False, True),
    ("connection", True, False, False, True),
    ("tls_certificate", False, False, False, True),
    ("context_overflow", True, True, False, False),
    ("output_cap", False, False, False, False),
    ("payload_too_large", True, True, False, False),
    ("model_not_found", False, False, False, True),
    ("format_error", False, False, False, True),
    ("content_policy", False, False, False, True),
    ("thinking_signature", False, False, False, False),
    ("unknown", True, False, False, True),
])
def test_each_class_says_what_may_cure_it(name, retryable, compress, rotate, fall_back):
    fault = FAULT_CLASSES[name]
    assert (fault.retryable, fault.compress, fault.rotate_credential, fault.fall_back) == (
        retryable, compress, rotate, fall_back)
    assert fault.advice


def test_every_rule_names_a_known_class_and_every_class_has_a_rule():
    assert {rule.fault for rule in RULES} == set(FAULT_CLASSES)


def test_describe_gives_the_advice_with_the_providers_words():
    fault = classify(sdk_error(401, BODIES[3][2]))
    text = fault.describe()
    assert "check model.api_key" in text and "HTTP 401" in text and "Incorrect API key" in text
