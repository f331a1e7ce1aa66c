"""hermeslab's trivial arms: what a comparison puts beside the agents' policies to show what they buy.

* ``baseline-no-compaction`` never compacts: the context grows until the
  provider refuses it, and the turn fails there.
* ``baseline-recency`` keeps the newest messages that fit the verbatim-tail
  budget ``seed`` would keep, whole tool groups at a time, and summarises
  nothing; it fires where ``seed`` fires.

``observation_masking`` and ``sliding_window`` (machinery of
``hermeslab.context.baselines``) are runnable by name as well, with the
Hermes-style trigger of whatever preset they are laid over.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.assemble import sanitize_tool_pairs
from hermeslab.context.baselines import BaselineResult, observation_masking, sliding_window, units_of
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, unchanged

from .base import Policy, Preset

MASKING = "observation_masking"
SLIDING = "sliding_window"
RECENCY = "recency"
NO_COMPACTION = "baseline-no-compaction"
RECENCY_PRESET = "baseline-recency"


def mask_observations(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """Every tool output but the newest few replaced by a placeholder."""
    return observation_masking(messages, estimate=zoo.estimate, min_saving=zoo.cfg.min_saving)


def slide_window(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The oldest tool groups dropped until the rest fits the tail budget."""
    return sliding_window(messages, budget_tokens=zoo.budgets.tail_token_budget, estimate=zoo.estimate,
                          min_saving=zoo.cfg.min_saving)


def newest_that_fit(history: list[Message], budget: int, estimate) -> int:
    """Where the kept suffix of ``history`` starts: the newest whole units (a tool-calling assistant message with
    its results, or one message) whose cost fits ``budget``; the newest unit is kept even when it alone does not."""
    start, spent = len(history), 0
    for unit in reversed(units_of(history, 0)):
        cost = sum(estimate(history[i]) for i in unit)
        if start < len(history) and spent + cost > budget:
            break
        start, spent = unit[0], spent + cost
    return start


def keep_recent(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The system prompt and the newest messages that fit the tail budget; nothing summarised."""
    system, history = split_system(messages)
    budget = zoo.budgets.tail_token_budget
    start = newest_that_fit(history, budget, zoo.estimate)
    record: dict[str, Any] = {"strategy": RECENCY, "budget_tokens": budget}
    if start == 0:
        return unchanged(messages, zoo, {**record, "outcome": "fits"})
    kept, pairs = sanitize_tool_pairs(history[start:], missing="drop")
    over = sum(map(zoo.estimate, kept)) > budget
    return result(messages, system + kept, condensed=len(history) - len(kept), zoo=zoo,
                  record={**record, "outcome": "kept_newest", "dropped": start, "over_budget": over,
                          "tool_pairs": pairs})


POLICY = Policy(
    agent="hermeslab baselines",
    source="hermeslab (this repository): hermeslab.policies.baselines, hermeslab.context.baselines",
    presets=(
        Preset(NO_COMPACTION, {"compression.enabled": False},
               "never: the context grows until the provider refuses it, and that turn fails."),
        Preset(RECENCY_PRESET, {"compression.strategy": RECENCY},
               "where seed fires: keep the newest messages that fit seed's verbatim tail, whole tool groups at a "
               "time; nothing is summarised."),
    ),
    fidelity="parity",
    strategies={MASKING: mask_observations, SLIDING: slide_window, RECENCY: keep_recent},
    reinjects_todos=True,
)
