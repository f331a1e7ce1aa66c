"""A config's policy put to work: the compactor, the budgets and the effective values, each with the rules its
strategy brings, so a plug-in's strategy runs wherever a built-in one does."""

from __future__ import annotations

from typing import Any

from hermeslab.context.budget import Budgets, Resolution, derive_budgets, explain_threshold, resolve
from hermeslab.context.compactor import Compactor
from hermeslab.context.types import Summariser
from hermeslab.core.config import CompressionConfig, Config

from .loading import strategy_rules


def make_compactor(config: Config, summariser: Summariser, **options: Any) -> Compactor:
    """A Compactor running ``config``'s strategy (``options`` as ``Compactor`` takes them)."""
    return Compactor(config, summariser, rules=strategy_rules(config.compression), **options)


def resolution_of(config: Config, context_length: int | None = None) -> Resolution:
    """``config``'s effective threshold, budgets and output reserve, each with its rule, at its window (or
    ``context_length``), as the compactor resolves them."""
    window = config.model.context_length if context_length is None else context_length
    return resolve(config.compression, window, config.model.max_tokens, strategy_rules(config.compression))


def budgets_of(cfg: CompressionConfig, context_length: int, max_tokens: int | None = None,
               fixed_tokens: int = 0) -> Budgets:
    """``derive_budgets`` with the trigger rule of ``cfg``'s strategy."""
    return derive_budgets(cfg, context_length, max_tokens, fixed_tokens, rules=strategy_rules(cfg))


def threshold_sentence(config: Config) -> str:
    """Where automatic compression fires under ``config`` and why (``explain_threshold`` of its resolution)."""
    return explain_threshold(resolution_of(config) if config.compression.enabled else None)
