"""How fast a server reads and writes, from the ``timings`` llama.cpp's ``llama-server`` puts in its replies,
and the time a request may therefore take.

A fixed timeout that suits a hosted model cuts a local one off: a small
model on two cores writing a 4,000-token summary at 30 tokens a second needs
over two minutes. Once the server has said how fast it goes, a request's
timeout is the time its prompt and its output cap should take at that pace,
with headroom, and never less than the configured one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping

#: A timeout is this many times the time a request should take at the measured pace.
HEADROOM = 2.0
#: Weight of the newest reading in the running pace.
SMOOTHING = 0.3
#: Readings of fewer tokens than this say more about fixed costs than about pace, and are skipped.
MIN_TOKENS = 8


@dataclass
class Pace:
    """Running tokens per second of the server's prompt reading and of its generation (None: not measured)."""

    prompt_per_second: float | None = None
    generated_per_second: float | None = None

    def observe(self, timings: Any) -> None:
        """One reply's ``timings`` object (anything else is ignored)."""
        if not isinstance(timings, Mapping):
            return
        self.prompt_per_second = _blend(self.prompt_per_second, timings.get("prompt_n"),
                                        timings.get("prompt_per_second"))
        self.generated_per_second = _blend(self.generated_per_second, timings.get("predicted_n"),
                                           timings.get("predicted_per_second"))

    def expected_seconds(self, prompt_tokens: int, max_tokens: int | None) -> float | None:
        """How long a request should take at the measured pace; None before generation was measured."""
        if self.generated_per_second is None or max_tokens is None:
            return None
        reading = prompt_tokens / self.prompt_per_second if self.prompt_per_second else 0.0
        return reading + max_tokens / self.generated_per_second

    def timeout(self, configured: float, prompt_tokens: int, max_tokens: int | None) -> float:
        """The configured timeout, raised to ``HEADROOM`` times the expected time when that is longer."""
        expected = self.expected_seconds(prompt_tokens, max_tokens)
        return configured if expected is None else max(configured, HEADROOM * expected)


def _blend(current: float | None, tokens: Any, per_second: Any) -> float | None:
    if not isinstance(tokens, int) or tokens < MIN_TOKENS or not isinstance(per_second, (int, float)) \
            or isinstance(per_second, bool) or per_second <= 0:
        return current
    reading = float(per_second)
    return reading if current is None else (1 - SMOOTHING) * current + SMOOTHING * reading


_PACES: dict[str, Pace] = {}
_PACES_LOCK = threading.Lock()


def pace_of(server: str) -> Pace:
    """The one running pace of a server in this process, shared by every client of it (an A/B cell's
    summariser starts its own client, and must not start from nothing)."""
    with _PACES_LOCK:
        return _PACES.setdefault(server, Pace())
