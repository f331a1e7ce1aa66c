"""Secret redaction for everything that leaves the live conversation, in one pass over the text.

Summaries are re-read by models and the DuckDB log is shared with notebooks,
so credentials must not reach either. What counts as a secret, and how much of
it is masked, is the rule table in `hermeslab.context.secret_patterns`; this
module applies it fast enough to run on every summarised middle and log row.

Speed: every rule but the private-key blocks matches within one line and
reads its context only from that line. So ``redact`` makes one pass over a
lower-case ASCII shadow of the text (same indices) for the families' markers:
a literal prefix with the shape that must follow it (``sk-`` and twenty token
characters, ``eyj``), a ``=`` or ``:`` after a secret-ish name, ``://...@``, a
digit and ``:`` before a bot token. The rules then run on the lines that hold
a marker and nowhere else, and the result is what ``redact_exhaustive`` (every
rule over the whole text) gives. Private-key blocks span lines; they are
matched over the whole text first, behind a substring check. Within a line, a
rule runs its regex only when one of its substring triggers occurs, and
case-insensitive rules run on a lower-cased copy with identical indices.
``redact`` is idempotent: masked text is never masked again, and the rules
run again over a text they changed until it settles, since a mask can leave
the start of another token right behind it (``sk-...eyJ...`` masks the key
up to the first dot, after which a JWT's payload stands alone).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from typing import Any, Sequence

from .secret_patterns import PLACEHOLDER_OPEN, PLACEHOLDER_PATTERN, RULES, Rule, placeholder

#: Rules whose matches may span lines, run over the whole text; the others run line by line.
_MULTILINE_RULES = tuple(rule for rule in RULES if rule.multiline)
_LINE_RULES = tuple(rule for rule in RULES if not rule.multiline)
#: Every trigger of the multi-line rules, when all of them look for it in the text as it is: a text
#: holding none of them (nearly every text) skips those rules at once. None: they run on every text.
_MULTILINE_TRIGGERS = (None if any(rule.lowered for rule in _MULTILINE_RULES)
                       else tuple({trigger for rule in _MULTILINE_RULES for trigger in rule.triggers}))


# ---------------------------------------------------------------- the markers


def _literal_head(source: str) -> tuple[str, str]:
    """Split a regex source into its leading literal text and the rest."""
    head: list[str] = []
    index = 0
    while index < len(source):
        char = source[index]
        if char == "\\" and index + 1 < len(source) and not source[index + 1].isalnum():
            head.append(source[index + 1])
            index += 2
        elif char in ".^$*+?{}[]()|\\":
            break
        else:
            head.append(char)
            index += 1
    return "".join(head), source[index:]


#: ASCII from rarest to commonest in code and tool output (counted on the shared recordings). Each marker is
#: looked for from its rarest literal character, so the scan stops at few positions of the text.
_RARITY = {char: rank for rank, char in enumerate("^;$%~|!&?@z+*78}{jq965#4<>k3]\\2[x1/v\"0)(-':wb,g`=yhf_mudp.clnoraiste ")}


def _anchored(source: str) -> tuple[str, str]:
    """A marker as its rarest literal character and the regex that must hold from there.

    ``sk-proj-`` becomes ``j`` and ``(?<=sk-proj)-``: the engine stops at the
    ``j`` and looks back for the rest of the literal, then on for the tail.
    """
    head, tail = _literal_head(source)
    if not head:
        raise ValueError(f"marker {source!r} must start with a literal")
    index = min(range(len(head)), key=lambda k: _RARITY.get(head[k], len(_RARITY)))
    behind = f"(?<={re.escape(head[: index + 1])})" if index else ""
    return head[index], behind + re.escape(head[index + 1 :]) + tail


def _marker_patterns(rules: tuple[Rule, ...]) -> tuple[re.Pattern[bytes], tuple[re.Pattern[bytes], ...]]:
    """The markers as one regex, and as one regex per character they are anchored at.

    Each of the second kind starts from a single literal, which the engine
    skips to at C speed; the single alternation tries every branch's first
    character at every position, twice the time per character, but is one
    search: the better choice for a short text.
    """
    groups: dict[str, set[str]] = {}
    for source in {source for rule in rules for source in rule.marker_sources()}:
        anchor, rest = _anchored(source)
        groups.setdefault(anchor, set()).add(rest)
    branches = []
    for anchor, rests in sorted(groups.items()):
        alternatives = "" if "" in rests else "|".join(sorted(rests))
        branches.append(re.escape(anchor) + (f"(?:{alternatives})" if "|" in alternatives else alternatives))
    return (re.compile("|".join(branches).encode("ascii")),
            tuple(re.compile(branch.encode("ascii")) for branch in branches))


_MARKERS, _MARKERS_BY_ANCHOR = _marker_patterns(_LINE_RULES)
#: From this many characters on, a text is scanned with one regex per anchor (the measured crossover is near 300).
_SCAN_BY_ANCHOR_FROM = 1_024
#: The two characters whose lower case is ASCII though they are not; the shadow must see them lowered.
_ASCII_LOWERING = {"\u0130": "I", "\u212a": "k"}


def _shadow(text: str) -> bytes:
    """Lower-case ASCII bytes with the indices of ``text``; other characters become ``?``."""
    if not text.isascii():
        for char, ascii_char in _ASCII_LOWERING.items():
            if char in text:
                text = text.replace(char, ascii_char)
    return text.encode("ascii", "replace").lower()


# ---------------------------------------------------------------- application


def _cuts_placeholder(markers: list[tuple[int, int]], start: int, end: int) -> bool:
    """True when [start, end) covers only part of an existing marker (masking it would mangle it)."""
    return any(ps < end and start < pe and not (start <= ps and pe <= end) for ps, pe in markers)


def _apply(rule: Rule, text: str, haystack: str) -> str:
    pieces: list[str] = []
    last = 0
    markers = [m.span() for m in PLACEHOLDER_PATTERN.finditer(text)] if PLACEHOLDER_OPEN in text else []
    for match in rule.pattern.finditer(haystack):
        verdict = rule.judge(text, match)
        if verdict is None:
            continue
        kind, start, end = verdict
        if start < last or text.startswith(PLACEHOLDER_OPEN, start) or _cuts_placeholder(markers, start, end):
            continue
        pieces.append(text[last:start])
        pieces.append(placeholder(kind))
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def _lower(text: str) -> str:
    """Lower case with the same indices as ``text`` (U+0130 is the one character that grows)."""
    lowered = text.lower()
    if len(lowered) != len(text):
        lowered = text.replace("\u0130", "I").lower()
    return lowered


def _run(rules: tuple[Rule, ...], text: str) -> str:
    """Each rule in turn over all of ``text``, where its triggers occur."""
    lowered: str | None = None
    for rule in rules:
        if rule.lowered:
            if lowered is None:
                lowered = _lower(text)
            haystack = lowered
        else:
            haystack = text
        for trigger in rule.triggers:
            if trigger in haystack:
                break
        else:
            continue
        redacted = _apply(rule, text, haystack)
        if redacted is not text:
            text = redacted
            lowered = None
    return text


def _settled(rules: tuple[Rule, ...], text: str) -> str:
    """``_run`` again until nothing changes; each change masks more of the text, so this ends."""
    while True:
        redacted = _run(rules, text)
        if redacted is text:
            return text
        text = redacted


def _check(text: Any) -> None:
    if not isinstance(text, str):
        raise TypeError(f"redact() needs a str, got {type(text).__name__}")


def redact_exhaustive(text: str) -> str:
    """Every rule over the whole text: the definition of what ``redact`` returns, and its slow reference."""
    _check(text)
    return _settled(RULES, text)


def _without_blocks(text: str) -> str:
    """``text`` with the multi-line rules applied, skipped at once when none of their triggers occurs."""
    if _MULTILINE_TRIGGERS is None or any(map(text.__contains__, _MULTILINE_TRIGGERS)):
        return _settled(_MULTILINE_RULES, text)
    return text


def _marked_lines(shadow: bytes, patterns: Sequence[re.Pattern[bytes]] | None = None) -> list[tuple[int, int]]:
    """(start, end) of each line of ``shadow`` holding a marker, in order (``patterns``: by default the
    single regex for a short text, the anchored ones for a long one).

    No marker matches across a line end, so a line holds a marker exactly when
    one of the regexes matches in it; each is searched on from the end of the
    last line it marked.
    """
    if patterns is None:
        patterns = _MARKERS_BY_ANCHOR if len(shadow) >= _SCAN_BY_ANCHOR_FROM else (_MARKERS,)
    lines: set[tuple[int, int]] = set()
    for pattern in patterns:
        hit = pattern.search(shadow)
        while hit is not None:
            start = shadow.rfind(b"\n", 0, hit.start()) + 1
            end = shadow.find(b"\n", hit.start())
            end = len(shadow) if end == -1 else end
            lines.add((start, end))
            hit = pattern.search(shadow, end)
    return sorted(lines)


def _redact_lines(text: str, lines: list[tuple[int, int]]) -> str:
    """``text`` with the line rules run on each of ``lines`` (ascending, within ``text``)."""
    if not lines:
        return text
    pieces: list[str] = []
    last = 0
    for start, end in lines:
        pieces += (text[last:start], _settled(_LINE_RULES, text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``.

    The result is ``redact_exhaustive(text)``; only the lines holding a marker are read by the rules.
    """
    _check(text)
    text = _without_blocks(text)
    return _redact_lines(text, _marked_lines(_shadow(text)))


def redact_many(texts: Sequence[str]) -> list[str]:
    """``[redact(text) for text in texts]`` with one marker scan over all of them.

    A summarised span is hundreds of short texts (one-line descriptions,
    call arguments), for which starting a scan costs as much as the scan.
    Joined by newlines they are scanned once: no marker matches across a
    line end or looks past one, so each text's marked lines are the ones it
    has alone.
    """
    for text in texts:
        _check(text)
    joined = "\n".join(texts)
    if _without_blocks(joined) is not joined:  # a block rule's trigger occurs (perhaps across two texts)
        texts = [_without_blocks(text) for text in texts]
        joined = "\n".join(texts)
    starts = list(accumulate((len(text) + 1 for text in texts), initial=0))
    lines: dict[int, list[tuple[int, int]]] = {}
    for start, end in _marked_lines(_shadow(joined)):
        index = bisect_right(starts, start) - 1
        lines.setdefault(index, []).append((start - starts[index], end - starts[index]))
    return [_redact_lines(text, lines[index]) if index in lines else text for index, text in enumerate(texts)]


def redact_value(value: Any) -> Any:
    """Redact every string inside a JSON-like value (dicts, lists, tuples); other leaves pass through."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(item) for item in value)
    return value


def redact_message(message: dict[str, Any]) -> dict[str, Any]:
    """A redacted copy of a chat message: content, content parts and tool-call arguments.

    Image parts are left alone: base64 pixels are not text a rule can read
    sensibly, and masking them would only break the image.
    """
    if not isinstance(message, dict):
        raise TypeError(f"redact_message() needs a message dict, got {type(message).__name__}")
    out = dict(message)
    content = message.get("content")
    if isinstance(content, str):
        out["content"] = redact(content)
    elif isinstance(content, list):
        out["content"] = [part if isinstance(part, dict) and part.get("type") == "image_url" else redact_value(part) for part in content]
    if message.get("tool_calls"):
        out["tool_calls"] = [_redact_call(call) for call in message["tool_calls"]]
    return out


def _redact_call(call: Any) -> Any:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    function = dict(call["function"])
    if isinstance(function.get("arguments"), str):
        function["arguments"] = redact(function["arguments"])
    return {**call, "function": function}
