"""Even sampling of an oversized summariser input: whole records from every region, gaps marked.

Hermes's lean compaction makes one summary call per compaction whatever the
span's size. When the serialised records (one per message) are longer than
the input cap, it does not keep only the head and the tail: it takes a number
of slices spread evenly over the records, the last one ending at the newest
record, each filled with whole records up to an equal share of the cap, then
grows the slices a record at a time, in turn, while the cap allows. A record
longer than a share keeps its head and its tail around a marker; every run of
records left out becomes one marker naming the records and the characters
that were left out.

The algorithm and its numbers are Hermes's (``docs/presets.md``); the marker
wording is hermeslab's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

#: Characters a summariser input may take (Hermes's cap on the serialised turns).
INPUT_CAP_CHARS = 160_000
#: Regions the records are sampled from.
SLICES = 8
SEPARATOR = "\n\n"
GAP_MARKER = "\n\n[records {first:,}-{last:,} left out here, {elided:,} chars; session_search finds them]\n\n"
CUT_MARKER = "\n[{elided:,} chars of this record left out; session_search finds them]\n"


@dataclass(frozen=True)
class Coverage:
    """How much of the input the sampled text shows (markers and separators not counted)."""

    input_chars: int
    sampled_chars: int
    records: int
    sampled_records: int

    @property
    def omitted_chars(self) -> int:
        return self.input_chars - self.sampled_chars

    @property
    def elided_records(self) -> int:
        return self.records - self.sampled_records


def bound_record(record: str, limit: int) -> str:
    """``record`` when it fits ``limit``; else its head and tail around a marker, ``limit`` characters at most."""
    if len(record) <= limit:
        return record
    reserve = len(CUT_MARKER.format(elided=len(record)))
    if limit <= reserve:
        return record[:limit]
    room = limit - reserve
    head = record[:room // 2].rstrip("\n")
    tail = record[len(record) - (room - room // 2):].lstrip("\n")
    return head + CUT_MARKER.format(elided=len(record) - len(head) - len(tail)) + tail


def _merged(slices: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in slices:
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _render(records: Sequence[str], shown: Sequence[str], slices: Sequence[tuple[int, int]]) -> str:
    """The shown records of each slice, a marker for each gap before a slice (a trailing gap cannot occur)."""
    parts: list[str] = []
    cursor = 0
    for start, end in slices:
        if start > cursor:
            separators = (start - cursor) if cursor == 0 else (start - cursor + 1)
            elided = sum(len(records[i]) for i in range(cursor, start)) + len(SEPARATOR) * separators
            parts.append(GAP_MARKER.format(first=cursor + 1, last=start, elided=elided))
        parts.append(SEPARATOR.join(shown[start:end]))
        cursor = end
    return "".join(parts)


def _initial_slices(shown: Sequence[str], count: int, target: int) -> list[tuple[int, int]]:
    """``count`` slices starting evenly apart, each holding whole records up to ``target`` characters
    (at least one); the last one ends at the newest record and grows backwards."""
    total = len(shown)
    slices: list[tuple[int, int]] = []
    for number in range(count):
        if number == count - 1:
            end, start = total, total - 1
            size = len(shown[start])
            while start > 0 and size + len(SEPARATOR) + len(shown[start - 1]) <= target:
                start -= 1
                size += len(SEPARATOR) + len(shown[start])
        else:
            start = end = round(number * total / count)
            size = 0
            while end < total and (size == 0 or size + len(shown[end]) + len(SEPARATOR) <= target):
                size += len(shown[end]) + (len(SEPARATOR) if end > start else 0)
                end += 1
        if end > start:
            slices.append((start, end))
    return _merged(slices)


def _grow(records: Sequence[str], shown: Sequence[str], slices: list[tuple[int, int]], cap: int) -> list[tuple[int, int]]:
    """Spend what the cap leaves on whole neighbouring records, one per slice per round, newest slice first:
    the newest slice grows backwards, the others forwards, and none into its neighbour."""
    length = len(_render(records, shown, _merged(slices)))
    grew = True
    while grew:
        grew = False
        for index in range(len(slices) - 1, -1, -1):
            start, end = slices[index]
            if index == len(slices) - 1:
                candidate, grown = start - 1, (start - 1, end)
                if candidate < (slices[index - 1][1] if index else 0):
                    continue
            else:
                candidate, grown = end, (start, end + 1)
                if candidate >= slices[index + 1][0]:
                    continue
            if length + len(SEPARATOR) + len(shown[candidate]) > cap:
                continue
            slices[index] = grown
            new_length = len(_render(records, shown, _merged(slices)))
            if new_length > cap:  # a gap marker's numbers grew a digit
                slices[index] = (start, end)
                continue
            length = new_length
            grew = True
    return _merged(slices)


def slice_share(records: Sequence[str], cap: int = INPUT_CAP_CHARS, slices: int = SLICES) -> int:
    """Characters each slice may hold: the cap less the widest gap markers, shared evenly (at least 1)."""
    count = max(1, min(slices, len(records)))
    total = sum(len(record) for record in records) + len(SEPARATOR) * max(len(records) - 1, 0)
    marker = len(GAP_MARKER.format(first=len(records), last=len(records), elided=total))
    return max(1, max(cap - marker * (count - 1), 1) // count)


def sample_records(records: Sequence[str], cap: int = INPUT_CAP_CHARS, slices: int = SLICES) -> tuple[str, Coverage]:
    """The records joined by blank lines when that fits ``cap``; else an even sample of them within ``cap``."""
    if cap < 1 or slices < 1:
        raise ValueError(f"cap and slices must be positive, got cap={cap!r} slices={slices!r}")
    input_chars = sum(len(record) for record in records)
    if not records:
        return "", Coverage(0, 0, 0, 0)
    total = input_chars + len(SEPARATOR) * (len(records) - 1)
    if total <= cap:
        return SEPARATOR.join(records), Coverage(input_chars, input_chars, len(records), len(records))
    count = max(1, min(slices, len(records)))
    target = slice_share(records, cap, slices)
    shown = [bound_record(record, target) for record in records]
    chosen = _grow(records, shown, _initial_slices(shown, count, target), cap)
    indices = [i for start, end in chosen for i in range(start, end)]
    return (_render(records, shown, chosen),
            Coverage(input_chars, sum(len(shown[i]) for i in indices), len(records), len(indices)))
