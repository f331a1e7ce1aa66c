"""What the compaction-zoo strategies share: their inputs, their result, and one summary request.

Each zoo strategy rebuilds the message list the way one agent does after its
compaction. They differ in what they keep; they all ask hermeslab's summariser
(so two strategies compared on one recording differ in what they keep, not in
who wrote the summary) and report a result the trigger policy and the replay
read like any other strategy's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hermeslab.core.config import CompressionConfig

from .baselines import BaselineResult
from .budget import Budgets, summary_budget
from .types import Summariser, SummaryRequest

Message = dict[str, Any]


@dataclass(frozen=True)
class ZooInput:
    """Everything a zoo strategy needs besides the messages."""

    cfg: CompressionConfig
    budgets: Budgets
    summariser: Summariser
    #: Token estimate of one message, in the unit the thresholds use.
    estimate: Callable[[Message], int]
    #: The output cap the model is configured with (None: the agent's own default reserve applies).
    max_tokens: int | None = None
    focus: str | None = None


def total(messages: Sequence[Message], estimate: Callable[[Message], int]) -> int:
    return sum(estimate(m) for m in messages)


def result(before: Sequence[Message], after: list[Message], *, condensed: int, zoo: ZooInput, record: dict,
           summary: str | None = None, aborted: bool = False, fallback: bool = False,
           error: str | None = None) -> BaselineResult:
    """A BaselineResult with the token counts measured and ``min_saving`` applied to decide effectiveness."""
    tokens_before = total(before, zoo.estimate)
    tokens_after = total(after, zoo.estimate)
    saved = tokens_before - tokens_after
    effective = (not aborted and condensed > 0 and saved > 0 and saved >= zoo.cfg.min_saving * tokens_before)
    record = {**record, "tokens_before": tokens_before, "tokens_after": tokens_after}
    return BaselineResult(after, tokens_before, tokens_after, condensed, effective, record, aborted, summary, fallback,
                     error)


def unchanged(messages: list[Message], zoo: ZooInput, record: dict, *, aborted: bool = False,
              error: str | None = None) -> BaselineResult:
    """The input handed back: nothing to compact, or the agent refuses this compaction."""
    return result(messages, list(messages), condensed=0, zoo=zoo, record=record, aborted=aborted, error=error)


@dataclass(frozen=True)
class Summary:
    """A summary body, or why there is none (``body`` empty)."""

    body: str
    fallback_used: bool = False
    error: str | None = None


def summarise(span: list[Message], zoo: ZooInput, *, kept: list[Message] | None = None) -> Summary:
    """Ask the summariser for ``span``; a summariser fault is an empty body with its reason, never an exception."""
    span_tokens = total(span, zoo.estimate)
    budget = summary_budget(zoo.cfg, zoo.budgets, span_tokens)
    window = zoo.budgets.context_length if zoo.cfg.summary_fits_window else None
    request = SummaryRequest(span=span, previous_summary=None, focus=zoo.focus, budget_tokens=budget,
                             window_tokens=window, kept=kept)
    try:
        outcome = zoo.summariser.summarise(request)
    except Exception as exc:  # a summariser fault must not lose the conversation
        return Summary("", error=f"{type(exc).__name__}: {exc}")
    body = (outcome.body or "").strip()
    return Summary(body, outcome.fallback_used, outcome.error if not body else None)


def summary_message(role: str, text: str) -> Message:
    """A message holding a summary, flagged so every part of hermeslab recognises it as one."""
    return {"role": role, "content": text, "_compressed_summary": True}


def split_system(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """(leading system/developer messages, the rest): every zoo agent keeps its instructions apart from history."""
    first = 0
    while first < len(messages) and messages[first].get("role") in ("system", "developer"):
        first += 1
    return messages[:first], messages[first:]
