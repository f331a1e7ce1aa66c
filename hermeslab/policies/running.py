"""A config's policy put to work: the compactor, the budgets and the threshold sentence, each with the rules
its strategy brings, so a plug-in's strategy runs wherever a built-in one does."""

from __future__ import annotations

from typing import Any

from hermeslab.context.budget import Budgets, derive_budgets, explain_threshold, threshold_rule
from hermeslab.context.compactor import Compactor
from hermeslab.context.types import Summariser
from hermeslab.core.config import CompressionConfig, Config

from .loading import strategy_rules


def make_compactor(config: Config, summariser: Summariser, **options: Any) -> Compactor:
    """A Compactor running ``config``'s strategy (``options`` as ``Compactor`` takes them)."""
    return Compactor(config, summariser, rules=strategy_rules(config.compression), **options)


def budgets_of(cfg: CompressionConfig, context_length: int, max_tokens: int | None = None,
               fixed_tokens: int = 0) -> Budgets:
    """``derive_budgets`` with the trigger rule of ``cfg``'s strategy."""
    return derive_budgets(cfg, context_length, max_tokens, fixed_tokens, rules=strategy_rules(cfg))


def threshold_reason(cfg: CompressionConfig, context_length: int, max_tokens: int | None = None) -> str:
    """Which rule set the trigger at this window (``threshold_rule`` with the strategy's own rule)."""
    return threshold_rule(cfg, context_length, max_tokens, strategy_rules(cfg))


def threshold_sentence(config: Config) -> str:
    """Where automatic compression fires and why (``explain_threshold`` with the strategy's own rule)."""
    return explain_threshold(config, strategy_rules(config.compression))
