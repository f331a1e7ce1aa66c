"""One cell's unit of work (a turn, or a manual compression) with its transcript and controls.

The job runs on a worker thread; everything it touches from there is
thread-safe: the transcript takes a lock, redraws go through a Throttle, and
``stop()`` may be called from the kernel's main thread (a widget click), from
a subshell thread, or from asyncio cancellation.

Display updates are sent from an empty ``contextvars`` context, so ipykernel
gives them the parent of the request it is handling now rather than the long
finished cell that started the turn: nbclient reads only messages of the cell
it is running, and JupyterLab routes updates by display id whatever the parent.

A reloaded page no longer routes the old cell's updates (the display ids it
knew went with the old page), so the saved output of a running turn says how
to get control back: ``%hermes attach`` shows the job again, live, in a new
cell (same display ids, so later updates reach it), ``%hermes stop`` stops it.
That line is in every draw but stays hidden until the output has gone
``STALE_AFTER`` seconds without a redraw, which a live output never does (a
running job redraws at least every ``HEARTBEAT`` seconds): it shows only on a
page that no longer receives the updates. The widgets do come back live on a
reloaded page, so when the job ends its controls show the end state there.
"""

from __future__ import annotations

import contextvars
import threading
import time
from html import escape
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
from IPython.display import display as ipython_display

from ..agent import Agent
from ..core.events import ApiCallFinished, ApiCallStarted, Event, TurnStarted
from .live import Throttle
from .transcript import Transcript
from .widgets import StopButton, TokenBudget

KINDS = ("turn", "compress")
#: Shown under a running job's transcript, for a page reloaded while it runs (then it stops updating there).
RELOAD_HINT = ("reloaded the page? this output no longer updates: run `%hermes attach` in a new cell to follow "
               "the turn there, `%hermes stop` (or Kernel → Interrupt) to stop it")
#: A running job redraws at least this often (seconds), so a live output never looks stale.
HEARTBEAT = 2.0
#: Seconds without a redraw after which an output shows the reload hint (it is no longer being updated).
STALE_AFTER = 3 * HEARTBEAT
#: Reveals an element once it has been on screen ``STALE_AFTER`` seconds: a redraw replaces it and starts over.
_STALE_STYLE = ("<style>@keyframes hermeslab-stale{to{visibility:visible}}</style>")


class CellJob:
    """A turn (``text`` is the user message) or a compression (``text`` is the optional focus)."""

    def __init__(self, kind: str, text: str, *, gauge: TokenBudget, rate: float,
                 display: Callable[..., Any] = ipython_display):
        if kind not in KINDS:
            raise ValueError(f"unknown job kind {kind!r}; one of {KINDS}")
        self.kind, self.text = kind, text
        self.gauge = gauge
        self.transcript = Transcript()
        self.stop_button = StopButton(self.stop) if kind == "turn" else None
        #: The asyncio task running this job on the kernel's loop (None when it ran in the foreground).
        self.task: Any = None
        #: True once started as a task the cell does not wait for: only then can a reloaded page lose it.
        self.background = False
        #: The TurnResult (a turn) or Compaction (a compression), once finished.
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._display = display
        self._stop = threading.Event()
        self._agent: Agent | None = None
        self._agent_lock = threading.Lock()
        self._throttle = Throttle(self._draw, rate)
        self._controls_widget: widgets.Widget | None = None
        self._controls: Any = None
        self._output: Any = None
        self._waiting_since: float | None = None
        self._waiting_banner: Any = None
        #: Held while the controls are shown again or swapped for their final copy, so the two never cross.
        self._display_lock = threading.Lock()

    # ------------------------------------------------------------ display

    def show(self) -> None:
        """Put the controls and the transcript in the current cell (call while the cell runs)."""
        self._controls_widget = widgets.HBox([self.stop_button, self.gauge]) if self.stop_button else self.gauge
        self._controls = self._display(self._controls_widget, display_id=True)
        self._output = self._display(self.bundle(), raw=True, display_id=True)

    def bundle(self) -> dict[str, str]:
        """The transcript; while the job runs, with the reload hint under it."""
        html, text = self.transcript.to_html(), self.transcript.to_text()
        if self.background and self.kind == "turn" and not self.finished.is_set():
            html += (f'{_STALE_STYLE}<div class="hermeslab-reload-hint" style="font-size:11px;color:#757575;'
                     f'visibility:hidden;animation:hermeslab-stale 0s linear {STALE_AFTER:g}s forwards">'
                     f"{_code(RELOAD_HINT)}</div>")
            text += f"\n{RELOAD_HINT}"
        return {"text/html": html, "text/plain": text}

    def attach(self) -> None:
        """Show the controls and transcript again in the current cell; they stay live there until the end."""
        with self._display_lock:
            if self.finished.is_set() or self._controls is None or self._output is None:
                self._display(self._final_controls(), raw=True)
                self._display(self.bundle(), raw=True)
                return
            self._display(self._controls_widget, display_id=self._controls.display_id)
            self._display(self.bundle(), raw=True, display_id=self._output.display_id)

    def _final_controls(self) -> dict[str, str]:
        return {"text/html": f'<div class="hermeslab-controls-final">{self.gauge.snapshot()}</div>',
                "text/plain": f"context: {self.gauge.tokens:,} tokens"}

    def _draw(self) -> None:
        contextvars.Context().run(self._draw_now)

    def _draw_now(self) -> None:
        self.gauge.refresh()
        if self._output is not None:
            self._output.update(self.bundle(), raw=True)

    # ------------------------------------------------------------ lifecycle

    def wait_for_previous(self) -> None:
        """Another job of this chat is still running; say so until this one starts."""
        self._waiting_since = time.monotonic()
        self.transcript.finish("waiting")
        self._waiting_banner = self.transcript.note(
            "waiting", "waiting for the turn still running in this chat to finish (turns never interleave)")
        self._throttle.flush()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop the turn at its next safe point, or keep it from starting; safe from any thread."""
        self._stop.set()
        with self._agent_lock:
            agent = self._agent
        if agent is not None and self.kind == "turn":
            agent.interrupt()

    def skip(self, why: str = "stopped before it started") -> None:
        """The job never ran (stopped or cancelled while it waited)."""
        self.transcript.note("notice", why)
        self.transcript.finish("stopped")
        self._close()

    def fail(self, error: BaseException) -> None:
        """The job could not start (e.g. the configuration does not build)."""
        self.error = error
        self.transcript.note("error", f"{type(error).__name__}: {error}")
        self.transcript.finish("failed")
        self._close()

    def run(self, agent: Agent) -> Any:
        """Do the work on this thread, rendering as events arrive; returns the result."""
        if self._waiting_banner is not None and self._waiting_since is not None:
            waited = time.monotonic() - self._waiting_since
            self._waiting_banner.text = f"waited {waited:.1f} s for the previous turn in this chat to finish"
        self.transcript.finish("running")
        with self._agent_lock:
            self._agent = agent
        unsubscribe = agent.bus.subscribe(self._on_event)
        heartbeat = threading.Thread(target=self._beat, name="hermeslab-heartbeat", daemon=True)
        heartbeat.start()
        try:
            if self._stop.is_set():
                self.transcript.finish("stopped")
                return None
            if self.kind == "turn":
                self.result = agent.chat(self.text)
            else:
                self.result = agent.compress(self.text or None)
                changed = self.result is not None and self.result.changed
                self.transcript.finish("compressed" if changed else "unchanged")
            return self.result
        except Exception as exc:
            self.error = exc
            self.transcript.note("error", f"{type(exc).__name__}: {exc}")
            self.transcript.finish("failed")
            raise
        finally:
            unsubscribe()
            with self._agent_lock:
                self._agent = None
            self._close()

    def _beat(self) -> None:
        """Redraw now and then while the job runs, so its live output never reveals the reload hint."""
        while not self.finished.wait(HEARTBEAT):
            if self.background:
                self._throttle.request()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, TurnStarted) and self._stop.is_set():
            self.stop()  # a click that came between taking the agent and the turn clearing its stop flag
        changed = self.transcript.observe(event)
        if changed or isinstance(event, (ApiCallStarted, ApiCallFinished)):
            self._throttle.request()

    def _close(self) -> None:
        """Draw the final state and swap the live controls for a static copy of the gauge."""
        with self._display_lock:
            self.finished.set()  # first, so the last draw leaves out the reload hint
            self._throttle.flush()
            if self.stop_button is not None:
                self.stop_button.finish(stopped=self._stop.is_set())
            if self._controls is not None:
                contextvars.Context().run(self._controls.update, self._final_controls(), raw=True)
            if self.stop_button is not None:
                self.stop_button.close()
                if isinstance(self._controls_widget, widgets.Box):  # live on a reloaded page: show how it ended
                    self._controls_widget.children = (self.gauge, widgets.HTML(self._end_state_html()))


    def _end_state_html(self) -> str:
        """The turn's last line, for a page whose copy of the transcript stopped updating."""
        mark = "■ " if self.transcript.status == "interrupted" else ""
        return (f'<span class="hermeslab-end-state" data-status="{escape(self.transcript.status)}" '
                f'style="font-size:11px;color:#555;margin-left:8px">{mark}{escape(self.transcript.footer())}</span>')


def _code(text: str) -> str:
    """Backquoted spans as <code> (the hint is ours: no markup to escape)."""
    parts = text.split("`")
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))
