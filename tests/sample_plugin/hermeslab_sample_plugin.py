"""A plug-in policy: keeps the system prompt and the newest half of the other messages, starting at a user message."""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, unchanged
from hermeslab.policies.base import IN_PLACE_NO_BREAKER, Policy, Preset

STRATEGY = "plugin_newest_half"


def newest_half(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    system, history = split_system(messages)
    starts = [i for i, m in enumerate(history) if m.get("role") == "user" and i >= len(history) // 2]
    if not starts or starts[0] == 0:
        return unchanged(messages, zoo, {"strategy": STRATEGY, "outcome": "nothing_to_drop"})
    kept = history[starts[0]:]
    return result(messages, system + kept, condensed=starts[0], zoo=zoo,
                  record={"strategy": STRATEGY, "outcome": "kept_newest_half"})


POLICY = Policy(
    agent="Sample plug-in agent",
    source="hermeslab-sample-plugin @ 0.1",
    presets=(Preset("plugin-newest-half", {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                                           "compression.threshold": 0.6},
                    "at 60% of the window: keep the newest half of the conversation from a user message on."),),
    strategies={STRATEGY: newest_half},
)
