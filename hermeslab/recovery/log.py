"""Recovery actions held until the next attempt tells whether they worked.

A retry is only worth logging with its result: "retried after 2.3 s, and the
provider answered" or "... and it failed again with a timeout". The log keeps
each action open until the following attempt settles it, then reports it once
with that outcome (a row in the ``recoveries`` table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

RECOVERED = "recovered"


@dataclass(frozen=True)
class RecoveryAction:
    fault: str
    action: str
    attempt: int
    delay_s: float = 0.0


Reporter = Callable[[RecoveryAction, str], None]


class RecoveryLog:
    def __init__(self, report: Reporter):
        self._report = report
        self._open: list[RecoveryAction] = []

    def open(self, fault: str, action: str, attempt: int, delay_s: float = 0.0) -> None:
        """An action whose outcome the next attempt will show."""
        self._open.append(RecoveryAction(fault, action, attempt, delay_s))

    def settle(self, outcome: str) -> None:
        """Report every open action with ``outcome`` (``recovered``, ``failed: timeout``, ...)."""
        actions, self._open = self._open, []
        for action in actions:
            self._report(action, outcome)

    def record(self, fault: str, action: str, attempt: int, outcome: str, delay_s: float = 0.0) -> None:
        """An action whose outcome is known now (giving up, a repair applied to a reply)."""
        self._report(RecoveryAction(fault, action, attempt, delay_s), outcome)
