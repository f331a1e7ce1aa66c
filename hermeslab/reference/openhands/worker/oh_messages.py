"""Reading the recorded chat messages the worker is given, the same way for every OpenHands family."""

from __future__ import annotations


def message_text(message: dict) -> str:
    """A message's text: its string content, or its text parts joined; empty when it has none."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
