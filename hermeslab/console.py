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
from .core.figures import compression_sizes, counted_note, estimate_note, tokens


#: An error is printed whole up to this many characters: its remedy is usually its last sentence.
ERROR_CHARS = 2_000


def _one_line(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ConsoleTranscript:
    """Streams assistant text and prints tool calls, compressions and a token line per turn.

    The turn line's ``prompt`` is the last call's prompt (what it sent, tool
    schemas included), as the usage plot draws it; ``in``/``out`` are the
    turn's totals over all its calls. Estimated figures carry a ``~`` and a note;
    figures the server's tokenizer counted carry a note of their own.
    """

    def __init__(self, out: TextIO | None = None, *, context_length: int = 0):
        self.out = out or sys.stdout
        self.context_length = context_length
        self._mid_line = False
        self._last_prompt = 0
        self._last_estimated = False
        self._estimated_calls = 0
        self._counted_calls: dict[str, int] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if not event.reasoning:
                self._write(event.text)
                self._mid_line = not event.text.endswith("\n")
            return
        if isinstance(event, ApiCallFinished):
            if event.purpose != "turn":
                return
            self._estimated_calls += int(event.usage_estimated)
            if event.usage_source and not event.usage_estimated:
                self._counted_calls[event.usage_source] = self._counted_calls.get(event.usage_source, 0) + 1
            if event.error_class is None and event.prompt_tokens:
                self._last_prompt, self._last_estimated = event.prompt_tokens, event.usage_estimated
            return
        self._end_line()
        if isinstance(event, ToolCallStarted):
            self._write(f"  → {event.name}({_one_line(event.arguments, 80)})\n")
        elif isinstance(event, ToolCallFinished):
            mark = "✗" if event.is_error else "←"
            self._write(f"  {mark} {_one_line(event.result)}\n")
        elif isinstance(event, CompressionEvent):
            done = "changed nothing" if event.mode == "none" else "compressed"
            self._write(f"  ⇢ {done} ({event.trigger}): {compression_sizes(event)}\n")
        elif isinstance(event, RecoveryEvent):
            self._write(f"  ↻ {event.fault_class}: {event.action} ({event.outcome})\n")
        elif isinstance(event, ErrorEvent):
            self._write(f"  ! {event.error_class}: {_one_line(event.message, ERROR_CHARS)}\n")
        elif isinstance(event, Notice):
            self._write(f"  · {event.text}\n")
        elif isinstance(event, TurnFinished):
            self._write(f"[{self._turn_line(event)}]\n\n")
            self._estimated_calls = 0
            self._counted_calls = {}

    def _turn_line(self, event: TurnFinished) -> str:
        estimated = self._estimated_calls > 0
        parts = [f"turn {event.turn}", event.status, f"{event.api_calls} call{'s' if event.api_calls != 1 else ''}"]
        if self._last_prompt:
            share = (f" ({self._last_prompt / self.context_length:.1%} of the {self.context_length:,} window)"
                     if self.context_length else "")
            parts.append(f"prompt {tokens(self._last_prompt, self._last_estimated)} tokens{share}")
        parts.append(f"turn total in {tokens(event.prompt_tokens, estimated)}"
                     f" / out {tokens(event.completion_tokens, estimated)}")
        notes = (estimate_note(self._estimated_calls, event.api_calls, stopped=event.status == "interrupted"),
                 counted_note(self._counted_calls, event.api_calls))
        return " · ".join(parts + [note for note in notes if note])

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
