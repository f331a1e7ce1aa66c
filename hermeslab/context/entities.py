"""Extraction of the concrete facts a summary must not lose.

An agent can rebuild reasoning from a short note, but not an order id, a path,
a port or an error class it never saw again. ``extract_entities`` returns those
tokens, in order of first appearance and without duplicates, so the extractive
summariser can carry them forward and the evaluation can measure how many of
them survive a compression; ``uncovered_entities`` picks, from a ranked list,
those a text does not already show.

It is meant to be precise rather than exhaustive: every kind needs a signal
that ordinary prose lacks (a slash, a digit, an underscore, an inner capital,
quotes or backticks), so common English words never come out.

Speed: structural kinds are found by patterns that start with a literal
(``://``, ``@``, ``/``, a quote, a backtick, ``#``) so the regex engine skips
ahead, with their context checked in Python; everything else comes from one
pass over words, where plain prose words are dismissed by cheap string tests.
"""

from __future__ import annotations

import re

_PLACEHOLDER = re.compile(r"\[REDACTED:[A-Za-z0-9_]*\]")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_PATH_CHARS = _WORD_CHARS | frozenset(".~@+-")
_EMAIL_LOCAL_CHARS = _WORD_CHARS | frozenset(".%+-")
_FILE_STEM_CHARS = _WORD_CHARS | frozenset("-")
_TRAILING_PUNCTUATION = ".,;:!?)]}'\""

_URL = re.compile(r"://[^\s<>\"'`\\)\]}]+")
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_EMAIL = re.compile(r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])")
_SLASH_PATH = re.compile(r"/[\w.@+-]+(?:/[\w.@+-]+)*/?")
_FILE_EXTENSIONS = (
    "py|pyi|ipynb|js|jsx|ts|tsx|mjs|cjs|json|jsonl|yaml|yml|toml|ini|cfg|conf|md|rst|txt|csv|tsv|html|css|"
    "scss|sql|sh|bash|zsh|rs|go|java|kt|c|h|cc|cpp|hpp|rb|php|swift|lock|log|xml|env|duckdb|sqlite|parquet|"
    "pdf|png|jpg|jpeg|gif|svg|whl|zip|gz|tar|patch|diff"
)
_FILE_NAME = re.compile(r"\.(?:" + _FILE_EXTENSIONS + r")(?![\w-])")
_EXTENSION_END = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_CODE = re.compile(r"`([^`\n]{2,80})`")
_PROSE = re.compile(r"[A-Za-z][a-z]*(?:\s+[A-Za-z][a-z]*)*")
_QUOTED = re.compile(r"([\"'])([A-Za-z_][\w.:/-]{1,63})\1")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?(?![\w-])")
_ISSUE = re.compile(r"#\d{2,}(?!\w)")

_WORD = re.compile(r"[$€£]?\w+(?:[-.,]\w+)*")
_NUMBER = re.compile(r"[$€£]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_ATTACHED_UNIT = re.compile(
    r"[$€£]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:ms|µs|ns|s|sec|min|h|KB|MB|GB|TB|KiB|MiB|GiB|kB|px|k|K|M|x)"
)
_SPACED_UNIT = re.compile(
    r"(?: ?%| (?:ms|µs|ns|s|sec|secs|seconds|min|mins|minutes|h|hours|days|KB|MB|GB|TB|KiB|MiB|GiB|kB|B|px|"
    r"tokens|chars|characters|lines|bytes|USD|EUR)(?![\w-]))"
)
_VERSION = re.compile(r"v?\d+\.\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?")
_HEX = re.compile(r"[0-9a-f]{7,64}")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)")
_ERRNO = frozenset(
    {"ENOENT", "EACCES", "EPERM", "EEXIST", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EADDRINUSE", "ENOSPC", "EPIPE", "EAGAIN", "EISDIR", "ENOTDIR", "EINVAL", "ENOMEM"}
)


_SIGNAL = re.compile(r"[\d_./:@#-]|(?<=.)[A-Z]")
_CAMEL = re.compile(r"[a-z][A-Z]|^[A-Z]{2,}[a-z]{2,}")  # parseArgs, ChatWidget, HTTPServer (not IDs, URLs)
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[A-Za-z]")


def _has_signal(token: str) -> bool:
    """Something prose words lack: a digit, a separator or an inner capital."""
    return _SIGNAL.search(token) is not None


def _classify_word(word: str) -> bool:
    """Whether one word (letters, digits, ``_``, joined by ``-``, ``.`` or ``,``) is an entity."""
    if word.isalpha():
        return word in _ERRNO or _CAMEL.search(word) is not None
    if "_" in word:
        return word.strip("_") != ""
    if _DIGIT.search(word) is None:
        return _CAMEL.search(word) is not None  # os.path.join and well-known are prose-like
    if _NUMBER.fullmatch(word) or _ATTACHED_UNIT.fullmatch(word):
        digits = len(_DIGIT.findall(word))
        return digits >= 3 or "." in word
    if _VERSION.fullmatch(word) or _HEX.fullmatch(word):
        return True
    if _ORDINAL.fullmatch(word):
        return False
    if _LETTER.search(word):
        return len(word) >= 4 or any(c in "-.," for c in word)
    return ("-" in word or "." in word) and len(_DIGIT.findall(word)) >= 3  # 1-555-0100, 10.0.0.1


class _Collector:
    """Entity spans found so far; later (lower-priority) finds may not overlap earlier ones."""

    def __init__(self, text: str):
        self.text = text
        self.taken = bytearray(len(text))
        self.found: list[tuple[int, str]] = []
        for match in _PLACEHOLDER.finditer(text):
            self.taken[match.start() : match.end()] = b"\x01" * (match.end() - match.start())

    def add(self, token: str, start: int, end: int) -> None:
        if not token or self.taken.find(1, start, end) != -1:
            return
        self.taken[start:end] = b"\x01" * (end - start)
        self.found.append((start, token))

    def before(self, pos: int) -> str:
        return self.text[pos - 1] if pos > 0 else " "

    def after(self, pos: int) -> str:
        return self.text[pos] if pos < len(self.text) else " "

    def walk_back(self, pos: int, chars: frozenset[str]) -> int:
        while pos > 0 and self.text[pos - 1] in chars:
            pos -= 1
        return pos


def _urls(c: _Collector) -> None:
    if "://" not in c.text:
        return
    for m in _URL.finditer(c.text):
        start = c.walk_back(m.start(), _SCHEME_CHARS)
        scheme = c.text[start : m.start()]
        if len(scheme) < 2 or not scheme[0].isalpha():
            continue
        url = c.text[start : m.end()].rstrip(_TRAILING_PUNCTUATION)
        c.add(url, start, start + len(url))


def _emails(c: _Collector) -> None:
    if "@" not in c.text:
        return
    for m in _EMAIL.finditer(c.text):
        start = c.walk_back(m.start(), _EMAIL_LOCAL_CHARS)
        local = c.text[start : m.start()].strip(".")
        if local:
            start = m.start() - len(local)
            c.add(c.text[start : m.end()], start, m.end())


def _uuids(c: _Collector) -> None:
    if "-" not in c.text:
        return
    for m in _UUID.finditer(c.text):
        if c.before(m.start()) not in _WORD_CHARS:
            c.add(m.group(0), *m.span())


def _paths(c: _Collector) -> None:
    text = c.text
    if "/" in text:
        for m in _SLASH_PATH.finditer(text):
            start = c.walk_back(m.start(), _PATH_CHARS)
            before = c.before(start)
            if before in "</\\":
                continue  # closing markup tags, escaped or doubled slashes
            path = text[start : m.end()].rstrip(".,")
            prefix = text[start : m.start()]
            segments = [s for s in path.split("/") if s]
            if prefix in ("", "~", ".", ".."):
                keep = len(path) >= 3 and not all(s.isdigit() for s in segments)
            else:
                keep = bool(_EXTENSION_END.search(path)) or (len(segments) >= 3 and not all(s.isdigit() for s in segments))
            if keep:
                c.add(path, start, start + len(path))
    if "." in text:
        for m in _FILE_NAME.finditer(text):
            start = c.walk_back(m.start(), _FILE_STEM_CHARS)
            if start < m.start() and c.after(m.end()) != "(" and c.before(start) not in "./":
                c.add(text[start : m.end()], start, m.end())


def _code_and_quotes(c: _Collector) -> None:
    if "`" in c.text:
        for m in _CODE.finditer(c.text):
            inner = m.group(1).strip()
            words = inner.strip(" .,;:!?")
            # Stray backtick pairs also enclose prose ("is not matched."); keep only code-like spans.
            if words and _PROSE.fullmatch(words) is None and any(ch.isalnum() for ch in inner):
                c.add(inner, *m.span())
    if '"' in c.text or "'" in c.text:
        for m in _QUOTED.finditer(c.text):
            if c.before(m.start()) in _WORD_CHARS or c.before(m.start()) == "\\" or c.after(m.end()) in _WORD_CHARS:
                continue
            if _has_signal(m.group(2)):
                c.add(m.group(2), *m.span())


def _dates_and_issues(c: _Collector) -> None:
    if "-" in c.text:
        for m in _DATE.finditer(c.text):
            if c.before(m.start()) not in _WORD_CHARS:
                c.add(m.group(0), *m.span())
    if "#" in c.text:
        for m in _ISSUE.finditer(c.text):
            if c.before(m.start()) not in _WORD_CHARS and c.before(m.start()) != "&":
                c.add(m.group(0), *m.span())


def _words(c: _Collector) -> None:
    for m in _WORD.finditer(c.text):
        word = m.group(0)
        plain_word = word.isalpha() and (word.islower() or word[1:].islower())  # most words: decided cheaply
        if plain_word or not _classify_word(word):
            continue
        end = m.end()
        if _NUMBER.fullmatch(word):
            unit = _SPACED_UNIT.match(c.text, end)
            if unit:
                end = unit.end()
        c.add(c.text[m.start() : end], m.start(), end)


def extract_entities(text: str) -> list[str]:
    """Concrete identifiers in ``text``: ordered by first appearance, deduplicated.

    Kinds: URLs (any scheme), e-mail addresses, UUIDs, file paths and file
    names, backticked code, quoted identifiers, dates, issue numbers
    (``#1234``), and words that are ids (``ABC123``, ``order_4711``,
    ``task-1234``), hex ids and hashes (7+ hex chars with a digit), versions,
    error classes and errno names, snake_case and CamelCase names, or numbers
    with three or more digits or a decimal point (with their unit).
    Redaction placeholders are never reported.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_entities() needs a str, got {type(text).__name__}")
    collector = _Collector(text)
    for finder in (_urls, _emails, _uuids, _paths, _code_and_quotes, _dates_and_issues, _words):
        finder(collector)
    collector.found.sort()
    seen: set[str] = set()
    ordered: list[str] = []
    for _, token in collector.found:
        if token not in seen:
            seen.add(token)
            ordered.append(token)
    return ordered


def uncovered_entities(ranked: list[str], covered: str, limit: int) -> list[str]:
    """Up to ``limit`` of ``ranked``, in order, that neither ``covered`` nor another one chosen contains.

    A fact is found wherever its text appears, so ``core.py`` needs no place of
    its own beside ``src/core.py``: the places go to facts not shown yet.
    """
    chosen: list[str] = []
    joined = ""
    for entity in ranked:
        if len(chosen) == limit:
            break
        if entity in covered or entity in joined:
            continue
        chosen.append(entity)
        joined += "\0" + entity
    # A later, longer choice may contain an earlier one: that one goes, its text is still there.
    return [entity for entity in chosen if joined.count(entity) == 1]
