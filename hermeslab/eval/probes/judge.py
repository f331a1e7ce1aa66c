"""Judging an answer against a probe's gold: 2 correct, 1 partly, 0 wrong or unknown.

The deterministic matcher compares normal forms (``text``) by probe type:

* a set (the files of an artifact probe): 2 when the answer names every
  member, 1 when it names some, 0 when none;
* a fact (recall, an artifact's last state): 2 for the gold exactly, 1 when
  the answer contains the gold or is a part of it;
* a sentence (continuation, decision, constraint, model-written): 2 for the
  gold exactly or quoted whole, 1 when the answer carries at least half of
  the gold's words.

An answer that declines (``unknown``) or is empty scores 0 under every rule.
``EndpointJudge`` asks a model instead, where a judgement needs reading.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Protocol

from hermeslab.core.provider import ChatRequest, Provider

from .bank import Probe
from .calls import OnCall, reported_complete
from .text import is_unknown, normal, normal_answer

#: Types whose gold is a sentence rather than one exact fact.
SENTENCE_TYPES = ("continuation", "decision", "constraint", "model_written")
#: Share of a sentence gold's words an answer must carry for one point.
PARTIAL_WORDS = 0.5
_WORD = re.compile(r"\w+")


class Judge(Protocol):
    #: What the judgements are cached and reported under.
    name: str

    def points(self, probe: Probe, answer: str) -> int: ...


def match_points(probe_type: str, gold: str | tuple[str, ...], answer: str) -> int:
    """The deterministic points of ``answer`` for a probe of ``probe_type`` with ``gold`` (module docstring)."""
    if not isinstance(answer, str) or is_unknown(answer):
        return 0
    said = normal(answer)
    if isinstance(gold, tuple):
        found = sum(1 for item in gold if normal_answer(item) in said)
        return 2 if found == len(gold) else 1 if found else 0
    expected, given = normal_answer(gold), normal_answer(answer)
    if given == expected:
        return 2
    if probe_type in SENTENCE_TYPES:
        if expected in said:
            return 2
        words = set(_WORD.findall(expected))
        return 1 if words and len(words & set(_WORD.findall(said))) >= PARTIAL_WORDS * len(words) else 0
    return 1 if expected in said or given in expected else 0


class MatchJudge:
    """The deterministic matcher as a judge (its judgements cost nothing to redo)."""

    name = "match-1"
    cheap = True

    def points(self, probe: Probe, answer: str) -> int:
        return match_points(probe.probe_type, probe.gold, answer)


_JUDGE_SYSTEM = (
    "You grade an answer against a reference answer. Reply with one digit and nothing else: 2 if the "
    "answer is correct, 1 if it is partly correct, 0 if it is wrong or says it does not know."
)


class JudgeReplyError(ValueError):
    """A judge model's reply that is not a bare 0, 1 or 2."""


class EndpointJudge:
    """A model judges: one request per answer, temperature 0, a one-digit reply.

    A declining answer scores 0 without a call, as under the matcher.
    """

    def __init__(self, provider: Provider, model: str, *, max_tokens: int = 8):
        if not isinstance(model, str) or not model:
            raise ValueError("EndpointJudge needs a model name")
        self.provider, self.model, self.max_tokens = provider, model, max_tokens
        digest = hashlib.sha256(_JUDGE_SYSTEM.encode()).hexdigest()[:8]
        self.name = f"llm:{model}:{digest}"
        #: Told the fields of every call, answered or failed (the exam logs them in its lab); None: not told.
        self.on_call: OnCall | None = None

    def points(self, probe: Probe, answer: str) -> int:
        if not isinstance(answer, str) or is_unknown(answer):
            return 0
        reference = "; ".join(probe.golds)
        request = ChatRequest(messages=[{"role": "system", "content": _JUDGE_SYSTEM},
                                        {"role": "user", "content": f"QUESTION: {probe.question}\n"
                                                                    f"REFERENCE ANSWER: {reference}\n"
                                                                    f"ANSWER: {answer}"}],
                              model=self.model, temperature=0.0, max_tokens=self.max_tokens)
        answered = reported_complete(self.provider.complete, request, self.on_call)
        reply = (answered.message.get("content") or "").strip()
        if reply not in ("0", "1", "2"):
            raise JudgeReplyError(f"the judge replied {json.dumps(reply[:80])}, not a bare 0, 1 or 2")
        return int(reply)


def judgement_key(judge_name: str, probe: Probe, answer: str) -> str:
    """The cache key of one judgement: judge, probe type, question, gold and answer."""
    payload: list[Any] = [judge_name, probe.probe_type, probe.question, probe.gold, answer]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()
