"""The offline model as the background-review model: it saves what the user said about themselves.

A review request opens with ``[background review]``. The model reads the
user's own messages for plain self-descriptions ("my name is …", "I prefer
…", "please always …") and saves each one that the system prompt does not
already show to the user profile with the memory tool; when there is none it
answers "Nothing to save.". Rule-based and deterministic, like the rest of
the offline model, so the review path can run end to end without a network.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ...core.messages import text_of
from .intents import Intent
from .offered import Draft, OfferedTools, plan_tool_calls

Message = dict[str, Any]

REVIEW_OPENING = re.compile(r"^\s*\[background review\]", re.IGNORECASE)
_ASKS_FOR_MEMORY = re.compile(r"\bmemory tool\b", re.IGNORECASE)
NOTHING_TO_SAVE = "Nothing to save."
#: The described part ends at a sentence or clause break, or where a new "and I …" starts.
_END = r"(?=\s*(?:[.,;:!?\n]|\band\s+(?:i|my)\b|\bbut\b|$))"
_REST = rf"(?P<x>[^.;!?\n]{{2,120}}?){_END}"
#: (pattern matched at a sentence start or after "and"/"but", how the fact is written down)
_FACTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), template) for pattern, template in (
        (rf"my name is (?P<x>[^,.;!?\n]{{1,60}}?){_END}", "Name: {x}"),
        (rf"(?:please\s+)?call me (?P<x>[^,.;!?\n]{{1,40}}?){_END}", "Wants to be called {x}"),
        (rf"i (?:really |much |strongly )?prefer {_REST}", "Prefers {x}"),
        (rf"i (?:don't|do not) like {_REST}", "Dislikes {x}"),
        (rf"i (?:dislike|hate) {_REST}", "Dislikes {x}"),
        (rf"i (?:really )?(?:like|love) {_REST}", "Likes {x}"),
        (rf"i(?:'m| am) (?P<x>an? [^.;!?\n]{{2,100}}?){_END}", "Is {x}"),
        (rf"i (?:work|am working) (?P<x>(?:on|at|with|for|in) [^.;!?\n]{{2,100}}?){_END}", "Works {x}"),
        (rf"i (?:usually |mostly |always )?use {_REST}", "Uses {x}"),
        (rf"(?:please\s+)?always {_REST}", "Asked to always {x}"),
        (rf"(?:please\s+)?never {_REST}", "Asked to never {x}"),
    )
)
_SENTENCE_START = re.compile(r"(?:^|[.!?;\n]\s*|\b(?:and|but|also)\s+)", re.IGNORECASE)


def user_facts(text: str) -> list[str]:
    """The self-descriptions in one user message, written as profile entries, in order."""
    facts: list[str] = []
    for start in _SENTENCE_START.finditer(text):
        for pattern, template in _FACTS:
            match = pattern.match(text, start.end())
            if match is not None:
                fact = template.format(x=" ".join(match.group("x").split()))
                if fact not in facts:
                    facts.append(fact)
                break
    return facts


def is_review_request(request: str) -> bool:
    return REVIEW_OPENING.match(request) is not None


def review_reply(request: str, messages: Sequence[Message], offered: OfferedTools, digest: str) -> Draft:
    """The reply to a review request: memory tool calls, or "Nothing to save."."""
    if not _ASKS_FOR_MEMORY.search(request) or offered.find("memory") is None:
        return Draft(text=NOTHING_TO_SAVE)
    known = text_of(messages[0]) if messages and messages[0].get("role") == "system" else ""
    facts: list[str] = []
    for message in messages[:-1]:
        text = text_of(message) if message.get("role") == "user" else ""
        if text and not text.lstrip().startswith(("<", "[")):
            facts.extend(fact for fact in user_facts(text) if fact not in facts and fact not in known)
    if not facts:
        return Draft(text=NOTHING_TO_SAVE)
    intents = [Intent("memory", {"action": "add", "target": "user", "content": fact}) for fact in facts]
    return plan_tool_calls(intents, offered, digest)
