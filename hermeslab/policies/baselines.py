"""hermeslab's summary-free arms: what a comparison puts beside the agents' policies to show what summaries buy.

The strategies themselves are machinery of ``hermeslab.context.baselines``;
this module makes them runnable by name (``compression.strategy``), with the
Hermes-style trigger of whatever preset they are laid over.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult, observation_masking, sliding_window
from hermeslab.context.zoo_common import Message, ZooInput

from .base import Policy

MASKING = "observation_masking"
SLIDING = "sliding_window"


def mask_observations(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """Every tool output but the newest few replaced by a placeholder."""
    return observation_masking(messages, estimate=zoo.estimate, min_saving=zoo.cfg.min_saving)


def slide_window(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The oldest tool groups dropped until the rest fits the tail budget."""
    return sliding_window(messages, budget_tokens=zoo.budgets.tail_token_budget, estimate=zoo.estimate,
                          min_saving=zoo.cfg.min_saving)


POLICY = Policy(
    agent="hermeslab baselines",
    source="hermeslab (this repository): hermeslab.context.baselines",
    presets=(),
    fidelity="parity",
    strategies={MASKING: mask_observations, SLIDING: slide_window},
    reinjects_todos=True,
)
