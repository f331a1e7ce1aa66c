"""Line input for ``hermeslab chat`` that a huge paste cannot flood.

A terminal without bracketed paste (``tmux paste-buffer``, many serial
consoles) delivers a paste as keystrokes: one insertion per character into an
ever longer line, each a full copy of it, and every line break an Enter. A
200 KB paste then takes minutes, grows memory without end and queues a
Ctrl-C behind all of it. Here the characters already waiting behind a
keystroke are inserted in one go, an Enter with more input right behind it
is a line break rather than a send, and the line holds at most
``MAX_INPUT_CHARS``: what goes past it is dropped and the toolbar says so.
History keeps only inputs a person could have typed (``HISTORY_MAX_CHARS``).
"""

from __future__ import annotations

import select
import time
from collections import deque
from dataclasses import dataclass
from math import inf
from typing import Any, Iterable

from prompt_toolkit.filters import emacs_insert_mode, vi_insert_mode
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPress
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Dimension

#: The longest input the line holds (characters); longer text belongs in a file the agent reads.
MAX_INPUT_CHARS = 100_000
#: Inputs longer than this (characters) are not written to the history file, nor read back from it.
HISTORY_MAX_CHARS = 10_000
#: The most rows the line being edited takes on screen; a longer input scrolls within them.
INPUT_ROWS = 20
#: The shortest time between two redraws of the input (seconds): a paste is drawn a few times, not per chunk.
REDRAW_INTERVAL = 0.5
#: How long a redraw waits while input keeps arriving (seconds): a paste is drawn when it has landed.
REDRAW_POSTPONE = 1.0
#: An Enter this soon after characters were dropped (seconds) is the end of the same paste.
OVERFLOW_GAP = 0.5
#: How long an Enter waits for more input before it counts as the end of a paste (seconds).
PASTE_GAP = 0.02

_LINE_BREAKS = (Keys.ControlM, Keys.ControlJ)


def take_burst(queue: deque[KeyPress]) -> str:
    """Pops the plain characters queued behind a keystroke and returns them as text.

    A line break counts only when more text follows it in the queue; the last
    one stays queued, so a typed-ahead ``text⏎`` still sends. Anything else (Ctrl-C, an
    arrow key, a cursor report) stops the burst and stays queued to be handled as usual.
    """
    taken: list[str] = []
    while queue:
        key = queue[0].key
        if key in _LINE_BREAKS and _text_follows(queue, 1):
            taken.append("\n")
        elif key == Keys.ControlI:
            taken.append("\t")
        elif isinstance(key, Keys):
            break
        else:
            taken.append(queue[0].data)
        queue.popleft()
    return "".join(taken)


def _text_follows(queue: deque[KeyPress], at: int) -> bool:
    """Whether the key at ``at`` is text (a character, tab or line break), as in a paste; not a cursor report."""
    if len(queue) <= at:
        return False
    key = queue[at].key
    return not isinstance(key, Keys) or key in _LINE_BREAKS or key == Keys.ControlI


def fit(text: str, room: int) -> tuple[str, int]:
    """What of ``text`` fits in ``room`` characters, and how many characters were dropped."""
    room = max(room, 0)
    return text[:room], max(len(text) - room, 0)


@dataclass
class InputLimit:
    """Characters dropped from the line being edited (for the toolbar to say so), and when the last were."""

    dropped: int = 0
    dropped_at: float = -inf

    def reset(self) -> None:
        """A new line: nothing dropped from it yet."""
        self.dropped, self.dropped_at = 0, -inf

    def drop(self, count: int, now: float) -> None:
        if count:
            self.dropped, self.dropped_at = self.dropped + count, now

    def in_overflow(self, now: float) -> bool:
        """Whether a paste is still overflowing: its closing Enter is dropped with it, not sent."""
        return now - self.dropped_at < OVERFLOW_GAP

    def toolbar(self) -> str | None:
        if not self.dropped:
            return None
        return (f"input limit: the line holds {MAX_INPUT_CHARS:,} characters and {self.dropped:,} more were dropped; "
                "Enter sends what is kept, Ctrl-C clears it; for longer text, save it to a file and ask for it to be read")


def key_bindings(limit: InputLimit) -> KeyBindings:
    """Esc+Enter for a line break, bounded insertion of typed and pasted text, and paste-aware Enter."""
    keys = KeyBindings()

    def insert(event: Any, text: str) -> None:
        buffer = event.current_buffer
        kept, dropped = fit(text, MAX_INPUT_CHARS - len(buffer.text))
        limit.drop(dropped, time.monotonic())
        if kept:
            buffer.insert_text(kept)

    @keys.add("escape", "enter")
    def _line_break(event: Any) -> None:
        insert(event, "\n")

    @keys.add(Keys.Any, filter=vi_insert_mode | emacs_insert_mode)
    def _characters(event: Any) -> None:
        insert(event, event.data * event.arg + take_burst(event.key_processor.input_queue))

    @keys.add(Keys.BracketedPaste)
    def _paste(event: Any) -> None:
        insert(event, event.data.replace("\r\n", "\n").replace("\r", "\n"))

    @keys.add("enter")
    def _enter(event: Any) -> None:
        queue = event.key_processor.input_queue
        if _text_follows(queue, 0) or (not queue and _input_waiting(event.app.input)):
            insert(event, "\n")  # more of a paste is arriving: this Enter was one of its line breaks
        elif limit.in_overflow(time.monotonic()):
            limit.drop(1, time.monotonic())  # the end of a paste that went past the limit: the user decides
        else:
            event.current_buffer.validate_and_handle()

    return keys


def cap_drawing(session: Any) -> None:
    """Draws at most ``INPUT_ROWS`` of the input, at most every ``REDRAW_INTERVAL``, so a paste is not echoed whole."""
    session.app.min_redraw_interval = REDRAW_INTERVAL
    session.app.max_render_postpone_time = REDRAW_POSTPONE
    for window in session.app.layout.find_all_windows():
        if getattr(window.content, "buffer", None) is session.default_buffer:
            window.height = Dimension(max=INPUT_ROWS)


def _input_waiting(source: Any) -> bool:
    """Whether more input arrives within ``PASTE_GAP``, as it does in the middle of a paste."""
    try:
        ready, _, _ = select.select([source.fileno()], [], [], PASTE_GAP)
    except (OSError, ValueError, NotImplementedError):
        return False
    return bool(ready)


class BoundedFileHistory(FileHistory):
    """A history file that keeps inputs up to ``HISTORY_MAX_CHARS`` and skips longer ones already in it."""

    def load_history_strings(self) -> Iterable[str]:
        return [text for text in super().load_history_strings() if len(text) <= HISTORY_MAX_CHARS]

    def store_string(self, string: str) -> None:
        if len(string) <= HISTORY_MAX_CHARS:
            super().store_string(string)
