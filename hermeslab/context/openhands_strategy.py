"""The ``openhands_*`` compression strategies, wired to a config and a summariser.

``openhands_condensers`` holds the rules; this module picks one from
``compression.strategy``, reads its sizes from the config and asks the
summariser for the text of a summary. A compression asked for while the
context is within ``trigger_events`` (a token trigger, an overflow or
``/compress``) is OpenHands' condensation request: keep half of what is there.
A summariser that returns nothing leaves the context as it was, as OpenHands
does when its summary call fails.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.config import CompressionConfig
from .assemble import summary_text
from .baselines import BaselineResult
from .budget import Budgets
from .openhands_condensers import openhands_strategy
from .openhands_view import event_count
from .types import Summariser, SummaryRequest

#: ``compression.strategy`` → the rule of ``openhands_condensers``.
RULES = {"openhands_summarizing": "summarizing", "openhands_amortized": "amortized", "openhands_masking": "masking"}
#: ``minimum_progress`` of OpenHands' summarizing condenser (openhands-sdk 1.58.2,
#: openhands/sdk/context/condenser/llm_summarizing_condenser.py line 72).
MINIMUM_PROGRESS = 0.1


class _NoSummary(Exception):
    """The summariser returned no text."""


def openhands_compaction(messages: list[dict], *, cfg: CompressionConfig, summariser: Summariser,
                         focus: str | None, budgets: Budgets, estimate: Callable[[dict], int]) -> BaselineResult:
    """One compression of ``messages`` under the OpenHands rule ``cfg.strategy`` names."""
    rule = RULES.get(cfg.strategy)
    if rule is None:
        raise ValueError(f"compression.strategy {cfg.strategy!r} is not an OpenHands strategy")
    limit = cfg.trigger_events
    if limit is None or limit < 1:
        raise ValueError(f"compression.strategy {cfg.strategy} needs compression.trigger_events, a positive integer")
    errors: list[str] = []

    def summarise(span: list[dict]) -> str:
        outcome = summariser.summarise(SummaryRequest(span=span, previous_summary=None, focus=focus,
                                                      budget_tokens=budgets.max_summary_tokens))
        if not outcome.body.strip():
            errors.append(outcome.error or "the summariser returned no text")
            raise _NoSummary()
        return summary_text(outcome.body.strip())

    try:
        return openhands_strategy(messages, rule=rule, max_size=limit, keep_first=cfg.keep_first_events,
                                  attention_window=limit, minimum_progress=MINIMUM_PROGRESS,
                                  requested=event_count(messages) <= limit, summarise=summarise,
                                  estimate=estimate, min_saving=cfg.min_saving)
    except _NoSummary:
        before = sum(map(estimate, messages))
        return BaselineResult(list(messages), before, before, 0, False,
                              {"strategy": cfg.strategy, "outcome": "no_summary", "error": errors[-1]}, aborted=True)
