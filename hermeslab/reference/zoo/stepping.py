"""hermeslab's side of a zoo parity check where the agent compacts before a reply once the history reaches a
threshold: the stub summariser both sides share and the stepping over a recording.

Aider, LangChain and Kimi CLI decide the same way: before each assistant reply
they count the history and, at or past the threshold, run their compaction;
a pass that condensed something becomes the history the next reply sees.
What differs per agent (its settings, its trigger, how a view names what a
compaction wrote) stays in its ``*_parity`` module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hermeslab.context.budget import derive_budgets
from hermeslab.context.types import SummaryOutcome, SummaryRequest
from hermeslab.context.zoo_common import Message, ZooInput
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.reference.zoo.checks import Step

#: The text every stub summary answers with, on both sides.
STUB = "the stub summary"


class StubSummariser:
    """A summariser with a fixed answer, or one that always fails."""

    def __init__(self, fails: bool = False):
        self.fails = fails

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        return SummaryOutcome(body="", error="the summary model is down") if self.fails else SummaryOutcome(body=STUB)


def stub_zoo_input(cfg: CompressionConfig, window: int, estimate: Callable[[Message], int],
                   fails: bool = False) -> ZooInput:
    """The strategy's input: its budgets size the summary request only (the stub ignores them)."""
    budgets = derive_budgets(dataclasses.replace(cfg, strategy="summary"), window)
    return ZooInput(cfg=cfg, budgets=budgets, summariser=StubSummariser(fails), estimate=estimate)


def steps_before_replies(messages: list[Message], strategy: Callable[..., Any], zoo: ZooInput, threshold: int,
                         view: Callable[[list[Message], dict[int, str]], list[str]]) -> list[Step]:
    """One record per recorded assistant reply: whether a compaction condensed the history just before it, and
    the history's ``view`` then (``keys`` maps each recorded message's id to ``m<i>``)."""
    keys = {id(m): f"m{i}" for i, m in enumerate(messages)}
    history: list[Message] = []
    memory: dict[str, Any] = {}
    steps: list[Step] = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            compacted = False
            if sum(zoo.estimate(m) for m in history) >= threshold:
                outcome = strategy(history, zoo, memory)
                if outcome.condensed:
                    history, compacted = list(outcome.messages), True
            steps.append({"at": index, "compacted": compacted, "view": view(history, keys)})
        history.append(message)
    return steps
