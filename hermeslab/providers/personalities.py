"""How real OpenAI-compatible servers differ, as data the local server can take on.

The same chat-completions request meets different servers in different ways:
which status and words an overlong prompt earns, whether a refused *streamed*
request is refused at all or just ends empty, whether usage comes in streams,
what tools without a ``tool_choice`` mean, whether a second request breaks the
one still streaming, and how a body the server's schema rejects is answered.
A ``Personality`` names one server's choices; ``LocalServer(personality=...)``
answers as that server would, so the client and its recovery are tested
against each of them over real HTTP.

Everything here works on plain request payloads, token counts and chunk
dicts; the server turns the verdicts into HTTP replies.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from ..core.messages import text_of, tool_calls_of
from ..core.provider import ChatRequest, ChatResponse, Provider, StreamDelta
from ..core.tokens import count_text, default_counter
from .offline.model import truncate_to_tokens

#: A refusal: the HTTP status and the JSON body.
Refusal = tuple[int, dict[str, Any]]
#: Builds an overflow refusal from (prompt tokens, requested output or None, context window); None: no refusal.
OverflowWording = Callable[[int, "int | None", int], "Refusal | None"]
#: Builds the refusal of a body the schema rejects, from the problems found: (location, what is wrong).
ValidationWording = Callable[[list[tuple[str, str]]], Refusal]


class Superseded(RuntimeError):
    """A newer request took the server's only slot; the stream that held it is abandoned."""


@dataclass(frozen=True)
class Personality:
    name: str
    #: How the context window is enforced: the refusal for a prompt that does not fit (None: never refused).
    overflow: OverflowWording | None
    #: How a request the schema rejects is refused.
    validation: ValidationWording
    #: A streamed request the server refuses gets its error status (False: HTTP 200 and a stream with no chunk).
    streamed_errors_have_status: bool = True
    #: ``stream_options.include_usage`` is honoured.
    usage_in_streams: bool = True
    #: What offered tools without a ``tool_choice`` mean: ``auto`` (the model may call them) or ``none``.
    default_tool_choice: str = "auto"
    #: ``tool_choice`` is not read at all: offered tools are always the model's to call.
    ignores_tool_choice: bool = False
    #: Streaming is refused for requests whose tool choice is ``auto`` (the words of the refusal, or None).
    refuses_streamed_auto_tools: str | None = None
    #: One request at a time: a new one cuts the stream still being sent.
    single_slot: bool = False
    #: What an assistant message's content may be: ``any`` (text, parts or null), ``text_or_calls`` (null only
    #: beside tool calls) or ``text`` (a string, always).
    assistant_content: str = "any"
    #: The finish reason of a reply whose tool call the output cap cut off.
    cut_tool_call_finish: str = "length"
    #: An overlong prompt loses its oldest messages instead of being refused.
    truncates_prompt: bool = False
    #: The tokenizer routes the server offers (``chat_template.ROUTES``): ``llama-server`` or
    #: ``llama-cpp-python``; None: none.
    tokenizer: str | None = None
    #: Requests served at once (None: as many as arrive); more wait in the server's queue. llama-server's
    #: ``-np``, which it reports as ``total_slots`` in ``GET /props`` and one entry per slot in ``GET /slots``.
    slots: int | None = None
    #: ``GET /props`` and ``GET /slots`` answer as llama-server's do, and replies carry its ``timings``.
    reports_props: bool = False
    #: The chat template renders tool schemas; False: offered tools are dropped without a word (and
    #: ``/props`` says ``chat_template_caps.supports_tools: false``).
    supports_tools: bool = True


# ---------------------------------------------------------------- overflow wordings


def _openai_body(message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def overflow_openai(prompt: int, requested: int | None, window: int) -> Refusal | None:
    if prompt + (requested or 0) <= window:
        return None
    return 400, _openai_body(
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {prompt} "
        "tokens. Please reduce the length of the messages.", "invalid_request_error", "context_length_exceeded",
        "messages")


def overflow_llama_cpp_python(prompt: int, requested: int | None, window: int) -> Refusal | None:
    """The model refuses a prompt that fills the window (the output cap is clamped); the server rewords the refusal."""
    if prompt < window:
        return None
    completion = requested or 0
    return 400, _openai_body(
        f"This model's maximum context length is {window} tokens. However, you requested {prompt + completion} "
        f"tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the "
        "messages or completion.", "invalid_request_error", "context_length_exceeded", "messages")


def overflow_llama_server(prompt: int, requested: int | None, window: int) -> Refusal | None:
    if prompt < window:
        return None
    return 400, {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                           "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": window}}


def overflow_vllm(prompt: int, requested: int | None, window: int) -> Refusal | None:
    """The prompt alone, then prompt plus the requested output, against ``max_model_len``."""
    if prompt > window:
        message = (f"This model's maximum context length is {window} tokens. However, your request has {prompt} "
                   "input tokens. Please reduce the length of the input messages.")
    elif requested is not None and prompt + requested > window:
        message = (f"'max_tokens' or 'max_completion_tokens' is too large: {requested}. This model's maximum "
                   f"context length is {window} tokens and your request has {prompt} input tokens "
                   f"({requested} > {window} - {prompt}).")
    else:
        return None
    return 400, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}


# ---------------------------------------------------------------- validation wordings


def _pydantic_text(problems: list[tuple[str, str]], model: str) -> str:
    count = len(problems)
    lines = [f"{count} validation error{'s' if count != 1 else ''} for {model}"]
    for location, what in problems:
        lines += [location, f"  {what}"]
    return "\n".join(lines)


def validation_llama_cpp_python(problems: list[tuple[str, str]]) -> Refusal:
    """The schema error escapes the route handler: a 500 carrying pydantic's text."""
    return 500, _openai_body(_pydantic_text(problems, "CreateChatCompletionRequest"), "internal_server_error", None)


def validation_vllm(problems: list[tuple[str, str]]) -> Refusal:
    return 400, {"object": "error", "message": _pydantic_text(problems, "ChatCompletionRequest"),
                 "type": "BadRequestError", "param": None, "code": 400}


def validation_openai(problems: list[tuple[str, str]]) -> Refusal:
    location, what = problems[0]
    return 400, _openai_body(f"Invalid value for '{location}': {what}", "invalid_request_error", "invalid_value",
                             location)


def validation_plain(problems: list[tuple[str, str]]) -> Refusal:
    """A Go or C++ server: the decoder's one line, as a 400."""
    location, what = problems[0]
    return 400, {"error": {"message": f"invalid request: {location}: {what}", "type": "invalid_request_error",
                           "param": None, "code": None}}


# ---------------------------------------------------------------- the servers

PERSONALITIES: dict[str, Personality] = {p.name: p for p in (
    Personality("openai", overflow_openai, validation_openai, assistant_content="text_or_calls"),
    Personality("vllm", overflow_vllm, validation_vllm),
    Personality("ollama", None, validation_plain, truncates_prompt=True, ignores_tool_choice=True),
    Personality("llama-server", overflow_llama_server, validation_plain, tokenizer="llama-server", slots=1,
                reports_props=True),
    Personality("llama-cpp-python", overflow_llama_cpp_python, validation_llama_cpp_python,
                streamed_errors_have_status=False, usage_in_streams=False, default_tool_choice="none",
                refuses_streamed_auto_tools="Automatic streaming tool choice is not supported", single_slot=True,
                assistant_content="text", cut_tool_call_finish="tool_calls", tokenizer="llama-cpp-python"),
)}


def personality_named(name: str | Personality | None) -> Personality | None:
    """A personality by name (None: plain hermeslab); a clear error names the known ones."""
    if name is None or isinstance(name, Personality):
        return name
    try:
        return PERSONALITIES[name]
    except KeyError:
        raise ValueError(f"unknown server personality {name!r}; known: {', '.join(PERSONALITIES)}") from None


# ---------------------------------------------------------------- requests


def schema_problems(personality: Personality, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the server's schema rejects in the messages (only what differs between servers)."""
    problems = []
    rule = personality.assistant_content
    for index, message in enumerate(payload.get("messages") or []):
        if rule == "any" or not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        if "content" not in message:
            continue
        content = message["content"]
        if isinstance(content, str) or (content is None and rule == "text_or_calls" and message.get("tool_calls")):
            continue
        what = (f"Input should be a valid string [type=string_type, input_value={_shown(content)}, "
                f"input_type={type(content).__name__}]")
        problems.append((f"messages.{index}.content", what))
    return problems


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def tool_choice_of(personality: Personality, payload: Mapping[str, Any]) -> str:
    """``auto``, ``none``, ``required`` or ``named`` for the request's offered tools (``none`` without tools)."""
    if not payload.get("tools"):
        return "none"
    if personality.ignores_tool_choice:
        return "auto"
    choice = payload.get("tool_choice", personality.default_tool_choice)
    if choice is None:
        return personality.default_tool_choice
    return choice if isinstance(choice, str) else "named"


def effective_payload(personality: Personality, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The request as the model sees it: tools the tool choice switches off (or a template without tool support
    drops) are gone, usage only where streamed.

    (A named or required tool choice is passed on as given.)
    """
    out = dict(payload)
    if payload.get("tools") and (tool_choice_of(personality, payload) == "none" or not personality.supports_tools):
        out.pop("tools")
    if payload.get("stream") and not personality.usage_in_streams:
        out.pop("stream_options", None)
    return out


def streaming_refusal(personality: Personality, payload: Mapping[str, Any]) -> Refusal | None:
    """A streamed request with automatic tool choice, at a server that cannot stream one."""
    words = personality.refuses_streamed_auto_tools
    if words is None or not payload.get("stream") or tool_choice_of(personality, payload) != "auto":
        return None
    return 500, _openai_body(words, "internal_server_error", None)


def prepared(personality: Personality, payload: Mapping[str, Any],
             window: int | None) -> tuple[dict[str, Any], Refusal | None]:
    """The request as this server's model would get it, or the server's refusal of it.

    In the server's order: the schema, then the streaming support, then the
    context window (refused, or made to fit by dropping old messages).
    """
    problems = schema_problems(personality, payload)
    if problems:
        return dict(payload), personality.validation(problems)
    refusal = streaming_refusal(personality, payload)
    if refusal is not None:
        return dict(payload), refusal
    out = effective_payload(personality, payload)
    if window is None:
        return out, None
    if personality.truncates_prompt:
        return truncated_prompt(out, window), None
    if personality.overflow is None:
        return out, None
    return out, personality.overflow(prompt_tokens(out), requested_output(out), window)


def prompt_tokens(payload: Mapping[str, Any]) -> int:
    return default_counter.count_request(payload.get("messages") or [], payload.get("tools"))


def requested_output(payload: Mapping[str, Any]) -> int | None:
    value = payload.get("max_tokens", payload.get("max_completion_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def truncated_prompt(payload: Mapping[str, Any], window: int) -> dict[str, Any]:
    """The oldest messages dropped (system messages and the latest one kept) until the prompt fits the window.

    A tool result whose call was dropped goes with it.
    """
    messages = list(payload.get("messages") or [])
    system = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    out = dict(payload)
    while len(rest) > 1 and prompt_tokens({**payload, "messages": system + rest}) > window:
        rest.pop(0)
        while len(rest) > 1 and rest[0].get("role") == "tool":
            rest.pop(0)
    out["messages"] = system + rest
    return out


# ---------------------------------------------------------------- replies


class OutputLimited:
    """A provider whose tool calls, like its text, stop at the request's ``max_tokens``.

    The finish reason of a cut tool call is the personality's: ``length`` at
    most servers, ``tool_calls`` at those that report the kind of reply.
    """

    def __init__(self, provider: Provider, cut_finish: str):
        self.provider = provider
        self.name = provider.name
        self.model = getattr(provider, "model", None) or provider.name
        self.cut_finish = cut_finish

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.limited(self.provider.complete(request), request.max_tokens)

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        for item in self.provider.stream(request):
            yield self.limited(item, request.max_tokens) if isinstance(item, ChatResponse) else item

    def limited(self, response: ChatResponse, cap: int | None) -> ChatResponse:
        calls = tool_calls_of(response.message)
        if cap is None or not calls:
            return response
        left = cap - count_text(text_of(response.message))
        kept: list[dict[str, Any]] = []
        for call in calls:
            function = call["function"]
            left -= count_text(function.get("name") or "")
            arguments, cut = truncate_to_tokens(function.get("arguments") or "", max(0, left))
            left -= count_text(arguments)
            kept.append({**call, "function": {**function, "arguments": arguments}})
            if cut:
                usage = dataclasses.replace(response.usage, completion_tokens=cap) if response.usage else None
                return dataclasses.replace(response, message={**response.message, "tool_calls": kept},
                                           finish_reason=self.cut_finish, usage=usage)
        return response


class Slot:
    """The single slot of a one-request-at-a-time server: each new request supersedes the stream holding it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: threading.Event | None = None

    def take(self) -> threading.Event:
        """Claim the slot for a new request; the previous holder is told to stop."""
        mine = threading.Event()
        with self._lock:
            if self._holder is not None:
                self._holder.set()
            self._holder = mine
        return mine

    def guarded(self, chunks: Iterator[dict[str, Any]], superseded: threading.Event) -> Iterator[dict[str, Any]]:
        """The chunks until another request takes the slot; then the stream breaks off."""
        try:
            for chunk in chunks:
                if superseded.is_set():
                    raise Superseded("a newer request took the server's only slot")
                yield chunk
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()


def props_body(personality: Personality, *, model: str, window: int | None, slots: int) -> dict[str, Any]:
    """``GET /props`` as llama-server answers it (the fields a client reads)."""
    return {"total_slots": slots, "model_alias": model, "model_path": model,
            "default_generation_settings": {"n_ctx": window or 0},
            "chat_template_caps": {"supports_tools": personality.supports_tools,
                                   "supports_tool_calls": personality.supports_tools,
                                   "supports_system_role": True},
            "build_info": f"hermeslab {personality.name} personality", "endpoint_slots": True}


def timings_body(prompt: int, predicted: int, seconds: float) -> dict[str, Any]:
    """llama-server's ``timings`` of one reply: the prompt's and the generated tokens, and how fast."""
    milliseconds = max(seconds, 1e-6) * 1000.0
    return {"cache_n": 0, "prompt_n": prompt, "prompt_ms": 0.0, "prompt_per_second": 0.0,
            "predicted_n": predicted, "predicted_ms": milliseconds,
            "predicted_per_second": predicted / (milliseconds / 1000.0)}
