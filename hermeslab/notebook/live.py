"""Rate-limited refreshes: stream fast, redraw at most N times a second, never miss the end.

Events arrive on the agent's worker thread (and on tool threads), often
hundreds a second while a reply streams. Sending a display update for each
would flood the browser; dropping some would leave a stale last frame. The
throttle redraws at once when enough time has passed, otherwise schedules one
redraw for when it has, and ``flush()`` always draws the final state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Throttle:
    """Call ``draw`` at most ``rate`` times a second; a pending request always runs eventually."""

    def __init__(self, draw: Callable[[], None], rate: float, *, clock: Callable[[], float] = time.monotonic):
        if not rate > 0:
            raise ValueError(f"rate must be a positive number of refreshes per second, got {rate!r}")
        self._draw = draw
        self.interval = 1.0 / rate
        self._clock = clock
        self._lock = threading.Lock()
        self._drawing = threading.Lock()
        self._last = float("-inf")
        self._timer: threading.Timer | None = None
        #: Redraws done so far (for tests and for measuring the rate).
        self.draws = 0

    def request(self) -> None:
        """Something changed: redraw now if allowed, else make sure a redraw is scheduled."""
        with self._lock:
            wait = self._last + self.interval - self._clock()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._scheduled)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._last = self._clock()
        self._run()

    def flush(self) -> None:
        """Draw now, whatever the rate, and drop any scheduled redraw."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._last = self._clock()
        self._run()

    def _scheduled(self) -> None:
        with self._lock:
            if self._timer is None:  # flushed meanwhile
                return
            self._timer = None
            self._last = self._clock()
        self._run()

    def _run(self) -> None:
        with self._drawing:
            self.draws += 1
            self._draw()
