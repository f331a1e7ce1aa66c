"""What a compaction policy supplies for one ``compression.strategy``, in the form the compactor and the budgets use.

The policies (``hermeslab.policies``) sit above this package: they resolve a
config's strategy to one ``StrategyRules`` and hand it down, so the machinery
here runs any agent's policy without knowing which agents exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.errors import ConfigError

if TYPE_CHECKING:
    from .baselines import BaselineResult
    from .zoo_common import ZooInput

#: The strategy the compactor runs itself: hermeslab's (and Hermes's) summary pipeline.
PIPELINE = "summary"

#: What the agent does at a compaction: messages in, the rebuilt messages out (memory outlives one compaction).
Strategy = Callable[[list[dict[str, Any]], "ZooInput", dict[str, Any]], "BaselineResult"]
#: When it fires: the smallest prompt, in the thresholds' unit, at which it compacts, for (config, window, output cap).
TriggerRule = Callable[[CompressionConfig, int, "int | None"], int]
#: The output reserve the trigger keeps for a given output cap (None: the agent's own default).
OutputReserve = Callable[["int | None"], int]


@dataclass(frozen=True)
class StrategyRules:
    """One strategy as a policy defines it: what runs, when it fires, what it keeps for the reply."""

    strategy: str
    run: Strategy
    #: None: the Hermes-style rule (a fraction of the window less the output cap, floored and capped).
    trigger: TriggerRule | None = None
    output_reserve: OutputReserve | None = None
    #: Whether hermeslab re-injects open todo items after a compaction; other agents put back nothing of hermeslab's.
    reinjects_todos: bool = False


def rules_matching(cfg: CompressionConfig, rules: StrategyRules | None) -> StrategyRules | None:
    """``rules`` checked against ``cfg.strategy``: a strategy other than the pipeline cannot run without its rules."""
    if rules is None:
        if cfg.strategy != PIPELINE:
            raise ConfigError(f"compression.strategy {cfg.strategy!r} comes from a policy: resolve the config "
                              "through hermeslab.policies to run it")
        return None
    if rules.strategy != cfg.strategy:
        raise ConfigError(f"the rules given are for strategy {rules.strategy!r}, the config names {cfg.strategy!r}")
    return rules
