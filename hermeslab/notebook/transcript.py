"""What one ``%%hermes`` cell shows: streamed text, tool cards and banners, as HTML and plain text.

A Transcript folds the events of one turn (or one ``%hermes compress``) into
blocks and renders them. It is ordinary output, not a widget, so the saved
notebook keeps it. Model text goes through ``markup`` (escaped, a Markdown
subset); tool arguments and results are shown escaped in ``<pre>`` blocks.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from ..core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    ErrorEvent,
    Event,
    Notice,
    RecoveryEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from ..core.figures import compression_sizes, counted_note, estimate_note, tokens
from .markup import escape, markdown_to_html

#: Characters of a tool result shown inside its card (the log keeps all of it).
RESULT_CHARS = 4_000
#: Characters of the argument summary in a card's title.
TITLE_ARGS_CHARS = 72

#: Banner kinds: icon (glyphs common fonts have, e.g. DejaVu), text colour, background.
_BANNER_STYLE = {
    "compression": ("⇢", "#6a4fb3", "#f3effc"),
    "recovery": ("↻", "#1f6fb2", "#eaf3fb"),
    "notice": ("•", "#555", "#f4f4f4"),
    "warning": ("⚠", "#9a6700", "#fff6e0"),
    "error": ("✗", "#b3261e", "#fdecea"),
    "waiting": ("⋯", "#555", "#f4f4f4"),
}


@dataclass
class Text:
    text: str = ""
    reasoning: bool = False


@dataclass
class ToolCard:
    call_id: str
    name: str
    arguments: str
    result: str | None = None
    is_error: bool = False
    duration_ms: float = 0.0


@dataclass
class Banner:
    kind: str
    text: str


@dataclass
class Transcript:
    """The blocks of one cell's work and its status; safe to feed from several threads."""

    #: ``waiting``, ``running``, then ``completed``, ``interrupted``, ``max_iterations``, ``failed``,
    #: ``compressed``, ``unchanged`` or ``stopped`` (stopped before it began).
    status: str = "running"
    blocks: list[Text | ToolCard | Banner] = field(default_factory=list)
    turn: int | None = None
    api_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Whether any of the turn's answered calls carries our estimate instead of the provider's usage.
    usage_estimated: bool = False
    estimated_calls: int = 0
    #: The turn's calls whose figures the server's tokenizer counted, by usage source.
    counted_calls: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    _new_call: bool = field(default=True, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # ------------------------------------------------------------ folding events

    def observe(self, event: Event) -> bool:
        """Fold one event in; True when the rendering changed."""
        with self._lock:
            return self._observe(event)

    def _observe(self, event: Event) -> bool:
        if isinstance(event, TextDelta):
            last = self.blocks[-1] if self.blocks else None
            if self._new_call or not isinstance(last, Text) or last.reasoning != event.reasoning:
                self.blocks.append(Text(reasoning=event.reasoning))
                self._new_call = False
            self.blocks[-1].text += event.text
        elif isinstance(event, ApiCallStarted):
            self._new_call = True
            return False
        elif isinstance(event, ApiCallFinished):
            if event.purpose == "turn" and event.usage_estimated:
                self.usage_estimated, self.estimated_calls = True, self.estimated_calls + 1
            elif event.purpose == "turn" and event.usage_source:
                self.counted_calls[event.usage_source] = self.counted_calls.get(event.usage_source, 0) + 1
            return False
        elif isinstance(event, ToolCallStarted):
            self.blocks.append(ToolCard(event.tool_call_id, event.name, event.arguments))
        elif isinstance(event, ToolCallFinished):
            card = self._card(event.tool_call_id)
            if card is None:
                card = ToolCard(event.tool_call_id, event.name, event.arguments)
                self.blocks.append(card)
            card.result, card.is_error, card.duration_ms = event.result, event.is_error, event.duration_ms
        elif isinstance(event, CompressionEvent):
            self.blocks.append(Banner("compression", compression_text(event)))
        elif isinstance(event, RecoveryEvent):
            outcome = f" ({event.outcome})" if event.outcome else ""
            self.blocks.append(Banner("recovery", f"recovery from {event.fault_class}: {event.action}"
                                                  f", attempt {event.attempt}{outcome}"))
        elif isinstance(event, Notice):
            self.blocks.append(Banner("warning" if event.level in ("warning", "error") else "notice", event.text))
        elif isinstance(event, ErrorEvent):
            self.blocks.append(Banner("error", f"{event.error_class}: {event.message}"))
        elif isinstance(event, TurnStarted):
            self.status, self.turn = "running", event.turn
        elif isinstance(event, TurnFinished):
            self.status, self.error = event.status, event.error
            self.api_calls, self.prompt_tokens = event.api_calls, event.prompt_tokens
            self.completion_tokens = event.completion_tokens
            if event.final_text and not any(isinstance(b, Text) and not b.reasoning for b in self.blocks):
                self.blocks.append(Text(event.final_text))
        else:
            return False
        return True

    def note(self, kind: str, text: str) -> Banner:
        """A banner that does not come from the agent (waiting for another turn, a failure here)."""
        if kind not in _BANNER_STYLE:
            raise ValueError(f"unknown banner kind {kind!r}; one of {sorted(_BANNER_STYLE)}")
        banner = Banner(kind, text)
        with self._lock:
            self.blocks.append(banner)
        return banner

    def finish(self, status: str) -> None:
        with self._lock:
            self.status = status

    def _card(self, call_id: str) -> ToolCard | None:
        return next((b for b in self.blocks if isinstance(b, ToolCard) and b.call_id == call_id), None)

    # ------------------------------------------------------------ rendering

    def to_html(self) -> str:
        with self._lock:
            parts = [_block_html(block) for block in self.blocks]
            parts.append(self._footer_html())
            return (f'<div class="hermeslab-transcript" data-status="{escape(self.status)}" '
                    f'style="font-size:13px;line-height:1.45">' + "".join(parts) + "</div>")

    def to_text(self) -> str:
        with self._lock:
            parts = [_block_text(block) for block in self.blocks]
            parts.append(f"[{self.footer()}]")
            return "\n".join(part for part in parts if part)

    def footer(self) -> str:
        """One line: where the work stands and what it cost."""
        with self._lock:
            if self.status in ("waiting", "running"):
                return "waiting for the turn before it" if self.status == "waiting" else "streaming…"
            if self.status in ("compressed", "unchanged", "stopped"):
                return {"compressed": "context compressed", "unchanged": "nothing to compress",
                        "stopped": "stopped before it started"}[self.status]
            turn = f"turn {self.turn} · " if self.turn is not None else ""
            calls = f"{self.api_calls} API call{'s' if self.api_calls != 1 else ''}"
            estimated = self.usage_estimated
            usage = (f"in {tokens(self.prompt_tokens, estimated)} / out {tokens(self.completion_tokens, estimated)}"
                     " tokens over the turn")
            stopped = self.status == "interrupted"
            notes = [note for note in (estimate_note(self.estimated_calls, self.api_calls, stopped=stopped),
                                       counted_note(self.counted_calls, self.api_calls)) if note]
            return " · ".join([f"{turn}{self.status}", calls, usage, *notes])

    def _footer_html(self) -> str:
        interrupted = ""
        if self.status == "interrupted":
            interrupted = ('<div class="hermeslab-interrupted" style="color:#b3261e;font-weight:600;margin:4px 0">'
                           "■ interrupted: the partial answer above is kept</div>")
        if self.error:
            interrupted += _banner_html(Banner("error", self.error))
        return (interrupted + f'<div class="hermeslab-footer" style="color:#777;font-size:11px;margin-top:4px">'
                f"{escape(self.footer())}</div>")


# ---------------------------------------------------------------- blocks


def compression_text(event: CompressionEvent) -> str:
    if event.mode == "none":
        return f"compression ({event.trigger}) changed nothing: {compression_sizes(event)}"
    where = (f"; continues in session {event.new_session_id}" if event.mode == "rotation" and event.new_session_id
             else "")
    fallback = "; summary by the fallback summariser" if event.fallback_used else ""
    return (f"context compressed ({event.trigger}): {compression_sizes(event)}, "
            f"{event.messages_before} → {event.messages_after} messages{where}{fallback}")


def argument_summary(arguments: str, limit: int = TITLE_ARGS_CHARS) -> str:
    """``key=value, ...`` for a JSON object of arguments, else the raw text; one line, clipped."""
    try:
        parsed: Any = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        text = ", ".join(f"{key}={_scalar(value)}" for key, value in parsed.items())
    else:
        text = arguments
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return arguments


def _clipped(text: str, limit: int = RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… {len(text) - limit:,} more characters (the lab database keeps all of them)"


def _block_html(block: Text | ToolCard | Banner) -> str:
    if isinstance(block, Text):
        if block.reasoning:
            return ('<details class="hermeslab-reasoning" style="color:#666"><summary>reasoning</summary>'
                    f"{markdown_to_html(block.text)}</details>")
        return f'<div class="hermeslab-text">{markdown_to_html(block.text)}</div>'
    if isinstance(block, ToolCard):
        return _card_html(block)
    return _banner_html(block)


def _card_html(card: ToolCard) -> str:
    if card.result is None:
        state, colour, outcome = "running", "#777", "running…"
    elif card.is_error:
        state, colour, outcome = "error", "#b3261e", f"✗ error · {card.duration_ms:,.0f} ms"
    else:
        state, colour, outcome = "ok", "#2e7d32", f"✓ {card.duration_ms:,.0f} ms"
    body = f"<div>arguments</div><pre>{escape(_pretty_arguments(card.arguments))}</pre>"
    if card.result is not None:
        body += f"<div>{'error' if card.is_error else 'result'}</div><pre>{escape(_clipped(card.result))}</pre>"
    return (f'<details class="hermeslab-tool hermeslab-tool-{state}" style="border:1px solid #ddd;'
            f'border-left:3px solid {colour};border-radius:4px;padding:2px 8px;margin:4px 0">'
            f'<summary style="cursor:pointer">⚙ <strong>{escape(card.name)}</strong> '
            f"<code>{escape(argument_summary(card.arguments))}</code> "
            f'<span style="color:{colour}">{escape(outcome)}</span></summary>'
            f'<div class="hermeslab-tool-body" style="font-size:12px">{body}</div></details>')


def _banner_html(banner: Banner) -> str:
    icon, colour, background = _BANNER_STYLE[banner.kind]
    return (f'<div class="hermeslab-banner hermeslab-banner-{banner.kind}" style="border-left:3px solid {colour};'
            f'background:{background};color:{colour};padding:3px 8px;margin:4px 0">{icon} {escape(banner.text)}</div>')


def _block_text(block: Text | ToolCard | Banner) -> str:
    if isinstance(block, Text):
        return f"(reasoning) {block.text}" if block.reasoning else block.text
    if isinstance(block, ToolCard):
        if block.result is None:
            outcome = "running"
        else:
            first = block.result.strip().splitlines()[0] if block.result.strip() else ""
            outcome = ("error: " if block.is_error else "") + (first[:100] + ("…" if len(first) > 100 else ""))
        return f"[tool {block.name}({argument_summary(block.arguments)}) → {outcome}]"
    return f"[{block.kind}: {block.text}]"
