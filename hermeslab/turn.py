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
        total = self.usage  # once per model call: plain attribute sums
        total.prompt_tokens += usage.prompt_tokens
        total.completion_tokens += usage.completion_tokens
        total.cache_read_tokens += usage.cache_read_tokens
        total.cache_write_tokens += usage.cache_write_tokens
        total.reasoning_tokens += usage.reasoning_tokens
