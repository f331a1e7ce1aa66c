"""A policy module written as a new agent's module is dropped into ``hermeslab/policies/``.

It keeps the system prompt and everything from the newest user message on,
fires at a tenth of the window, keeps a fixed reserve for the reply, counts
its compactions in the conversation's memory and refuses a config that
rotates sessions, so every part of the contract is exercised end to end.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, unchanged
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.errors import ConfigError
from hermeslab.policies.base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

PRESET = "sample-newest-request"
STRATEGY = "sample_newest_request"
RESERVE = 123


def keep_newest_request(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The system prompt, then the newest user message and what follows it."""
    system, history = split_system(messages)
    memory["compactions"] = memory.get("compactions", 0) + 1
    record = {"strategy": STRATEGY, "compactions": memory["compactions"]}
    start = max((i for i, m in enumerate(history) if m.get("role") == "user"), default=0)
    if start == 0:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_drop"})
    return result(messages, system + history[start:], condensed=start, zoo=zoo, record={**record, "outcome": "kept"})


def tenth_of_window(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    return max(1, window // 10)


def must_be_in_place(cfg: CompressionConfig) -> None:
    if not cfg.in_place:
        raise ConfigError(f"compression.in_place: {STRATEGY} rebuilds its context in place, got false")


POLICY = Policy(
    agent="Sample agent",
    source="tests/dropped_policy (this repository)",
    presets=(Preset(PRESET, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY},
                    "at a tenth of the window: keep the newest request and what follows."),),
    strategies={STRATEGY: keep_newest_request},
    triggers={STRATEGY: tenth_of_window},
    output_reserves={STRATEGY: lambda max_tokens: RESERVE},
    citations=(Citation("fires at a tenth of the window", "tenth_of_window", "this file"),),
    validate=must_be_in_place,
)
