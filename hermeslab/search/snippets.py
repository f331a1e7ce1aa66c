"""Short excerpts of matching messages, with the matched words marked.

The excerpt is the window of ``width`` characters holding the most distinct
query terms (ties: the earliest), widened to word boundaries, with matches
wrapped in ``>>>`` and ``<<<`` and runs of whitespace folded to one space so a
code block stays readable on one line. Neighbouring messages are shown as a
plain ``preview``.
"""

from __future__ import annotations

import re
from collections import Counter

from hermeslab.search.query import Query
from hermeslab.search.tokens import is_unsegmented, terms, words as text_words

SNIPPET_CHARS = 240
PREVIEW_CHARS = 200
OPEN, CLOSE = ">>>", "<<<"
#: Matches looked at when placing the window; enough for any readable excerpt.
_MAX_MATCHES = 400
_SPACE = re.compile(r"\s+")
#: An identifier with parts: an underscore or a change of case inside.
_INNER = re.compile(r"_|[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")


def snippet(text: str, query: Query, width: int = SNIPPET_CHARS) -> str:
    """The best ``width``-character excerpt of ``text`` for ``query``, matches marked."""
    if width < 20:
        raise ValueError(f"width must be at least 20 characters, got {width}")
    matches = _matches(text, query)
    if not matches:
        return preview(text, width)
    start, end = _best_window(matches, width)
    start, end = _widen(text, start, end)
    spans: list[list[int]] = []
    for begin, finish, _ in matches:
        if begin < start or finish > end:
            continue
        if spans and spans[-1][1] == begin:  # adjacent characters of one CJK word: one mark
            spans[-1][1] = finish
        else:
            spans.append([begin, finish])
    pieces, cursor = [], start
    for begin, finish in spans:
        pieces += [text[cursor:begin], OPEN, text[begin:finish], CLOSE]
        cursor = finish
    pieces.append(text[cursor:end])
    body = _SPACE.sub(" ", "".join(pieces)).strip()
    return ("…" if start > 0 else "") + body + ("…" if end < len(text) else "")


def preview(text: str, width: int = PREVIEW_CHARS) -> str:
    """The start of ``text`` on one line, at most ``width`` characters plus an ellipsis."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= width else flat[:width].rstrip() + "…"


def _matches(text: str, query: Query) -> list[tuple[int, int, str]]:
    """(start, end, term) of the words of ``text`` that are query terms (any case), in order.

    One regular expression over the text finds whole words; only when none is
    found does a slower pass look inside identifiers (``getUserName`` for ``user``).
    """
    words = sorted({term for term in query.terms if not any(map(is_unsegmented, term))}, key=len, reverse=True)
    unsegmented = {char for text_ in (*query.terms, *query.phrases) for char in text_ if is_unsegmented(char)}
    alternatives = [rf"(?<!\w)(?:{'|'.join(map(re.escape, words))})(?!\w)"] if words else []
    alternatives += [re.escape(char) for char in sorted(unsegmented)]
    found = []
    if alternatives:
        for match in re.finditer("|".join(alternatives), text, re.IGNORECASE):
            found.append((match.start(), match.end(), match.group().lower()))
            if len(found) >= _MAX_MATCHES:
                return found
    if found or not words:
        return found
    wanted = set(words)
    for match in text_words(text):
        unit = match.group()
        if _INNER.search(unit) and not wanted.isdisjoint(terms(unit)):
            found.append((match.start(), match.end(), unit.lower()))
            if len(found) >= _MAX_MATCHES:
                break
    return found


def _best_window(matches: list[tuple[int, int, str]], width: int) -> tuple[int, int]:
    """The window starting at a match that covers the most distinct terms (a sliding window, linear)."""
    counts: Counter[str] = Counter()
    best, best_count, right = (matches[0][0], matches[0][0] + width), 0, 0
    for begin, _, term in matches:
        while right < len(matches) and matches[right][1] <= begin + width:
            counts[matches[right][2]] += 1
            right += 1
        if len(counts) > best_count:
            best, best_count = (begin, begin + width), len(counts)
        if counts[term] > 0:
            counts[term] -= 1
            if not counts[term]:
                del counts[term]
    # Put a little context before the first match.
    shift = min(best[0], width // 5)
    return best[0] - shift, best[1] - shift


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Move the window's edges out to the nearest whitespace (by at most 20 characters)."""
    end = min(end, len(text))
    for _ in range(20):
        if start <= 0 or text[start - 1].isspace():
            break
        start -= 1
    for _ in range(20):
        if end >= len(text) or text[end].isspace():
            break
        end += 1
    return max(start, 0), end
