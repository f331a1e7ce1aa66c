"""Turn message text into index terms.

Agent transcripts are half prose, half code, so one rule set serves both:

* A *word* is a run of letters, digits and ``_``; it is indexed lower-cased.
* A word written as an identifier (``get_user_name``, ``getUserName``,
  ``HTTPServer``) is also indexed by its parts (``get``, ``user``, ``name``), so
  prose queries find code and identifier queries still prefer the exact name.
  The pieces between underscores are always parts, so ``__init__`` gives
  ``init`` and ``test_v2`` gives ``v2``.
* Words joined by ``.`` or ``-`` (``agent.py``, ``os.path.join``, ``chat-send``,
  ``v1.2.3``) are also indexed as one compound term. A path such as
  ``src/hermeslab/agent.py`` therefore yields ``src``, ``hermeslab``,
  ``agent.py``, ``agent`` and ``py``.
* Scripts written without spaces between words (CJK, Thai, Lao, Khmer,
  Myanmar) are indexed as overlapping character bigrams: most Chinese and
  Japanese words are two characters long, which trigrams cannot match. A query
  of one such character has no bigram and is answered by a substring scan
  (see ``hermeslab.search.query``).

Terms longer than ``MAX_TERM_CHARS`` are cut to that length on both sides, which
keeps pasted hashes and base64 from bloating the index while still matching.
Query text goes through the same functions, so both sides always agree.

Phrases line up on *units*: runs of letters and digits (``_`` separates
units, as every other punctuation does, so ``"user name"`` is found in
``get_user_name``) and single unsegmented characters. Every unit of a text is
one of its terms. ``successors`` records which units follow which, for the
phrase filter (``hermeslab.search.phrases``), and ``counts_of`` counts a few
terms of a long text without tokenising all of it.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from functools import lru_cache
from typing import Iterable, Iterator

MAX_TERM_CHARS = 64

#: Scripts without spaces between words. CJK ideographs (with extensions A and
#: B and compatibility forms), kana, Hangul, Thai, Lao, Myanmar and Khmer.
UNSEGMENTED = (
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002a6df"
)
_UNSEGMENTED_CHAR = re.compile(f"[{UNSEGMENTED}]")
_RUN = re.compile(f"[{UNSEGMENTED}]{{2,}}")
# Boundaries inside an identifier: lower→Upper ("getUser"), and the last capital
# of an acronym before a lower-case letter ("HTTPServer" → "HTTP", "Server").
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


#: Words and ``.``/``-`` compounds in their original case; plain ``\\w`` for text without
#: unsegmented characters (nearly all of it), where it runs about twice as fast.
_PLAIN_TOKEN = re.compile(r"\w++(?:[.\-]\w++)*+")
_MIXED_TOKEN = re.compile(f"[^\\W{UNSEGMENTED}]++(?:[.\\-][^\\W{UNSEGMENTED}]++)*+")
_UNIT = re.compile(f"[{UNSEGMENTED}]|[^\\W_{UNSEGMENTED}]+")
_WORD = re.compile(f"[{UNSEGMENTED}]|[^\\W{UNSEGMENTED}]+")
#: Lines (words) with a capital or an underscore: the only ones that can have parts.
_MAYBE_IDENTIFIER = re.compile(r"^[^\n]*[A-Z_][^\n]*$", re.MULTILINE)
_COMPOUND = re.compile(r"^[^\n]*[.\-][^\n]*$", re.MULTILINE)
_TOO_LONG = re.compile(f"[^\\n.\\-]{{{MAX_TERM_CHARS + 1}}}")


def terms(text: str) -> list[str]:
    """Every index term of ``text``, repeats included (their count is the term frequency).

    The order of the list carries no meaning. Most of the work is a few passes
    of C string code over the whole text rather than a Python step per word,
    which is what makes indexing a million messages affordable.
    """
    return _terms(text)[0]


def analysed(text: str) -> tuple[Counter[str], int, dict[str, int]]:
    """Term frequencies, length (terms, repeats included) and ``successors(text)``: what indexing a message needs.

    One tokenising pass serves both.
    """
    found, words = _terms(text)
    # The words are the units when lower-casing moves no word boundary (certain for ASCII).
    masks = _successor_masks(words) if text.isascii() else successors(text)
    return Counter(found), len(found), masks


def _terms(text: str) -> tuple[list[str], list[str]]:
    """The terms, and the words in text order, lower-cased and cut at ``_`` (for ASCII text, its units)."""
    mixed = _UNSEGMENTED_CHAR.search(text) is not None
    joined = "\n".join((_MIXED_TOKEN if mixed else _PLAIN_TOKEN).findall(text))
    out: list[str] = []
    words_in_order: list[str] = []
    if joined:
        has_compounds = "." in joined or "-" in joined
        words = joined.replace(".", "\n").replace("-", "\n") if has_compounds else joined
        lowered = joined.lower()
        lowered_words = words.lower()
        out = lowered_words.split("\n")
        words_in_order = out[:]
        if "_" in joined:
            words_in_order = list(filter(None, lowered_words.replace("_", "\n").split("\n")))
        if has_compounds:
            out.extend(_COMPOUND.findall(lowered))
        if lowered != joined or "_" in joined:
            out.extend(_identifier_parts(_MAYBE_IDENTIFIER.findall(words)))
        if _TOO_LONG.search(lowered):
            out = [term[:MAX_TERM_CHARS] for term in out]
    if mixed:
        for run in _RUN.findall(text):
            out.extend(bigrams(run))
    return out, words_in_order


def _identifier_parts(words: list[str]) -> list[str]:
    """The parts of every word written as an identifier, once per occurrence of the word.

    The parts are the pieces of its camel case and, for a word with ``_``,
    every piece between underscores that they do not already hold (``v2`` of
    ``test_v2``), so each unit of the word is a term and a phrase query can
    require it.
    """
    out: list[str] = []
    for word, count in Counter(words).items():
        if "_" not in word and (word.islower() or word.isupper()):
            continue
        parts = [piece.lower() for chunk in word.split("_") for piece in _CAMEL.findall(chunk)]
        if "_" in word:
            parts += [chunk for chunk in word.lower().split("_") if chunk and chunk not in parts]
        if len(parts) > 1 or "_" in word and parts:
            out.extend(parts * count)
    return out


def counts_of(text: str, wanted: Iterable[str]) -> Counter[str]:
    """``Counter(terms(text))`` restricted to ``wanted``, tokenising only the lines that can hold one of them.

    No term spans a line break, and every term of a line is a substring of the
    line in lower case (up to the final form of sigma), so a line without any
    wanted term as a substring contributes nothing. Scoring a long tool output
    for two query words then reads it once in C instead of tokenising it whole.
    """
    wanted = frozenset(wanted)
    folded = _fold(text)
    if len(folded) != len(text):  # lower-casing changed the length: positions no longer line up
        lines = [text]
    else:
        pattern, lines, position = _wanted_pattern(wanted), [], 0
        while (found := pattern.search(folded, position)) is not None:
            start = folded.rfind("\n", 0, found.start()) + 1
            end = folded.find("\n", found.end())
            end = len(folded) if end < 0 else end
            lines.append(text[start:end])
            position = end + 1
    return Counter(term for term in terms("\n".join(lines)) if term in wanted) if lines else Counter()


def _fold(text: str) -> str:
    return text.lower().replace("\u03c2", "\u03c3")


@lru_cache(maxsize=64)
def _wanted_pattern(wanted: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(_fold(term)) for term in sorted(wanted)) or "(?!)")


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of an unsegmented run; a single character yields nothing."""
    return [run[i:i + 2] for i in range(len(run) - 1)]


def is_unsegmented(char: str) -> bool:
    return _UNSEGMENTED_CHAR.fullmatch(char) is not None


def successors(text: str) -> dict[str, int]:
    """Each unit of ``text`` (lower-cased, as in ``unit_key``) → a 16-bit mask of the units that follow it.

    The mask has ``successor_bit(v)`` for every unit ``v`` right after the
    unit somewhere in the text (0 for a unit only ever last). A phrase ``u v``
    occurs in a text only if ``v``'s bit is in ``u``'s mask, so the index
    keeps the mask beside each posting and most candidates of a phrase are
    turned away without reading their text.
    """
    return _successor_masks(_UNIT.findall(text.lower()))


def _successor_masks(found: list[str]) -> dict[str, int]:
    masks = dict.fromkeys(found, 0)
    for unit, bit in zip(found, map(successor_bit, found[1:])):
        masks[unit] |= bit
    return masks


@lru_cache(maxsize=1 << 16)
def successor_bit(unit: str) -> int:
    """One of 16 bits for ``unit``: a hash that stays the same across processes (``hash`` does not)."""
    return 1 << (zlib.crc32(unit.encode("utf-8", "surrogatepass")) & 15)


def words(text: str) -> Iterator[re.Match[str]]:
    """Words (``_`` included) and single unsegmented characters with their positions: what snippets mark."""
    return _WORD.finditer(text)


def unit_key(text: str) -> str:
    """``text`` reduced to its lower-cased units separated by single spaces, padded with a space each side.

    A phrase occurs in a text exactly when its key is a substring of the text's key.
    """
    return " " + " ".join(_UNIT.findall(text.lower())) + " "
