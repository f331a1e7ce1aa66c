"""What a compaction policy brings: its presets, what it does at a compaction, when it fires, and its sources.

One module per agent exports one ``POLICY``; built-in modules and packages that
declare an entry point in the group ``hermeslab.policies`` are read alike, so a
third party's policy is listed, validated and run exactly as a built-in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput
from hermeslab.core.config import CompressionConfig

#: What the agent does at a compaction: messages in, the rebuilt messages out (memory outlives one compaction).
Strategy = Callable[[list[Message], ZooInput, dict[str, Any]], BaselineResult]
#: When it fires: the smallest prompt, in the thresholds' unit, at which it compacts, for (config, window, output cap).
TriggerRule = Callable[[CompressionConfig, int, "int | None"], int]
#: The output reserve the trigger keeps for a given output cap (None: the agent's own default).
OutputReserve = Callable[["int | None"], int]


@dataclass(frozen=True)
class Citation:
    """One number or rule and where it was read: ``where`` names file and line (or page), at ``Policy.source``."""

    rule: str
    hermeslab: str
    where: str


@dataclass(frozen=True)
class Preset:
    """A named configuration: dotted ``compression.*`` overrides laid over ``seed``'s full list."""

    name: str
    overrides: Mapping[str, Any]
    #: One line for ``hermeslab presets``: when it fires and what it keeps.
    summary: str


@dataclass(frozen=True)
class Policy:
    """Everything hermeslab knows of one agent's compaction, in one place."""

    #: The agent as its users name it, e.g. "Codex CLI".
    agent: str
    #: Repository (or document) and the commit, version or date read, e.g. "openai/codex @ 0100b103".
    source: str
    presets: tuple[Preset, ...]
    #: How parity was established: "parity" (decisions compared against the agent's own code) or "reading".
    fidelity: str = "reading"
    strategies: Mapping[str, Strategy] = field(default_factory=dict)
    triggers: Mapping[str, TriggerRule] = field(default_factory=dict)
    output_reserves: Mapping[str, OutputReserve] = field(default_factory=dict)
    citations: tuple[Citation, ...] = ()
    #: Raises ``ConfigError`` naming the first value this policy cannot use (None: nothing beyond the schema).
    validate: Callable[[CompressionConfig], None] | None = None
