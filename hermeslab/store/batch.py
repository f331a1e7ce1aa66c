"""``Batch``: the rows one flush of the lab writer commits, in the order their events arrived.

The row builder fills it, one transaction writes it, and the commit hooks
(the search index) read it afterwards; keeping it apart from all three lets
each depend on the shape of a batch alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]

#: Session counters that events add to. ``api_call_count``, ``input_tokens``, ``output_tokens``, the cache,
#: reasoning and ``estimated_calls`` counters sum the user's turns' calls (``api_calls.purpose = 'turn'``);
#: the ``all_`` ones sum every call of the session, summaries, memory reviews and the rest included.
SESSION_COUNTERS = (
    "api_call_count",
    "all_api_call_count",
    "all_input_tokens",
    "all_output_tokens",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "message_count",
    "tool_call_count",
    "estimated_calls",
)


@dataclass
class Batch:
    """What one transaction writes, in the order the events arrived."""

    rows: dict[str, list[Row]] = field(default_factory=dict)
    #: ``("start", session row)`` and ``("end", {"id", "ended_at", "end_reason"})`` in event order.
    lifecycle: list[tuple[str, Row]] = field(default_factory=list)
    #: Per session, how much each counter of SESSION_COUNTERS grows.
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Sessions met for the first time, with the time of their first event, so that a
    #: session whose SessionStarted was never seen still gets a row to count into.
    first_seen: dict[str, float] = field(default_factory=dict)
    #: In-place compressions: (session_id, seq) — active messages below seq become archived.
    archives: list[tuple[str, int]] = field(default_factory=list)
    #: Ids of messages taken back out of the live history: they stay, no longer active.
    withdrawn: list[str] = field(default_factory=list)

    def add(self, table: str, row: Row) -> None:
        self.rows.setdefault(table, []).append(row)

    def count(self, session_id: str, counter: str, amount: int) -> None:
        counters = self.totals.setdefault(session_id, {})
        counters[counter] = counters.get(counter, 0) + amount

    def touch(self, session_id: str, ts: float) -> None:
        self.first_seen.setdefault(session_id, ts)

    def extend(self, other: "Batch") -> None:
        for table, rows in other.rows.items():
            self.rows.setdefault(table, []).extend(rows)
        self.lifecycle.extend(other.lifecycle)
        for session_id, counters in other.totals.items():
            for counter, amount in counters.items():
                self.count(session_id, counter, amount)
        for session_id, ts in other.first_seen.items():
            self.touch(session_id, ts)
        self.archives.extend(other.archives)
        self.withdrawn.extend(other.withdrawn)

    def row_count(self) -> int:
        return (sum(len(rows) for rows in self.rows.values()) + len(self.lifecycle) + len(self.archives)
                + len(self.withdrawn))

    def is_empty(self) -> bool:
        return self.row_count() == 0
