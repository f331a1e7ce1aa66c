"""User text to a search query that cannot break anything.

The index has no query language, so there is nothing to escape: text is cut
to ``MAX_QUERY_CHARS``, control characters (NUL included) become spaces, and
what remains goes through the same tokenizer as the messages. ``AND``, ``NEAR``,
``*``, ``-`` and parentheses are ordinary words or punctuation; all values
reach SQLite as bound parameters.

Semantics, chosen for ranked recall with bounded work:

* Unquoted words are **OR**-ed and ranked by BM25. A message holding more of
  them scores higher, and a query whose words never co-occur still finds
  something — and a disjunction is what impact-ordered postings can answer
  early (see ``hermeslab.search.topk``).
* A ``"quoted phrase"`` is **required**: every hit contains its words in that
  order, with any punctuation (``_`` included) or space between them. A run
  of an unsegmented script (``大别山``) is treated as a phrase of its
  characters, because its bigrams alone would also match the characters far
  apart.
* A single character of such a script has no bigram; the query then scans the
  text of recent messages for it (a bounded substring scan).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Sequence

from hermeslab.search.tokens import MAX_TERM_CHARS, UNSEGMENTED, terms, unit_key

MAX_QUERY_CHARS = 2_048
#: Distinct terms a query may use; later ones are dropped (each costs a posting list read).
MAX_TERMS = 32

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"'})
_RUN = re.compile(f"[{UNSEGMENTED}]+")
_UNSEGMENTED_RUN = _RUN
_JOIN = "\nA\n"


@dataclass(frozen=True)
class Query:
    #: The text actually searched for (after cutting and cleaning).
    text: str
    #: Distinct index terms, required ones first.
    terms: tuple[str, ...]
    #: Terms every hit must contain (the words of phrases).
    required: frozenset[str]
    #: Unit keys (see ``tokens.unit_key``) every hit's text must contain.
    phrases: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.terms and not self.phrases

    def matches(self, text: str) -> bool:
        """Whether ``text`` contains every phrase of the query (case-insensitive, any punctuation between words)."""
        return self.matching([text])[0]

    def matching(self, texts: Sequence[str]) -> list[bool]:
        """``matches`` for many texts, searched as one string (a phrase check runs on thousands of messages).

        The lower-cased texts are joined by a line holding ``A``: a word
        character, so no gap between units spans it, and an upper-case one,
        so no unit (lower case) contains it.
        """
        if not self.phrases:
            return [True] * len(texts)
        lowered = [text.lower() for text in texts]
        joined = _JOIN.join(lowered)
        starts: list[int] = []
        found = [0] * len(texts)
        for number, pattern in enumerate(_phrase_patterns(self.phrases)):
            for match in pattern.finditer(joined):
                if not starts:
                    starts = list(accumulate((len(text) + len(_JOIN) for text in lowered[:-1]), initial=0))
                text = bisect_right(starts, match.start()) - 1
                if found[text] == number:
                    found[text] = number + 1
        return [count == len(self.phrases) for count in found]


@lru_cache(maxsize=256)
def _phrase_patterns(phrases: tuple[str, ...]) -> list[re.Pattern[str]]:
    """A regular expression per phrase key over the lower-cased text: the same test as ``phrase in
    unit_key(text)``, without rebuilding the text's key (this runs on every candidate message of a phrase
    query). Each starts with a literal, which the regular expression engine finds fast."""
    return [re.compile(_phrase_pattern(phrase.split())) for phrase in phrases]


def _phrase_pattern(units: list[str]) -> str:
    word = f"[^\\W_{UNSEGMENTED}]"  # a letter or digit: what units are made of
    gap = f"(?:_|[^\\w{UNSEGMENTED}])"  # what lies between units: neither a letter, a digit nor a unit of its own
    parts = []
    for index, unit in enumerate(units):
        if index:
            both_words = not _UNSEGMENTED_RUN.match(units[index - 1]) and not _UNSEGMENTED_RUN.match(unit)
            parts.append(gap + ("+" if both_words else "*"))
        parts.append(re.escape(unit))
    if not _UNSEGMENTED_RUN.match(units[0]):  # no word character before the first unit, checked after it
        parts.insert(1, f"(?<!{word}.{{{len(units[0])}}})")
    edge_end = "" if _UNSEGMENTED_RUN.match(units[-1]) else f"(?!{word})"
    return "".join(parts) + edge_end


def parse_query(text: str) -> Query:
    """The query for user text; raises TypeError for anything but a string."""
    if not isinstance(text, str):
        raise TypeError(f"a search query must be a string, got {type(text).__name__}")
    cleaned = _CONTROL.sub(" ", text[:MAX_QUERY_CHARS].translate(_QUOTES)).strip()
    pieces = cleaned.split('"')
    if len(pieces) % 2 == 0:  # an unbalanced quote: the last one is just punctuation
        pieces[-2:] = [pieces[-2] + " " + pieces[-1]]
    in_phrases: list[str] = []
    required: set[str] = set()
    optional: list[str] = []
    phrases: list[str] = []
    for index, piece in enumerate(pieces):
        if index % 2:  # inside quotes
            _add_phrase(piece, in_phrases, required, phrases)
            continue
        optional.extend(terms(_RUN.sub(" ", piece)))
        for run in _RUN.findall(piece):
            _add_phrase(run, in_phrases, required, phrases)
    ordered = list(dict.fromkeys(in_phrases + optional))[:MAX_TERMS]
    return Query(text=cleaned, terms=tuple(ordered), required=frozenset(required) & frozenset(ordered),
                 phrases=tuple(dict.fromkeys(phrases)))


def _add_phrase(text: str, in_phrases: list[str], required: set[str], phrases: list[str]) -> None:
    """Record a phrase: all its terms are ranked, but only its units (and bigrams) are required.

    A whole word or compound (``data_used``, ``agent.py``) is not required,
    because the phrase also occurs where other punctuation or a space joins
    its units (``data used``), and such a text does not hold that term.
    """
    key = unit_key(text)
    if not key.strip():
        return
    found = terms(text)
    units = {unit[:MAX_TERM_CHARS] for unit in key.split()}
    in_phrases.extend(found)
    required.update(term for term in found if term in units or _UNSEGMENTED_RUN.match(term))
    phrases.append(key)
