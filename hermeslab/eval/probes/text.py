"""Text as probes compare it: one normal form for golds, answers and contexts.

A gold is found in a context, and an answer matches a gold, by the same
rule: case folded, runs of whitespace made one space, and a gold or answer
also loses the quotes, backticks and closing punctuation around it. Because
the context is normalised the same way (without the trimming), a gold cut
verbatim from a message is always found in any context holding that message.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..metrics import message_text

#: What an answer says when the context does not hold the answer; it always scores 0.
UNKNOWN = "unknown"

_SPACE = re.compile(r"\s+")
_TRIM = " \t\r\n\"'`«»“”‘’.,;:!?()[]{}<>*_"


def normal(text: str) -> str:
    """``text`` case folded with its whitespace runs made single spaces (what contexts are searched as)."""
    return _SPACE.sub(" ", text.casefold())


def normal_answer(text: str) -> str:
    """A gold or an answer in normal form: ``normal`` and trimmed of surrounding quotes and punctuation."""
    return normal(text).strip(_TRIM)


def context_text(messages: Sequence[dict[str, Any]]) -> str:
    """What a context says, in normal form: every message's text and tool-call arguments."""
    return normal("\n".join(message_text(m) for m in messages))


def is_unknown(answer: str) -> bool:
    """Whether an answer declines (``unknown``, in any case, with or without punctuation), or is empty."""
    return normal_answer(answer) in ("", UNKNOWN)
