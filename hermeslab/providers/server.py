"""A local OpenAI-compatible HTTP server that hosts any Provider.

Serving a provider over real HTTP lets the default setup (the offline model)
take exactly the path a hosted model takes: the ``openai`` SDK, JSON and
server-sent events, status codes and headers. Tests use it the same way to
check the client against a server whose every byte they control.

Only the standard library is used (``http.server``). Streams are sent with
chunked transfer encoding, so a stream the server abandons half-way is seen
by the client as a broken response rather than a short, complete one.

Given a personality (``personalities.py``), the server answers the way one
kind of real server does: llama-cpp-python, llama-server, vLLM, Ollama or
OpenAI, each with its own refusals, streams and tool_choice semantics.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import itertools
import json
import logging
import math
import socket
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Iterator, Mapping

from ..core.messages import MessageValidationError, text_of, validate_messages, wire_message
from ..core.provider import ChatRequest, ChatResponse, Provider, ProviderError, StreamDelta, Usage
from ..core.tokens import count_text
from .chat_template import tokenizer_reply
from .personalities import (OutputLimited, Personality, Slot, personality_named, prepared, prompt_tokens, props_body,
                            timings_body)

log = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
#: llama-server's routes that describe the server: its settings, and what each slot is doing.
PROPS_PATH, SLOTS_PATH = "/props", "/slots"
#: Characters of tool-call arguments per streamed fragment.
ARGUMENT_FRAGMENT_CHARS = 16
#: Request keys the server interprets; every other key is passed to the provider in ``ChatRequest.extra``.
_KNOWN_KEYS = frozenset(
    {"model", "messages", "tools", "max_tokens", "max_completion_tokens", "temperature", "stream", "stream_options"}
)
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


@dataclass
class Reply:
    """What the server sends for one request: a JSON document, or a stream of chunks.

    ``chunks`` are the objects sent as ``data:`` events, followed by ``data: [DONE]``.
    If the chunk iterator raises, the response is abandoned without its end,
    which is what a client sees when a connection drops mid-stream. ``drop``
    resets the connection without any response, as a failing proxy does.
    """

    status: int = 200
    body: Any = None
    chunks: Iterator[dict[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False


def json_bytes(value: Any) -> bytes:
    """UTF-8 JSON; text with lone surrogates (which UTF-8 cannot carry) is sent as ``\\u`` escapes, as JSON allows."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


def error_reply(status: int, message: str, *, code: str | None = None, headers: Mapping[str, str] | None = None) -> Reply:
    """An error in OpenAI's shape: ``{"error": {"message", "type", "code"}}``."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    return Reply(status=status, body={"error": {"message": message, "type": kind, "code": code}}, headers=dict(headers or {}))


def provider_error_reply(exc: ProviderError) -> Reply:
    """A hosted provider's failure with its status; no status means the upstream failed (502)."""
    status = exc.status if exc.status is not None and 400 <= exc.status <= 599 else 502
    headers: dict[str, str] = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(math.ceil(exc.retry_after))
        headers["retry-after-ms"] = str(round(exc.retry_after * 1000))
    return error_reply(status, exc.message, code=exc.error_type, headers=headers)


# ---------------------------------------------------------------- request → ChatRequest


def chat_request_from(payload: Mapping[str, Any]) -> ChatRequest:
    """Validate a chat-completions body; ValueError says which field is wrong and why."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list of chat messages")
    try:
        validate_messages(messages)
    except MessageValidationError as exc:
        raise ValueError(f"invalid 'messages': {exc}") from None
    model = payload.get("model", "")
    if not isinstance(model, str):
        raise ValueError(f"'model' must be a string, got {type(model).__name__}")
    tools = payload.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise ValueError("'tools' must be a list of tool objects")
    max_tokens = payload.get("max_tokens", payload.get("max_completion_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError(f"'max_tokens' must be a positive integer, got {max_tokens!r}")
    temperature = payload.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))):
        raise ValueError(f"'temperature' must be a number, got {temperature!r}")
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise ValueError(f"'stream' must be true or false, got {stream!r}")
    options = payload.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ValueError("'stream_options' must be an object")
    return ChatRequest(
        messages=messages,
        model=model,
        tools=tools or None,
        max_tokens=max_tokens,
        temperature=float(temperature) if temperature is not None else None,
        extra={key: value for key, value in payload.items() if key not in _KNOWN_KEYS},
    )


# ---------------------------------------------------------------- ChatResponse → OpenAI JSON


def usage_body(usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
    if usage.cache_write_tokens:
        body["cache_creation_input_tokens"] = usage.cache_write_tokens
    return body


def completion_body(response: ChatResponse, model: str, completion_id: str, created: int) -> dict[str, Any]:
    message = wire_message(response.message)
    message["role"] = "assistant"
    message.setdefault("content", None)
    if response.reasoning:
        message["reasoning_content"] = response.reasoning
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": response.model or model,
        "choices": [{"index": 0, "message": message, "finish_reason": response.finish_reason or "stop", "logprobs": None}],
    }
    if response.usage is not None:
        body["usage"] = usage_body(response.usage)
    return body


def stream_chunks(
    items: Iterable[StreamDelta | ChatResponse], model: str, completion_id: str, created: int, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """Turn a provider's stream into OpenAI chunks: role, text, tool-call fragments, finish, usage.

    Tool calls are only known from the final ChatResponse, so they are sent
    after the text, each as a header fragment (index, id, type, name) followed
    by argument fragments.
    """

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    sent_text = sent_reasoning = False
    response: ChatResponse | None = None
    for item in items:
        if isinstance(item, ChatResponse):
            response = item
            break
        if item.reasoning:
            sent_reasoning = True
            yield chunk({"reasoning_content": item.reasoning})
        if item.text:
            sent_text = True
            yield chunk({"content": item.text})
    if response is None:
        raise RuntimeError("the hosted provider's stream ended without a final response")
    if response.reasoning and not sent_reasoning:
        yield chunk({"reasoning_content": response.reasoning})
    text = text_of(response.message)
    if text and not sent_text:
        yield chunk({"content": text})
    for index, call in enumerate(response.message.get("tool_calls") or []):
        function = call.get("function") or {}
        yield chunk({"tool_calls": [{
            "index": index, "id": call.get("id"), "type": call.get("type", "function"),
            "function": {"name": function.get("name", ""), "arguments": ""},
        }]})
        arguments = function.get("arguments") or ""
        for start in range(0, len(arguments), ARGUMENT_FRAGMENT_CHARS):
            piece = arguments[start:start + ARGUMENT_FRAGMENT_CHARS]
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, response.finish_reason or "stop")
    if include_usage and response.usage is not None:
        usage_chunk = chunk({})
        usage_chunk.update(model=response.model or model, choices=[], usage=usage_body(response.usage))
        yield usage_chunk


# ---------------------------------------------------------------- the endpoint


class CompletionEndpoint:
    """Answers one chat-completions request with a Reply, using the hosted provider.

    This is the seam for fault injection. The HTTP layer numbers chat requests
    from 0 and calls ``respond(call_index, payload)`` for each one. A layer that
    wants chosen calls to fail subclasses (or wraps) this class and returns its
    own Reply for those indices (an error status with headers, a crafted body,
    a chunk iterator that raises to cut the stream, or a reply delivered late),
    delegating every other call to this implementation; it is installed by
    assigning it to ``LocalServer.endpoint``.
    """

    def __init__(self, provider: Provider):
        self.provider = provider

    def respond(self, call_index: int, payload: Mapping[str, Any]) -> Reply:
        try:
            request = chat_request_from(payload)
        except ValueError as exc:
            return error_reply(400, str(exc))
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        request.model = request.model or getattr(self.provider, "model", None) or self.provider.name
        try:
            if payload.get("stream"):
                include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
                return self._streamed(request, completion_id, created, include_usage)
            response = self.provider.complete(request)
            return Reply(body=completion_body(response, request.model, completion_id, created))
        except ProviderError as exc:
            return provider_error_reply(exc)
        except Exception as exc:  # a hosted provider's bug must become a 500, not a dead connection
            log.exception("hosted provider %s failed on call %d", self.provider.name, call_index)
            return error_reply(500, f"the hosted provider failed: {type(exc).__name__}: {exc}")

    def _streamed(self, request: ChatRequest, completion_id: str, created: int, include_usage: bool) -> Reply:
        """Start the provider's stream; a failure before its first item is still an HTTP error."""
        items = iter(self.provider.stream(request))
        try:
            first = next(items)
        except StopIteration:
            return error_reply(500, "the hosted provider's stream ended without a response")

        def chunks() -> Iterator[dict[str, Any]]:
            try:
                yield from stream_chunks(itertools.chain([first], items), request.model, completion_id, created,
                                         include_usage)
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()

        return Reply(chunks=chunks(), headers=dict(SSE_HEADERS))


# ---------------------------------------------------------------- HTTP


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], owner: "LocalServer"):
        self.owner = owner
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a stopped stream, a closed client) is normal, not a server fault."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            log.debug("client %s went away: %s", client_address, error)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Routes requests, checks the key, and writes Replies as JSON or chunked SSE."""

    protocol_version = "HTTP/1.1"
    #: Seconds an idle keep-alive connection is held open.
    timeout = 60
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
        log.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        if not self._authorised():
            return
        path = self._path()
        owner = self.server.owner
        if path == MODELS_PATH:
            model = owner.model_name
            self._send(Reply(body={"object": "list", "data": [
                {"id": model, "object": "model", "created": 0, "owned_by": "hermeslab"}]}))
        elif path in (PROPS_PATH, SLOTS_PATH) and owner.personality is not None and owner.personality.reports_props:
            self._send(Reply(body=owner.props() if path == PROPS_PATH else owner.slot_states()))
        else:
            self._send(error_reply(404, f"no such endpoint: GET {path}"))

    def do_POST(self) -> None:
        raw = self._read_body()
        if raw is None or not self._authorised():
            return
        path = self._path()
        if path != CHAT_PATH:
            self._send(self.server.owner.tokenizer_route(path, raw))
            return
        call_index = self.server.owner._next_call_index()
        if not raw.strip():
            self._send(error_reply(400, "the request body is empty; send a JSON chat-completions request"))
            return
        try:
            payload = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            reason = f"{exc.msg} at position {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
            self._send(error_reply(400, f"the request body is not valid JSON: {reason}"))
            return
        if not isinstance(payload, dict):
            self._send(error_reply(400, f"the request body must be a JSON object, got {type(payload).__name__}"))
            return
        with self.server.owner.serving():
            self._send(self.server.owner.respond(call_index, payload))

    # ------------------------------------------------------------ helpers

    def _path(self) -> str:
        path = self.path.split("?", 1)[0]
        return path.rstrip("/") or "/"

    def _read_body(self) -> bytes | None:
        """The request body; without a usable Content-Length the connection cannot be reused."""
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            self.close_connection = True
            return b""
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            self._send(error_reply(400, f"invalid Content-Length header: {length_text!r}"))
            return None
        return self.rfile.read(length)

    def _authorised(self) -> bool:
        key = self.server.owner.api_key
        if key is None:
            return True
        sent = self.headers.get("Authorization", "")
        if hmac.compare_digest(sent.encode(), f"Bearer {key}".encode()):
            return True
        self._send(error_reply(401, "missing or invalid API key: send 'Authorization: Bearer <key>'",
                               code="invalid_api_key"))
        return False

    def _send(self, reply: Reply) -> None:
        if reply.drop:
            self._reset_connection()
            return
        try:
            if reply.chunks is not None:
                self._send_stream(reply, reply.chunks)
            else:
                self._send_json(reply)
        except ConnectionError:
            self.close_connection = True
            log.debug("client closed the connection before the reply was complete")

    def _reset_connection(self) -> None:
        """Close with a TCP reset: with a zero linger time the kernel discards the socket instead of ending it."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _send_json(self, reply: Reply) -> None:
        data = json_bytes(reply.body)
        self.send_response(reply.status)
        headers = {"Content-Type": "application/json", **reply.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, reply: Reply, chunks: Iterator[dict[str, Any]]) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        delay = self.server.owner.chunk_delay
        try:
            for number, chunk in enumerate(chunks):
                if number and delay:
                    time.sleep(delay)
                self._write_chunk(b"data: " + json_bytes(chunk) + b"\n\n")
        except ConnectionError:
            raise
        except Exception as exc:  # the stream is abandoned on purpose: no [DONE], no final chunk
            self.close_connection = True
            log.info("stream cut after a failure in the reply: %s: %s", type(exc).__name__, exc)
            return
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode("ascii") + data + b"\r\n")


def _timed(chunks: Iterator[dict[str, Any]], prompt: int, started: float) -> Iterator[dict[str, Any]]:
    """llama-server's stream: the chunk that finishes the reply carries the reply's ``timings``."""
    generated = 0
    try:
        for chunk in chunks:
            choices = chunk.get("choices") or []
            for choice in choices:
                generated += count_text((choice.get("delta") or {}).get("content") or "")
            if any(choice.get("finish_reason") for choice in choices):
                chunk = {**chunk, "timings": timings_body(prompt, generated, time.perf_counter() - started)}
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


class LocalServer:
    """Hosts a Provider at ``http://host:port/v1`` in a background thread.

    ``calls`` counts the chat-completion requests received (thread-safe); each
    one's zero-based position is the ``call_index`` passed to ``endpoint``.

    With a ``personality`` (a name from ``personalities.PERSONALITIES``) the
    server answers as that kind of server does, around whatever endpoint is
    installed; ``context_window`` is then the window it enforces its way,
    ``slots`` how many requests it serves at once (others wait their turn; the
    personality's number by default) and ``supports_tools=False`` a chat
    template that drops tool schemas. ``max_in_flight`` is the most chat
    requests that were ever open at once, waiting or served.
    """

    def __init__(
        self,
        provider: Provider,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        chunk_delay: float = 0.0,
        api_key: str | None = None,
        personality: str | Personality | None = None,
        context_window: int | None = None,
        slots: int | None = None,
        supports_tools: bool | None = None,
    ):
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, got {port}")
        if chunk_delay < 0:
            raise ValueError(f"chunk_delay must be zero or positive, got {chunk_delay}")
        if context_window is not None and context_window < 1:
            raise ValueError(f"context_window must be a positive number of tokens, got {context_window}")
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be a positive number of requests, got {slots}")
        self.personality = personality_named(personality)
        if self.personality is not None and (slots is not None or supports_tools is not None):
            self.personality = dataclasses.replace(
                self.personality, slots=slots if slots is not None else self.personality.slots,
                supports_tools=self.personality.supports_tools if supports_tools is None else supports_tools)
        if self.personality is not None:
            provider = OutputLimited(provider, self.personality.cut_tool_call_finish)
        self.provider = provider
        self.host = host
        self.port = port
        self.chunk_delay = chunk_delay
        self.api_key = api_key
        self.context_window = context_window
        self.endpoint = CompletionEndpoint(provider)
        self._slot = Slot()
        served = self.personality.slots if self.personality is not None else None
        self._gate = threading.BoundedSemaphore(served) if served else None
        self._in_flight = self._max_in_flight = self._busy = self._tasks = 0
        self._calls = 0
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls

    def _next_call_index(self) -> int:
        with self._lock:
            self._calls += 1
            return self._calls - 1

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """One chat request from arrival to its reply's last byte: counted open, and served in a free slot."""
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            if self._gate is not None:
                self._gate.acquire()
            try:
                with self._lock:
                    self._busy += 1
                try:
                    yield
                finally:
                    with self._lock:
                        self._busy -= 1
                        self._tasks += 1
            finally:
                if self._gate is not None:
                    self._gate.release()
        finally:
            with self._lock:
                self._in_flight -= 1

    def props(self) -> dict[str, Any]:
        """``GET /props`` of a personality that reports it."""
        assert self.personality is not None
        return props_body(self.personality, model=self.model_name, window=self.context_window,
                          slots=self.personality.slots or 1)

    def slot_states(self) -> list[dict[str, Any]]:
        """``GET /slots``: each slot, whether it is busy, and the number of the latest task it served."""
        assert self.personality is not None
        with self._lock:
            busy, tasks = self._busy, self._tasks
        return [{"id": index, "n_ctx": self.context_window or 0, "is_processing": index < busy,
                 "id_task": tasks + busy - 1} for index in range(self.personality.slots or 1)]

    def respond(self, call_index: int, payload: Mapping[str, Any]) -> Reply:
        """The endpoint's reply to one request, as the server's personality gives it."""
        personality = self.personality
        if personality is None:
            return self.endpoint.respond(call_index, payload)
        held = self._slot.take() if personality.single_slot else None
        request, refusal = prepared(personality, payload, self.context_window)
        if refusal is not None:
            status, body = refusal
            if payload.get("stream") and not personality.streamed_errors_have_status:
                return Reply(chunks=iter(()), headers=dict(SSE_HEADERS))
            return Reply(status=status, body=body)
        started = time.perf_counter()
        reply = self.endpoint.respond(call_index, request)
        if held is not None and reply.chunks is not None:
            reply.chunks = self._slot.guarded(reply.chunks, held)
        if personality.reports_props:
            prompt = prompt_tokens(request)
            if reply.chunks is not None:
                reply.chunks = _timed(reply.chunks, prompt, started)
            elif isinstance(reply.body, dict) and reply.body.get("choices"):
                generated = (reply.body.get("usage") or {}).get("completion_tokens") or 0
                reply.body["timings"] = timings_body(prompt, generated, time.perf_counter() - started)
        return reply

    def tokenizer_route(self, path: str, raw: bytes) -> Reply:
        """A tokenizer route the personality's server offers (at the root, beside ``/v1``), else a 404."""
        if self.personality is None or self.personality.tokenizer is None:
            return error_reply(404, f"no such endpoint: POST {path}")
        try:
            payload = json.loads(raw) if raw.strip() else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            payload = None
        answer = tokenizer_reply(self.personality, path, payload if isinstance(payload, dict) else {})
        if answer is None:
            return error_reply(404, f"no such endpoint: POST {path}")
        status, body = answer
        return Reply(status=status, body=body)

    @property
    def model_name(self) -> str:
        return getattr(self.provider, "model", None) or self.provider.name

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not running; call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> str:
        """Bind (port 0: a free port) and serve in a daemon thread; returns the base URL."""
        if self._httpd is not None:
            return self.base_url
        try:
            httpd = _HTTPServer((self.host, self.port), self)
        except OSError as exc:
            raise OSError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from exc
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name=f"hermeslab-server-{self.port}", daemon=True
        )
        self._thread.start()
        return self.base_url

    def serve_forever(self) -> None:
        """Block until ``stop()`` is called from another thread (or Ctrl+C reaches the caller)."""
        self.start()
        thread = self._thread
        while thread is not None and thread.is_alive():
            thread.join(0.5)

    def stop(self) -> None:
        """Stop accepting requests and close the listening socket; safe to call twice."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = None
        self._thread = None
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> "LocalServer":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
