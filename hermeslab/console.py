"""A terminal transcript: one more subscriber to the event bus."""

from __future__ import annotations

import sys
from typing import TextIO

from .core.events import (
    ApiCallFinished,
    CompressionEvent,
    ErrorEvent,
    Event,
    Notice,
    RecoveryEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)


def _one_line(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ConsoleTranscript:
    """Streams assistant text and prints tool calls, compressions and a token line per turn."""

    def __init__(self, out: TextIO | None = None, *, context_length: int = 0):
        self.out = out or sys.stdout
        self.context_length = context_length
        self._mid_line = False
        self._last_prompt = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if not event.reasoning:
                self._write(event.text)
                self._mid_line = not event.text.endswith("\n")
            return
        if isinstance(event, ApiCallFinished):
            self._last_prompt = event.prompt_tokens or self._last_prompt
            return
        self._end_line()
        if isinstance(event, ToolCallStarted):
            self._write(f"  → {event.name}({_one_line(event.arguments, 80)})\n")
        elif isinstance(event, ToolCallFinished):
            mark = "✗" if event.is_error else "←"
            self._write(f"  {mark} {_one_line(event.result)}\n")
        elif isinstance(event, CompressionEvent):
            self._write(f"  ⇢ compressed ({event.trigger}): {event.tokens_before:,} → {event.tokens_after:,} tokens\n")
        elif isinstance(event, RecoveryEvent):
            self._write(f"  ↻ {event.fault_class}: {event.action} ({event.outcome})\n")
        elif isinstance(event, ErrorEvent):
            self._write(f"  ! {event.error_class}: {_one_line(event.message)}\n")
        elif isinstance(event, Notice):
            self._write(f"  · {event.text}\n")
        elif isinstance(event, TurnFinished):
            share = ""
            if self.context_length:
                share = f" · context {self._last_prompt:,}/{self.context_length:,} ({self._last_prompt / self.context_length:.1%})"
            self._write(
                f"[turn {event.turn} · {event.status} · {event.api_calls} calls · prompt {event.prompt_tokens:,}"
                f" · completion {event.completion_tokens:,}{share}]\n\n"
            )

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
