"""What one user turn produces, and the signal that stops it early."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .core.provider import Usage


class TurnInterrupted(Exception):
    """Raised inside the loop when the user asked to stop."""


@dataclass
class TurnResult:
    text: str
    #: ``completed``, ``interrupted``, ``max_iterations`` or ``failed``.
    status: str
    #: The messages the turn added to the history, in order.
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: Usage summed over the turn's calls (provider-reported, or estimated where a call reported none).
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    error: str | None = None

    def add_usage(self, usage: Usage) -> None:
        for name in ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens",
                     "reasoning_tokens"):
            setattr(self.usage, name, getattr(self.usage, name) + getattr(usage, name))
