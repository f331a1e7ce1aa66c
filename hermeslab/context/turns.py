"""Reading a conversation as turns: who really spoke last, and where a cut may fall.

A cut between an assistant's tool calls and their results would leave the
provider with calls it cannot match, so every boundary goes through the
alignment functions here.
"""

from __future__ import annotations

from typing import Any, Sequence

from hermeslab.core.messages import text_of

from .types import is_summary_message


def is_synthetic(message: dict[str, Any]) -> bool:
    """Scaffolding the runtime injected (``_synthetic`` or any ``*_synthetic`` flag set)."""
    return any(value and (key == "_synthetic" or key.endswith("_synthetic"))
               for key, value in message.items() if key.startswith("_"))


def is_real_user_message(message: dict[str, Any]) -> bool:
    """A user message a person wrote: not a summary, not runtime scaffolding, not empty."""
    if message.get("role") != "user" or is_summary_message(message) or is_synthetic(message):
        return False
    content = message.get("content")
    return bool(text_of(message).strip()) or (isinstance(content, list) and bool(content))


def last_real_user_index(messages: Sequence[dict], start: int = 0) -> int | None:
    for index in range(len(messages) - 1, start - 1, -1):
        if is_real_user_message(messages[index]):
            return index
    return None


def first_real_user_index(messages: Sequence[dict]) -> int | None:
    for index, message in enumerate(messages):
        if is_real_user_message(message):
            return index
    return None


def has_tool_calls(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def align_forward(messages: Sequence[dict], index: int) -> int:
    """Move a start index past tool results, whose calls would lie before it."""
    while index < len(messages) and messages[index].get("role") == "tool":
        index += 1
    return index


def align_backward(messages: Sequence[dict], index: int) -> int:
    """Move a cut back to the assistant message whose tool results surround it."""
    probe = index - 1
    while probe >= 0 and messages[probe].get("role") == "tool":
        probe -= 1
    if probe >= 0 and has_tool_calls(messages[probe]):
        return probe
    return index


def turn_end(messages: Sequence[dict], user_index: int) -> int:
    """Index just past a user message, the assistant reply after it and that reply's tool results."""
    index = user_index + 1
    if index < len(messages) and messages[index].get("role") == "assistant":
        index += 1
        while index < len(messages) and messages[index].get("role") == "tool":
            index += 1
    return index


def last_assistant_reply_index(messages: Sequence[dict], start: int) -> int | None:
    """The newest assistant message with visible text at or after ``start``, else the newest assistant."""
    fallback = None
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        if message.get("role") != "assistant":
            continue
        if text_of(message).strip():
            return index
        if fallback is None:
            fallback = index
    return fallback
