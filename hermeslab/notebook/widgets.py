"""The two live controls of a ``%%hermes`` cell: a Stop button and a token-budget gauge.

Widgets are used only where the kernel must be reached (Stop) or a number must
move while a reply streams (the gauge). Neither carries the transcript: widget
state does not survive a kernel restart, ordinary output does. When a turn ends
the cell swaps its controls for ``gauge_html``, a static copy of the gauge.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import ipywidgets as widgets

from ..core.events import Event
from .budget import BudgetMeter

#: Bar colour per level: grey, amber (≥ 75% of the threshold), red (≥ 90%).
LEVEL_COLOURS = {"ok": "#9e9e9e", "warn": "#f0a30a", "alert": "#d32f2f"}
#: Turns shown in the sparkline.
SPARKLINE_TURNS = 40
BAR_WIDTH = 220
SPARK_WIDTH, SPARK_HEIGHT = 90, 18


def gauge_html(meter: BudgetMeter) -> str:
    """The gauge as HTML: a bar over the window with the threshold marked, the numbers, a per-turn sparkline."""
    tokens, window, threshold, level = meter.tokens, meter.context_length, meter.threshold, meter.level
    filled = min(tokens / window, 1.0) * 100
    marker = ""
    numbers = f"{meter.reading} / {window:,} tokens ({tokens / window:.1%})"
    if threshold is not None:
        at = min(threshold / window, 1.0) * 100
        marker = (f'<div title="compression threshold" style="position:absolute;left:{at:.2f}%;top:-2px;'
                  f'bottom:-2px;width:2px;background:#333"></div>')
        numbers += f" · {tokens / threshold:.0%} of the compression threshold ({threshold:,})"
    bar = (f'<div style="position:relative;width:{BAR_WIDTH}px;height:10px;background:#eceff1;'
           f'border-radius:3px;flex:none"><div style="width:{filled:.2f}%;height:100%;'
           f'background:{LEVEL_COLOURS[level]};border-radius:3px"></div>{marker}</div>')
    return (f'<div class="hermeslab-gauge-body" data-level="{level}" data-tokens="{tokens}" '
            f'style="display:flex;align-items:center;gap:8px;font-size:12px;font-family:var(--jp-ui-font-family,'
            f'sans-serif)">{bar}<span class="hermeslab-gauge-numbers">{numbers}</span>'
            f"{sparkline_svg(_with_now(meter.per_turn, tokens))}</div>")


def _with_now(per_turn: list[int], tokens: int) -> list[int]:
    """The per-turn sizes plus the current one, unless a turn just ended at exactly that size."""
    return per_turn if per_turn and per_turn[-1] == tokens else [*per_turn, tokens]


def sparkline_svg(values: list[int]) -> str:
    """A tiny line of context size per turn (the last point is now), from zero to its own peak."""
    values = values[-SPARKLINE_TURNS:]
    if len(values) < 2:
        return ""
    top = max(max(values), 1)
    step = SPARK_WIDTH / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{SPARK_HEIGHT - 1 - (v / top) * (SPARK_HEIGHT - 2):.1f}"
                      for i, v in enumerate(values))
    return (f'<svg class="hermeslab-sparkline" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" '
            f'viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" role="img" aria-label="context size per turn">'
            f'<polyline fill="none" stroke="#607d8b" stroke-width="1.5" points="{points}"/></svg>')


class TokenBudget(widgets.HTML):
    """A gauge of how full the context is; feed it events, then ``refresh()`` (throttled by the caller)."""

    def __init__(self, meter: BudgetMeter, **kwargs):
        super().__init__(**kwargs)
        self.meter = meter
        self._lock = threading.Lock()
        self.add_class("hermeslab-gauge")
        self.refresh()

    @property
    def tokens(self) -> int:
        return self.meter.tokens

    @property
    def level(self) -> str:
        return self.meter.level

    def observe_event(self, event: Event) -> bool:
        """Fold an event into the count (any thread); True when the gauge needs a refresh."""
        with self._lock:
            return self.meter.observe(event)

    def configure(self, *, context_length: int, threshold: int | None, overhead: int = 0,
                  estimate: int | None = None) -> None:
        """New window, threshold or tool set; ``estimate`` restarts the count from a local estimate."""
        with self._lock:
            self.meter.context_length, self.meter.threshold = context_length, threshold
            self.meter.overhead = overhead
            if estimate is not None:
                self.meter.reset(estimate)
        self.refresh()

    def snapshot(self) -> str:
        with self._lock:
            return gauge_html(self.meter)

    def refresh(self) -> None:
        """Send the current numbers to every view of the gauge."""
        html = self.snapshot()
        with self._lock:
            if self.value != html:
                self.value = html


class StopButton(widgets.Button):
    """Asks the running turn to stop; the handler must be thread-safe (clicks may arrive on any thread)."""

    def __init__(self, on_stop: Callable[[], None], **kwargs):
        super().__init__(description="Stop", icon="stop", button_style="danger",
                         tooltip="Stop this turn: the partial answer is kept and logged as interrupted", **kwargs)
        self._on_stop = on_stop
        self.add_class("hermeslab-stop")
        self.on_click(self._clicked)

    def _clicked(self, _button: widgets.Button) -> None:
        self.disabled, self.description = True, "Stopping…"
        self._on_stop()

    def finish(self, stopped: bool = False) -> None:
        """The work ended: nothing left to stop. ``stopped``: on request (here, `%hermes stop`, an interrupt)."""
        self.disabled = True
        self.description = "Stopped" if stopped or self.description == "Stopping…" else "Done"
