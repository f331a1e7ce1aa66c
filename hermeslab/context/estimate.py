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
from typing import Any, Callable, Sequence

from hermeslab.core.config import CompressionConfig, ConfigError
from hermeslab.core.tokens import default_counter

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


def rough_messages_tokens(messages: Sequence[dict]) -> int:
    """Hermes's whole-list estimate: the repr length of every message / 4, images at a flat rate."""
    chars = 0
    images = 0
    for message in messages:
        shadow, count = _without_images(message)
        chars += len(str(shadow))
        images += count
    return (chars + 3) // 4 + images * ROUGH_LIST_IMAGE_TOKENS


def tiktoken_message_tokens(message: dict) -> int:
    return default_counter.count_message(message)


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
