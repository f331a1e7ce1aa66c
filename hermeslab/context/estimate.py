"""Per-message and per-list token estimates the pipeline makes its budget decisions with.

Two families, chosen by ``compression.estimator``:

* ``tiktoken`` — cl100k counts from the shared cached counter (hermeslab's default);
* ``rough`` — Hermes's own character arithmetic, reproduced exactly because its
  boundary decisions depend on it: per message ``content_chars // 4 + 10`` plus
  ``len(str(call)) // 4`` per tool call (the repr of the whole call dict) plus
  the replayed reasoning fields, with an image part counted as 6,400 characters;
  per list, ``(sum of len(str(message)) + 3) // 4`` plus 1,500 tokens per image.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Sequence

from hermeslab.core.config import CompressionConfig, ConfigError
from hermeslab.core.tokens import REPLY_PRIMING, bounded_put, default_counter

MessageEstimate = Callable[[dict], int]
ListEstimate = Callable[[Sequence[dict]], int]

#: Characters one image part is worth in the rough per-message walk (1,600 tokens).
ROUGH_IMAGE_CHARS = 6_400
#: Tokens one image part is worth in the rough whole-list estimate.
ROUGH_LIST_IMAGE_TOKENS = 1_500
#: Per-message framing the rough walk adds.
ROUGH_MESSAGE_OVERHEAD = 10
#: Fields some providers need replayed verbatim; they occupy the window like content.
REPLAY_FIELDS = ("reasoning", "reasoning_content", "reasoning_details", "codex_reasoning_items",
                 "codex_message_items")
_IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image"})


def is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in _IMAGE_PART_TYPES


def _rough_content_chars(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        chars = 0
        for part in content:
            if is_image_part(part):
                chars += ROUGH_IMAGE_CHARS
            elif isinstance(part, dict):
                chars += len(str(part.get("text", "") or ""))
            else:
                chars += len(str(part))
        return chars
    return len(str(content))


def _serialised_length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


def rough_message_tokens(message: dict) -> int:
    """Hermes's budget-walk estimate of one message."""
    tokens = _rough_content_chars(message.get("content")) // 4 + ROUGH_MESSAGE_OVERHEAD
    for call in message.get("tool_calls") or ():
        tokens += len(str(call)) // 4
    for key in REPLAY_FIELDS:
        value = message.get(key)
        if value:
            tokens += _serialised_length(value) // 4
    return tokens


def _without_images(message: dict) -> tuple[dict, int]:
    content = message.get("content")
    if not isinstance(content, list) or not any(is_image_part(p) for p in content):
        return message, 0
    images = sum(1 for p in content if is_image_part(p))
    shadow = dict(message)
    shadow["content"] = [p if not is_image_part(p) else {"type": p.get("type")} for p in content]
    return shadow, images


class _ReprSizes:
    """``(len(str(message)), images)`` per message object, remembered by identity.

    The whole-list estimate runs before every model call on a growing history,
    and the repr of a long tool result costs far more than a lookup. A message
    seen again is the same dict (hermeslab never edits inside one); the entry is
    still checked against the message's content, calls and key count, and keeps
    the message alive so its id cannot be reused. The repr length of a long
    content string is remembered too, since a replay puts the same recorded
    texts into new message dicts every time: such a message is measured as
    its other items plus that length. Full: the oldest tenth goes.
    """

    #: Content shorter than this is measured with its message (cheaper than remembering it).
    LONG_STRING = 256

    def __init__(self, max_entries: int = 20_000, max_strings: int = 100_000):
        self._seen: dict[int, tuple[dict, Any, Any, int, int, int]] = {}
        self._strings: dict[int, tuple[str, int]] = {}
        self._max_entries = max_entries
        self._max_strings = max_strings
        self._lock = threading.Lock()

    def __call__(self, message: dict) -> tuple[int, int]:
        entry = self._seen.get(id(message))
        if (entry is not None and entry[0] is message and entry[1] is message.get("content")
                and entry[2] is message.get("tool_calls") and entry[3] == len(message)):
            return entry[4], entry[5]
        shadow, images = _without_images(message)
        chars = self._dict_length(shadow)
        with self._lock:
            bounded_put(self._seen, id(message), (message, message.get("content"), message.get("tool_calls"), len(message),
                                           chars, images), self._max_entries)
        return chars, images

    def _dict_length(self, message: dict) -> int:
        content = message.get("content") if type(message) is dict else None
        if type(content) is not str or len(content) < self.LONG_STRING:
            return len(str(message))
        rest = dict(message)
        rest["content"] = ""  # repr "''": two characters in place of the content's repr
        return len(str(rest)) - 2 + self._repr_length(content)

    def _repr_length(self, text: str) -> int:
        entry = self._strings.get(id(text))
        if entry is not None and entry[0] is text:
            return entry[1]
        size = len(repr(text))
        with self._lock:
            bounded_put(self._strings, id(text), (text, size), self._max_strings)
        return size


_repr_sizes = _ReprSizes()


def rough_list_share(message: dict) -> tuple[int, int]:
    """What one message adds to the whole-list estimate: (repr characters without images, images)."""
    return _repr_sizes(message)


#: The last list measured (a copy) with its summed sizes. A history that only grew since (the list
#: compares equal up to its old length, a C-speed check) costs only its new messages.
_last_list: tuple[list[dict], int, int] = ([], 0, 0)


def rough_messages_tokens(messages: Sequence[dict]) -> int:
    """Hermes's whole-list estimate: the repr length of every message / 4, images at a flat rate."""
    global _last_list
    last, chars, images = _last_list
    start = len(last)
    if not start or len(messages) < start or messages[start - 1] is not last[-1] or messages[:start] != last:
        start, chars, images = 0, 0, 0
    for message in messages[start:]:
        size, count = _repr_sizes(message)
        chars += size
        images += count
    _last_list = (list(messages), chars, images)
    return (chars + 3) // 4 + images * ROUGH_LIST_IMAGE_TOKENS


def tiktoken_message_tokens(message: dict) -> int:
    """The cached count, without holding the message by identity: the phases measure the
    pipeline's short-lived copies, while the conversation's own messages are already held."""
    return default_counter.count_message(message, remember=False)


def tiktoken_messages_tokens(messages: Sequence[dict]) -> int:
    return default_counter.count_messages(messages)


_ESTIMATORS: dict[str, tuple[MessageEstimate, ListEstimate]] = {
    "rough": (rough_message_tokens, rough_messages_tokens),
    "tiktoken": (tiktoken_message_tokens, tiktoken_messages_tokens),
}


def _estimators(cfg: CompressionConfig) -> tuple[MessageEstimate, ListEstimate]:
    try:
        return _ESTIMATORS[cfg.estimator]
    except KeyError:
        raise ConfigError(f"compression.estimator: expected tiktoken or rough, got {cfg.estimator!r}") from None


def message_estimator(cfg: CompressionConfig) -> MessageEstimate:
    """The per-message estimate the budget walks use under this config."""
    return _estimators(cfg)[0]


def list_estimator(cfg: CompressionConfig) -> ListEstimate:
    """The whole-list estimate (before/after totals) under this config."""
    return _estimators(cfg)[1]


#: Estimators whose whole-list estimate is the sum of the per-message ones plus this constant.
_LIST_OVERHEAD = {"tiktoken": REPLY_PRIMING}


def summed_list_estimator(cfg: CompressionConfig, sizes: MessageEstimate) -> ListEstimate:
    """``list_estimator(cfg)`` computed from ``sizes`` where the estimator is such a sum.

    The totals before and after a compression then reuse the sizes the phases
    already measured; the ``rough`` list estimate is not a sum and is kept as is.
    """
    overhead = _LIST_OVERHEAD.get(cfg.estimator)
    if overhead is None:
        return list_estimator(cfg)
    return lambda messages: sum(map(sizes, messages)) + overhead


class RememberedSizes:
    """A per-message estimate that measures each message object once.

    One compression sizes the same messages in several phases (prune boundary,
    tail walk, summary budget, totals); it makes one of these and hands it to
    each. Sizes are keyed by identity, and every message measured is held, so
    no other object can take its id; it lives for one compression, during
    which nothing is edited.
    """

    def __init__(self, measure: MessageEstimate):
        self.measure = measure
        self._sizes: dict[int, int] = {}
        self._held: list[dict] = []

    def __call__(self, message: dict) -> int:
        size = self._sizes.get(id(message))
        if size is None:
            size = self._sizes[id(message)] = self.measure(message)
            self._held.append(message)
        return size
