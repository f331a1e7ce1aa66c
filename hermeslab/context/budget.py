"""Token budgets derived from the window size: when to compress, how much to keep, how long a summary may be.

All values are derived once per (config, window, output cap, fixed cost) so that every
phase and the trigger policy compare against the same numbers, and so the
numbers can be logged next to each decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hermeslab.core.compression_config import validate_values
from hermeslab.core.config import CompressionConfig, Config

from .lean_tail import capped_tail_tokens, lean_tail_tokens
from .rules import StrategyRules, rules_matching

_TARGET_RATIO_RANGE = (0.10, 0.80)


@dataclass(frozen=True)
class Budgets:
    context_length: int
    #: The window left for the prompt once the output cap is reserved.
    effective_window: int
    #: Prompt size at which automatic compression fires.
    threshold_tokens: int
    #: Tokens of recent messages kept verbatim.
    tail_token_budget: int
    #: How far the tail walk may overshoot ``tail_token_budget``.
    soft_tail_tokens: int
    #: Upper bound of a summary's length.
    max_summary_tokens: int
    #: The threshold fraction after the small-window rule.
    threshold_percent: float
    #: Tokens every request carries whatever is compressed (system prompt, tool schemas).
    fixed_tokens: int = 0

    def as_record(self) -> dict:
        return dict(vars(self))  # every field is a number: no need for asdict's deep copy


def effective_threshold_percent(cfg: CompressionConfig, context_length: int) -> float:
    """The configured fraction, raised for small windows when the config asks for it."""
    if cfg.small_window_limit is not None and context_length < cfg.small_window_limit:
        return max(cfg.threshold, cfg.small_window_threshold)
    return cfg.threshold


def derive_budgets(cfg: CompressionConfig, context_length: int, max_tokens: int | None = None,
                   fixed_tokens: int = 0, rules: StrategyRules | None = None) -> Budgets:
    """Budgets for a window of ``context_length`` tokens with ``max_tokens`` reserved for output.

    The threshold has a floor (``min_threshold_tokens``) so that mid-sized windows
    do not compress early; when that floor would reach the whole window, the
    trigger falls back to ``min_trigger_ratio`` of it, always leaving at least
    one token of headroom; ``max_trigger_ratio`` caps it for every window, so
    the floor cannot fire at 98% of a window just above it. An output cap that
    would leave no room is ignored.

    The tail is ``target_ratio`` of the threshold, or, with ``tail_after_fixed_cost``,
    of what the threshold leaves once ``fixed_tokens`` (system prompt and tool
    schemas, which no compression removes) are paid: otherwise a large fixed
    cost plus a full-size tail lands the compressed prompt back at the threshold.
    Lean-era Hermes switches: ``floor_trigger_ratio`` lowers a binding floor,
    ``max_threshold_tokens`` caps the trigger, ``tail_mode: lean`` sizes the tail
    from the window alone, and ``tail_max_context_share`` caps the tail and its
    overshoot at a share of the window.

    ``rules`` are what the config's strategy brings (``hermeslab.policies``
    resolves them); an agent's own trigger rule replaces the fraction rule.
    """
    validate_values(cfg)
    rules = rules_matching(cfg, rules)
    if isinstance(context_length, bool) or not isinstance(context_length, int) or context_length <= 0:
        raise ValueError(f"context_length must be a positive integer, got {context_length!r}")
    if isinstance(fixed_tokens, bool) or not isinstance(fixed_tokens, int) or fixed_tokens < 0:
        raise ValueError(f"fixed_tokens must be a non-negative integer, got {fixed_tokens!r}")
    effective = context_length
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
        if context_length - max_tokens > 0:
            effective = context_length - max_tokens
    percent = effective_threshold_percent(cfg, context_length)
    proportional = int(effective * percent)
    threshold = max(proportional, cfg.min_threshold_tokens)
    if cfg.floor_trigger_ratio is not None and threshold > proportional:  # the floor binds: not above this share
        threshold = min(threshold, max(proportional, int(effective * cfg.floor_trigger_ratio)))
    if threshold >= effective:
        threshold = max(1, min(int(effective * cfg.min_trigger_ratio), effective - 1))
    if cfg.max_trigger_ratio is not None:
        threshold = max(1, min(threshold, int(effective * cfg.max_trigger_ratio)))
    if cfg.max_threshold_tokens is not None:
        threshold = max(1, min(threshold, cfg.max_threshold_tokens, context_length))
    if rules is not None and rules.trigger is not None:  # the agent's own rule decides where it fires
        threshold = rules.trigger(cfg, context_length, max_tokens)
    ratio = min(max(cfg.target_ratio, _TARGET_RATIO_RANGE[0]), _TARGET_RATIO_RANGE[1])
    history = max(0, threshold - fixed_tokens) if cfg.tail_after_fixed_cost else threshold
    tail = lean_tail_tokens(context_length) if cfg.tail_mode == "lean" else int(history * ratio)
    tail = capped_tail_tokens(tail, context_length, cfg.tail_max_context_share)
    if cfg.fixed_tail_tokens is not None:  # a tail set outright: no formula and no share cap size it
        tail = cfg.fixed_tail_tokens
    soft = capped_tail_tokens(int(tail * cfg.soft_tail_factor), context_length, cfg.tail_max_context_share)
    soft = max(soft, tail)  # the overshoot's cap never cuts into the budget itself
    return Budgets(
        context_length=context_length,
        effective_window=effective,
        threshold_tokens=threshold,
        tail_token_budget=tail,
        soft_tail_tokens=soft,
        max_summary_tokens=min(int(context_length * cfg.summary_context_share), cfg.summary_max_tokens),
        threshold_percent=percent,
        fixed_tokens=fixed_tokens,
    )


@dataclass(frozen=True)
class Resolution:
    """A config's effective compression values at one window, each with the rule that decided it.

    Resolved once per (config, window, output cap, strategy rules) by ``resolve``
    and read alike by the compactor and its driver, ``/status``, the notebook
    gauge, the chat front ends' threshold line and the A/B report, so none of
    them derives a value again or says something else about it.
    """

    budgets: Budgets
    #: Tokens the trigger keeps free for the reply.
    output_reserve: int
    #: Which rule set ``budgets.threshold_tokens``, in words a setting's author can act on.
    threshold_rule: str
    #: Where ``output_reserve`` comes from.
    reserve_rule: str
    #: What sets a summary's length.
    summary_rule: str

    @property
    def threshold_tokens(self) -> int:
        return self.budgets.threshold_tokens


def resolve(cfg: CompressionConfig, context_length: int, max_tokens: int | None = None,
            rules: StrategyRules | None = None) -> Resolution:
    """The budgets of ``derive_budgets`` with the output reserve and the rule behind each value."""
    budgets = derive_budgets(cfg, context_length, max_tokens, rules=rules)
    reserve, reserve_rule = _output_reserve(budgets, max_tokens, rules)
    return Resolution(budgets=budgets, output_reserve=reserve,
                      threshold_rule=_threshold_rule(cfg, budgets, reserve, reserve_rule, rules),
                      reserve_rule=reserve_rule, summary_rule=_summary_rule(cfg, budgets))


def _output_reserve(budgets: Budgets, max_tokens: int | None, rules: StrategyRules | None) -> tuple[int, str]:
    if rules is not None and rules.trigger is not None:
        if rules.output_reserve is None:
            return 0, "the agent's trigger keeps none"
        return (rules.output_reserve(max_tokens),
                "model.max_tokens" if max_tokens else "the agent's default, model.max_tokens being unset")
    reserve = budgets.context_length - budgets.effective_window
    if reserve:
        return reserve, "model.max_tokens"
    if max_tokens:
        return 0, f"none: model.max_tokens ({max_tokens:,}) leaves no room in the window, so it is ignored"
    return 0, "none: model.max_tokens is unset"


def _summary_rule(cfg: CompressionConfig, budgets: Budgets) -> str:
    cap = budgets.max_summary_tokens
    if cfg.summary_min_tokens >= cap:
        return (f"summary_min_tokens {cfg.summary_min_tokens:,} is not below the summary cap of {cap:,}, so every "
                "summary gets the minimum")
    return (f"summary_ratio {cfg.summary_ratio} of the summarised span, within summary_min_tokens "
            f"{cfg.summary_min_tokens:,} and the cap of {cap:,} (summary_context_share {cfg.summary_context_share} "
            f"of the window, at most summary_max_tokens {cfg.summary_max_tokens:,})")


def _threshold_rule(cfg: CompressionConfig, budgets: Budgets, reserve: int, reserve_rule: str,
                    rules: StrategyRules | None) -> str:
    """Which rule of ``derive_budgets`` set the trigger at this window.

    A setting can be accepted and still do nothing (a floor or a ceiling wins,
    or the strategy's policy brings its agent's own rule): the sentence says which
    rule decided, and for a floor, from which window on the fraction acts.
    """
    context_length = budgets.context_length
    window, percent, floor = budgets.effective_window, budgets.threshold_percent, cfg.min_threshold_tokens
    proportional = int(window * percent)
    fallback = f"so compression fires at min_trigger_ratio {cfg.min_trigger_ratio} of it"
    if rules is not None and rules.trigger is not None:
        rule = f"the trigger rule of the {cfg.preset} strategy ({cfg.strategy}) decides"
        if rules.output_reserve is not None:
            rule += f", keeping {reserve:,} tokens for the reply ({reserve_rule})"
        if budgets.threshold_tokens <= 1:
            rule += "; at this window that leaves no room for a prompt, so it compacts before every request"
        return rule
    cap = cfg.max_threshold_tokens
    if cap is not None and budgets.threshold_tokens == min(cap, context_length) < max(floor, proportional):
        return f"{cfg.preset}'s max_threshold_tokens cap of {cap:,} holds compression below {percent} of the window"
    if cfg.floor_trigger_ratio is not None and proportional < budgets.threshold_tokens < floor:
        return (f"{cfg.preset}'s min_threshold_tokens floor of {floor:,} would bind; floor_trigger_ratio holds it at "
                f"{cfg.floor_trigger_ratio} of the window")
    if floor >= window:
        return f"the min_threshold_tokens floor of {floor:,} reaches the window, {fallback}"
    if proportional >= window:
        return f"a threshold of {percent} reaches the window, {fallback}"
    if cfg.max_trigger_ratio is not None and budgets.threshold_tokens < max(floor, proportional):
        return f"{cfg.preset}'s max_trigger_ratio ceiling holds compression at {cfg.max_trigger_ratio} of the window"
    if floor > proportional:
        rule = f"{cfg.preset}'s min_threshold_tokens floor of {floor:,} wins over {percent} of the window"
        if cfg.small_window_limit is None:  # one fraction for every window: it acts once it clears the floor
            rule += f" below windows of {math.floor(floor / percent) + 1 + context_length - window:,} tokens"
        return rule
    if percent != cfg.threshold:
        return f"the small-window rule raises the threshold to {percent} below {cfg.small_window_limit:,} tokens"
    return f"compression.threshold {percent} of the window decides"


def explain_threshold(resolution: Resolution | None) -> str:
    """One line: where automatic compression fires (tokens and share of the window) and the rule that decided it.

    What the chat front ends say when a config is loaded or changed, so a
    setting that a floor or a ceiling overrides is named at once; None is a
    config whose automatic compression is off.
    """
    if resolution is None:
        return "automatic compression is off (compression.enabled is false)"
    budgets = resolution.budgets
    share = budgets.threshold_tokens / budgets.context_length
    tokens = "1 token" if budgets.threshold_tokens == 1 else f"{budgets.threshold_tokens:,} tokens"
    return (f"compression fires at {tokens} ({share:.2f} of the {budgets.context_length:,}-token "
            f"window): {resolution.threshold_rule}")


#: Below this many tokens a summary cannot hold the template's headings and the open request.
SUMMARY_FLOOR_TOKENS = 128


def window_room(budgets: Budgets) -> int:
    """Half of what the threshold leaves once the fixed cost and the verbatim tail are paid: the most a
    summary may cost for the compressed prompt to keep room to grow before the next compression."""
    return max(0, budgets.threshold_tokens - budgets.fixed_tokens - budgets.tail_token_budget) // 2


def summary_room(budgets: Budgets, summarised_tokens: int) -> int:
    """The most a summary may cost when it must fit the window (``summary_fits_window``).

    The window's room, and half of what it replaces so that replacing it is a
    real gain, though never less than a summary needs (``SUMMARY_FLOOR_TOKENS``).
    """
    return min(window_room(budgets), max(SUMMARY_FLOOR_TOKENS, max(0, summarised_tokens) // 2))


def summary_budget(cfg: CompressionConfig, budgets: Budgets, summarised_tokens: int,
                   replaced_tokens: int | None = None) -> int:
    """Target summary length: a share of what is summarised, within [minimum, cap].

    The minimum wins over a smaller cap: a handoff shorter than ``summary_min_tokens``
    loses too much for large windows to be worth it. With ``summary_fits_window`` the
    window wins over both (see ``summary_room``, of ``replaced_tokens``: the span and
    the earlier summary folded into the new one); the result is at least one token.
    """
    budget = wanted_summary_budget(cfg, budgets, summarised_tokens)
    if cfg.summary_fits_window:
        replaced = summarised_tokens if replaced_tokens is None else replaced_tokens
        budget = min(budget, summary_room(budgets, replaced))
    return max(1, budget)


def wanted_summary_budget(cfg: CompressionConfig, budgets: Budgets, summarised_tokens: int) -> int:
    """The configured summary length before the window has its say: clamp(ratio × span, minimum, cap)."""
    proportional = int(max(0, summarised_tokens) * cfg.summary_ratio)
    return max(cfg.summary_min_tokens, min(proportional, budgets.max_summary_tokens))
