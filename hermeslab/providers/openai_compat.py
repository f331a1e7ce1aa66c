"""A Provider over the official ``openai`` SDK, for any OpenAI-compatible endpoint.

The SDK's own retries are switched off: retrying, backing off and falling back
are decisions of hermeslab's recovery chain, which needs to see every failure.
Every SDK exception is translated into a ``ProviderError`` carrying what that
chain classifies on (status, message, error type, Retry-After), and a stream
that breaks off is reported as such instead of passing for a short answer.

Servers differ in what they stream. A stream that ends cleanly without a
single chunk (how some servers refuse a streamed request they cannot serve)
is asked again without streaming, which brings the real answer or the real
error. A server found unable to stream tool calls (it refuses them in words,
or answers them only unstreamed) gets every later request with tools
unstreamed.

An answer without usage (llama.cpp-family servers send none in streams) is
counted by the server's own tokenizer where it offers one (``server_tokenizer``).
"""

from __future__ import annotations

import dataclasses
import email.utils
import re
import time
from typing import Any, Iterator, Mapping

import openai

from ..core.messages import wire_messages
from ..core.provider import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage
from ..core.rough import rough_message_tokens
from .pace import Pace, pace_of
from .server_props import ServerProps, read_props
from .server_tokenizer import ServerTokenizer

#: Sent when an endpoint needs no key; the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "hermeslab-no-key"
_TOOLS = r"(?:tools?|tool[_ ]calls?|tool[_ ]choice|function[_ ]call(?:ing|s)?|functions?)"
_STREAM = r"stream\w*"
_REFUSED = r"(?:not (?:yet )?(?:supported|implemented|allowed|available)|unsupported|cannot|can ?not|can't|unable to|" \
           r"(?:does|do)(?: not|n't) support)"
#: A refusal to stream a request because it offers tools, whatever order the three ideas come in
#: ("automatic streaming tool choice is not supported", "streaming is not supported with tools",
#: "tool calls cannot be streamed", "this model cannot stream function calls").
STREAMED_TOOLS_REFUSED = re.compile("|".join(
    rf"\b{a}\b.{{0,60}}?\b{b}\b.{{0,60}}?\b{c}" for a, b, c in (
        (_STREAM, _TOOLS, _REFUSED), (_STREAM, _REFUSED, _TOOLS), (_TOOLS, _STREAM, _REFUSED),
        (_TOOLS, _REFUSED, _STREAM), (_REFUSED, _STREAM, _TOOLS), (_REFUSED, _TOOLS, _STREAM))),
    re.IGNORECASE | re.DOTALL)


class OpenAICompatProvider:
    """Chat completions against ``base_url`` (None: the SDK's default, api.openai.com)."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        model: str,
        *,
        timeout: float = 120.0,
        name: str = "openai-compatible",
    ):
        if not model:
            raise ValueError("OpenAICompatProvider needs a model name")
        self.name = name
        self.model = model
        self.base_url = base_url
        #: The configured timeout of one request; raised for a request the server's measured pace needs longer for.
        self.timeout = timeout
        #: How fast the server reads and writes, from the ``timings`` a llama-server sends with each reply.
        self.pace = pace_of(server_root(base_url)) if base_url else Pace()
        self._props: ServerProps | None = None
        self._props_asked = False
        #: False once the server showed it cannot stream a request with tools; such requests then go unstreamed.
        self.streams_tools = True
        key = api_key if api_key is not None else (PLACEHOLDER_API_KEY if base_url else None)
        self._key = key
        #: Asked for a call's counts when its answer has none; None where no server of ours is addressed.
        self.tokenizer = ServerTokenizer(server_root(base_url), key) if base_url else None
        try:
            self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        except openai.OpenAIError as exc:
            raise ProviderError(
                f"cannot create the OpenAI client: {exc}", error_type="missing_api_key"
            ) from None

    # ------------------------------------------------------------ Provider

    def server_props(self) -> ServerProps | None:
        """What the server says about itself at ``GET /props`` (llama-server), asked once; None elsewhere."""
        if not self._props_asked:
            self._props_asked = True
            self._props = read_props(server_root(self.base_url), self._key) if self.base_url else None
        return self._props

    def request_timeout(self, request: ChatRequest) -> float:
        """The configured timeout, or longer when the server's measured pace needs it for this request."""
        prompt = sum(rough_message_tokens(message) for message in request.messages)
        return self.pace.timeout(self.timeout, prompt, request.max_tokens)

    def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            completion = self._client.chat.completions.create(**self._arguments(request),
                                                              timeout=self.request_timeout(request))
        except openai.OpenAIError as exc:
            raise provider_error_from(exc, self.base_url) from exc
        if not isinstance(completion, (str, bytes)):
            self.pace.observe(_as_dict(completion).get("timings"))
        return self._counted(request, response_from_completion(completion))

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        if request.tools and not self.streams_tools:
            yield from self._unstreamed(request)
            return
        try:
            sdk_stream = self._client.chat.completions.create(
                **self._arguments(request), stream=True, stream_options={"include_usage": True},
                timeout=self.request_timeout(request))
        except openai.OpenAIError as exc:
            error = provider_error_from(exc, self.base_url)
            if not (request.tools and STREAMED_TOOLS_REFUSED.search(error.message)):
                raise error from exc
            self.streams_tools = False
            yield from self._unstreamed(request)
            return
        assembler = StreamAssembler()
        try:
            chunks = iter(sdk_stream)
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except (openai.OpenAIError, ValueError) as exc:
                    raise assembler.interrupted(exc) from exc
                data = _as_dict(chunk)
                self.pace.observe(data.get("timings"))
                delta = assembler.add(data)
                if delta is not None:
                    yield delta
        finally:
            sdk_stream.close()
        if assembler.chunks == 0:
            yield from self._after_empty_stream(request)
            return
        yield self._counted(request, assembler.finish())

    def _after_empty_stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        """A stream that ended cleanly with nothing in it: the same request unstreamed says what happened.

        Its error is raised as the real failure; an answer with tools offered
        means this server cannot stream them, which is remembered.
        """
        for item in self._unstreamed(request):
            if isinstance(item, ChatResponse) and request.tools:
                self.streams_tools = False
            yield item

    def _unstreamed(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        """One unstreamed answer in the shape of a stream: its text as one delta, then the response."""
        response = self.complete(request)
        text = response.message.get("content") or ""
        if text or response.reasoning:
            yield StreamDelta(text=text, reasoning=response.reasoning or "")
        yield response

    def close(self) -> None:
        """Release the HTTP connection pools."""
        self._client.close()
        if self.tokenizer is not None:
            self.tokenizer.close()

    def _counted(self, request: ChatRequest, response: ChatResponse) -> ChatResponse:
        """``response``, with the server's tokenizer's counts when it reported no prompt count and can count."""
        reported = response.usage
        if (reported is not None and reported.prompt_tokens > 0) or self.tokenizer is None \
                or not self.tokenizer.available:
            return response
        counted = self.tokenizer.usage(self._arguments(request), response, reported)
        if counted is None:
            return response
        usage, source = counted
        return dataclasses.replace(response, usage=usage, usage_source=source)

    # ------------------------------------------------------------ helpers

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [_sendable(message) for message in wire_messages(alternating(request.messages))],
        }
        extra = dict(request.extra)
        choice = extra.pop("tool_choice", None)
        if request.tools:
            arguments["tools"] = request.tools
            if choice is not None:
                arguments["tool_choice"] = choice
        if request.max_tokens is not None:
            arguments["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            arguments["temperature"] = request.temperature
        if extra:
            arguments["extra_body"] = extra
        return arguments


def server_root(base_url: str) -> str:
    """The server's root, where llama.cpp-family servers keep their non-OpenAI routes: ``base_url`` without ``/v1``."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


def alternating(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each run of the user's own messages sent as one, their texts in order.

    Chat templates that require user and assistant to alternate refuse two
    user messages in a row, which a history can hold: texts that arrived while
    nobody answered, or a message left unanswered by a failed turn and read
    back from the log. The history keeps them apart; only what goes over the
    wire joins them. Messages the agent made up (marked by a process-local
    ``_`` flag, such as recalled memory) are left as they are.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and _own_user_message(message) and _own_user_message(out[-1]):
            out[-1] = {"role": "user", "content": _joined(out[-1].get("content"), message.get("content"))}
        else:
            out.append(message)
    return out


def _own_user_message(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and not any(key.startswith("_") for key in message)


def _joined(first: Any, second: Any) -> str | list[dict[str, Any]]:
    """Two user contents as one: text joined by a blank line, or the parts of both in order."""
    if isinstance(first, list) or isinstance(second, list):
        return _parts(first) + _parts(second)
    return "\n\n".join(text for text in (first or "", second or "") if text)


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []


def _sendable(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message with empty text says so with ``""``: the SDK would send ``null``, which some
    servers' schemas refuse, while every server accepts an empty string."""
    if message.get("role") == "assistant" and message.get("content") is None:
        return {**message, "content": ""}
    return message


# ---------------------------------------------------------------- responses


def _as_dict(model: Any) -> dict[str, Any]:
    """SDK objects as plain data, keeping provider-specific extra fields."""
    if isinstance(model, dict):
        return model
    return model.to_dict()


def assistant_message(text: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message in one canonical shape, whichever path produced it.

    Content is None only when the message is made of tool calls alone, so a
    streamed and a non-streamed answer to the same request compare equal.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not tool_calls else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _reasoning_of(fields: Mapping[str, Any]) -> str:
    value = fields.get("reasoning_content") or fields.get("reasoning") or ""
    return value if isinstance(value, str) else ""


def response_from_completion(completion: Any) -> ChatResponse:
    """Translate a non-streamed SDK completion; no choices is an invalid response."""
    data = _as_dict(completion) if not isinstance(completion, (str, bytes)) else {}
    choices = data.get("choices") or []
    if not choices:
        raise ProviderError(
            "the provider returned a response without choices",
            body=data or completion,
            error_type="invalid_response",
        )
    choice = choices[0]
    raw = choice.get("message") or {}
    tool_calls = [
        {
            "id": call.get("id") or "",
            "type": call.get("type") or "function",
            "function": {
                "name": (call.get("function") or {}).get("name") or "",
                "arguments": (call.get("function") or {}).get("arguments") or "",
            },
        }
        for call in raw.get("tool_calls") or []
    ]
    reasoning = _reasoning_of(raw)
    return ChatResponse(
        message=assistant_message(raw.get("content") or "", tool_calls),
        finish_reason=choice.get("finish_reason"),
        usage=usage_from_dict(data.get("usage")),
        model=data.get("model") or "",
        reasoning=reasoning or None,
    )


def usage_from_dict(usage: Mapping[str, Any] | None) -> Usage | None:
    """Map an OpenAI-style usage object, including the cache fields other vendors use."""
    if not usage:
        return None
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    cache_read = (
        prompt_details.get("cached_tokens")
        or usage.get("cache_read_input_tokens")
        or usage.get("prompt_cache_hit_tokens")
        or 0
    )
    cache_write = usage.get("cache_creation_input_tokens") or prompt_details.get("cache_write_tokens") or 0
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=int(cache_read),
        cache_write_tokens=int(cache_write),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


class StreamAssembler:
    """Folds streamed chunks into deltas for the caller and one final ChatResponse.

    Tool calls arrive as fragments keyed by ``index``; the id and name come once
    (some servers repeat them, which must not double them) and the argument
    text is concatenated.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model = ""
        self.saw_choice = False
        #: Chunks received, of any kind.
        self.chunks = 0

    def add(self, chunk: Mapping[str, Any]) -> StreamDelta | None:
        self.chunks += 1
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = usage_from_dict(chunk["usage"])
        delta = StreamDelta()
        for choice in chunk.get("choices") or []:
            self.saw_choice = True
            fields = choice.get("delta") or {}
            if fields.get("content"):
                delta.text += fields["content"]
            delta.reasoning += _reasoning_of(fields)
            for fragment in fields.get("tool_calls") or []:
                self._add_call_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        self.text.append(delta.text)
        self.reasoning.append(delta.reasoning)
        return delta if delta.text or delta.reasoning else None

    def _add_call_fragment(self, fragment: Mapping[str, Any]) -> None:
        index = fragment.get("index")
        if index is None:
            index = self._index_without_position(fragment.get("id"))
        call = self.calls.setdefault(index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        if fragment.get("id") and not call["id"]:
            call["id"] = fragment["id"]
        function = fragment.get("function") or {}
        name = function.get("name")
        if name and name != call["function"]["name"]:
            call["function"]["name"] += name
        if function.get("arguments"):
            call["function"]["arguments"] += function["arguments"]

    def _index_without_position(self, call_id: str | None) -> int:
        """Servers that omit ``index`` start a new call with a new id and continue the last one otherwise."""
        if not self.calls:
            return 0
        last = max(self.calls)
        if call_id and self.calls[last]["id"] and call_id != self.calls[last]["id"]:
            return last + 1
        return last

    def partial_tool_calls(self) -> list[dict[str, Any]]:
        return [self.calls[index] for index in sorted(self.calls)]

    def interrupted(self, cause: BaseException) -> ProviderError:
        text = "".join(self.text)
        return ProviderError(
            f"the stream was interrupted after {len(text)} characters: {cause}",
            body={"partial_text": text, "partial_tool_calls": self.partial_tool_calls()},
            error_type="stream_interrupted",
        )

    def finish(self) -> ChatResponse:
        """The assembled response; a stream that never said it finished is an interruption."""
        if not self.saw_choice:
            raise ProviderError(
                "the stream ended without any choices", body={"usage_seen": self.usage is not None},
                error_type="invalid_response",
            )
        if self.finish_reason is None:
            raise self.interrupted(ConnectionError("the stream ended without a finish_reason"))
        reasoning = "".join(self.reasoning)
        return ChatResponse(
            message=assistant_message("".join(self.text), self.partial_tool_calls()),
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
            reasoning=reasoning or None,
        )


# ---------------------------------------------------------------- errors


def provider_error_from(exc: openai.OpenAIError, endpoint: str | None = None) -> ProviderError:
    """Translate any SDK exception, keeping the provider's own words where it sent some.

    A connection that never got an answer names ``endpoint``, so the message says where nothing listened.
    """
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    body = _full_body(exc, response)
    detail = _error_detail(body)
    message = _message_of(detail, body) or _exception_text(exc)
    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError) and endpoint:
        message = f"{message} at {endpoint}"
    return ProviderError(
        message,
        status=status,
        body=body,
        error_type=_error_type_of(detail) or type(exc).__name__,
        retry_after=retry_after_seconds(response.headers) if response is not None else None,
    )


def _exception_text(exc: BaseException) -> str:
    """The SDK's text, plus the underlying cause for connection-level failures."""
    text = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


def _full_body(exc: openai.OpenAIError, response: Any) -> Any:
    """The whole parsed JSON body (the SDK keeps only its ``error`` member), else what the SDK kept."""
    if response is not None:
        try:
            return response.json()
        except Exception:  # a body that is not JSON, or was never read
            pass
    return getattr(exc, "body", None)


def _error_detail(body: Any) -> Any:
    if isinstance(body, Mapping) and "error" in body:
        return body["error"]
    return body


def _message_of(detail: Any, body: Any) -> str | None:
    if isinstance(detail, str) and detail.strip():
        return detail.strip()
    for source in (detail, body):
        if isinstance(source, Mapping):
            for key in ("message", "detail", "error_description"):
                value = source.get(key)
                if isinstance(value, str) and value.strip():
                    return value.strip()
    return None


def _error_type_of(detail: Any) -> str | None:
    """A symbolic error code is more specific than a category; a numeric one says less than the type."""
    if not isinstance(detail, Mapping):
        return None
    code = detail.get("code")
    if isinstance(code, str) and code and not code.isdigit():
        return code
    kind = detail.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return str(code) if code not in (None, "") else None


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)

