"""The pinned anchor list: exact facts of every compressed span, carried verbatim.

A summariser may paraphrase or drop an order id, a path or an error message,
and each later compression summarises the previous summary again, so a fact
lost once is lost for good. With ``compression.anchors`` on, the pipeline keeps
the entities of every span it condenses (ids, paths, numbers, names, and the
first line of each error) in a short block at the end of the summary. The block
is rebuilt from the remembered list at every compression, never re-summarised,
so what entered it stays until the token budget evicts it, least recent first.

Facts are read from redacted text, so a credential never becomes an anchor,
and every anchor is a substring of the message text it came from. Summaries
and runtime scaffolding (``*_synthetic`` messages) are skipped: a summary's
facts are already in the list, and scaffolding is not something the
conversation said.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, Sequence

from hermeslab.core.messages import text_of, tool_calls_of
from hermeslab.core.tokens import count_text

from .entities import extract_entities
from .redact import redact
from .secret_patterns import PLACEHOLDER_OPEN
from .turns import is_synthetic
from .types import is_summary_message

ANCHOR_HEADING = "## Pinned facts"
ANCHOR_INTRO = "Exact values from condensed turns, kept verbatim across compressions:"
_ITEM = "- "
#: Share of the longest summary a window allows that the anchor lines may take ...
ANCHOR_SHARE = 0.10
#: ... but never less than this many tokens.
ANCHOR_MIN_TOKENS = 100
#: Longer entities (long URLs, code) are not pinned; error lines are cut to this length.
ANCHOR_MAX_CHARS = 160

#: The first line of an error: ``ValueError: ...``, ``pkg.mod.SomeException: ...``, ``error: ...``,
#: optionally behind pytest's ``E`` gutter.
_ERROR_LINE = re.compile(
    r"(?m)^[ \t]*(?:E[ \t]+)?(?P<line>(?:[A-Za-z_][\w.]*(?:Error|Exception)|[Ee]rror|ERROR|[Ff]atal|FATAL)"
    r":[ \t]*\S[^\n]*)"
)


def anchor_budget(summary_cap_tokens: int) -> int:
    """Tokens the anchor lines may take, from the longest summary the window allows.

    The cap, not the current summary's budget, is the base: that budget shrinks
    with the span, and a short span must not evict anchors that fit before.
    """
    if isinstance(summary_cap_tokens, bool) or not isinstance(summary_cap_tokens, int) or summary_cap_tokens < 0:
        raise ValueError(f"summary_cap_tokens must be a non-negative integer, got {summary_cap_tokens!r}")
    return max(ANCHOR_MIN_TOKENS, int(summary_cap_tokens * ANCHOR_SHARE))


def anchor_line_tokens(anchor: str, count: Callable[[str], int] = count_text) -> int:
    """The cost of one anchor: its rendered line, counted alone."""
    return count(_ITEM + anchor)


def _error_lines(text: str) -> list[tuple[int, str]]:
    """(position, line) of each error's first line; cut before any redaction marker and to the length cap."""
    found = []
    for match in _ERROR_LINE.finditer(text):
        line = match.group("line")
        masked = line.find(PLACEHOLDER_OPEN)
        if masked >= 0:
            line = line[:masked]
        line = line[:ANCHOR_MAX_CHARS].rstrip()
        if line.endswith(":") or ":" not in line:
            continue  # nothing but the name is left; the name itself is an entity
        found.append((match.start("line"), line))
    return found


def _facts_of_text(text: str) -> list[str]:
    """Entities and error lines of one redacted text, in order of first appearance.

    An entity inside an error line is not listed again: the line already pins it.
    """
    errors = _error_lines(text)
    found = list(errors)
    for entity in extract_entities(text):
        at = text.find(entity)
        if not any(start <= at and at + len(entity) <= start + len(line) for start, line in errors):
            found.append((at, entity))
    found.sort(key=lambda item: item[0])
    return [fact for _, fact in found]


def _json_leaves(value: Any) -> Iterable[str]:
    """String and numeric values of parsed JSON (keys are field names, not facts)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _json_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_leaves(item)
    elif isinstance(value, str):
        yield value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def _facts_of_source(raw: str) -> list[str]:
    """Facts of one source text (JSON payloads by value), each found verbatim in ``raw``.

    A JSON payload is redacted twice: whole, where a key names its value as a
    secret, and value by value, where an escape such as ``\\n`` glued to a
    token hid it from the first pass.
    """
    clean = redact(raw)
    texts = [clean]
    if clean.lstrip()[:1] in ("{", "["):
        try:
            texts = [redact(leaf) for leaf in _json_leaves(json.loads(clean))]
        except ValueError:
            pass
    facts = []
    for text in texts:
        for fact in _facts_of_text(text):
            if len(fact) <= ANCHOR_MAX_CHARS and _is_line(fact) and fact in raw:
                facts.append(fact)
    return facts


def _sources(message: dict) -> list[str]:
    sources = [text_of(message)]
    for call in tool_calls_of(message):
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            sources.append(arguments)
    return sources


def _is_line(text: str) -> bool:
    """One non-empty line without surrounding spaces: what a block item can hold and give back unchanged."""
    return bool(text) and text == text.strip() and len(text.splitlines()) == 1


def _check_anchor(anchor: Any, where: str) -> str:
    if not isinstance(anchor, str):
        raise TypeError(f"{where} must be a str, got {type(anchor).__name__}")
    if not _is_line(anchor):
        raise ValueError(f"{where} must be one non-empty line without surrounding spaces, got {anchor!r}")
    return anchor


def collect_anchors(span: Sequence[dict], previous: Sequence[str], *, budget_tokens: int,
                    count: Callable[[str], int] = count_text) -> list[str]:
    """``previous`` merged with the facts of ``span``: deduplicated, least recent first, within the budget.

    A fact seen again moves to the recent end. When the lines cost more than
    ``budget_tokens`` (each line counted alone by ``count``), the least recent
    anchors are evicted; one whose own line exceeds the budget is never kept.
    """
    if not isinstance(span, (list, tuple)):
        raise TypeError(f"span must be a list of messages, got {type(span).__name__}")
    if not isinstance(previous, (list, tuple)):
        raise TypeError(f"previous must be a list of anchors, got {type(previous).__name__}")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise ValueError(f"budget_tokens must be a non-negative integer, got {budget_tokens!r}")
    ordered: dict[str, None] = {}
    for index, anchor in enumerate(previous):
        ordered[_check_anchor(anchor, f"previous[{index}]")] = None
    for index, message in enumerate(span):
        if not isinstance(message, dict):
            raise TypeError(f"span[{index}] is a {type(message).__name__}, not a message dict")
        if is_summary_message(message) or is_synthetic(message):
            continue
        for source in _sources(message):
            for fact in _facts_of_source(source):
                ordered.pop(fact, None)
                ordered[fact] = None
    kept: list[str] = []
    spent = 0
    for anchor in reversed(ordered):
        cost = anchor_line_tokens(anchor, count)
        if cost > budget_tokens:
            continue
        if spent + cost > budget_tokens:
            break
        spent += cost
        kept.append(anchor)
    kept.reverse()
    return kept


def render_anchor_block(anchors: Sequence[str]) -> str:
    """The Markdown block placed at the end of a summary: heading, one-line intro, one redacted anchor a line.

    An empty list renders as an empty string (no block at all).
    """
    if not isinstance(anchors, (list, tuple)):
        raise TypeError(f"anchors must be a list of str, got {type(anchors).__name__}")
    lines = [_ITEM + redact(_check_anchor(anchor, f"anchors[{index}]")) for index, anchor in enumerate(anchors)]
    if not lines:
        return ""
    return "\n".join([ANCHOR_HEADING, ANCHOR_INTRO, *lines])


def split_anchor_block(text: str) -> tuple[str, list[str]]:
    """(``text`` without its last anchor block, the anchors of that block); ``(text, [])`` when there is none."""
    if not isinstance(text, str):
        raise TypeError(f"split_anchor_block() needs a str, got {type(text).__name__}")
    lines = text.split("\n")
    heading = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip() == ANCHOR_HEADING), None)
    if heading is None:
        return text, []
    end = heading + 1
    if end < len(lines) and lines[end].strip() == ANCHOR_INTRO:
        end += 1
    anchors = []
    while end < len(lines) and lines[end].startswith(_ITEM) and lines[end][len(_ITEM):].strip():
        anchors.append(lines[end][len(_ITEM):].strip())
        end += 1
    before = "\n".join(lines[:heading]).rstrip()
    after = "\n".join(lines[end:]).strip()
    return (f"{before}\n\n{after}" if before and after else before or after), anchors


def parse_anchor_block(text: str) -> list[str]:
    """The anchors of the last anchor block in ``text`` (a summary body or a whole summary message)."""
    return split_anchor_block(text)[1]
