"""Presets that condense the way OpenHands' condensers do, each number traced to OpenHands' source.

Sources (paths inside the installed packages, line numbers of those files):

* openhands-sdk 1.58.2, ``openhands/sdk/context/condenser/llm_summarizing_condenser.py``:
  ``default_condenser`` (the standard agent's condenser) uses ``max_size`` 80 and
  ``keep_first`` 4 (lines 558-559); ``minimum_progress`` 0.1 (line 72). It condenses
  when the view holds more than ``max_size`` events (line 174) or the prompt exceeds
  the agent model's input limit (line 163); it keeps the newest
  ``max_size // 2 - keep_first - 1`` events (lines 308-309, 333, 336), never the
  system prompt or the first ``keep_first`` (lines 341-344), moves both ends to the
  next safe cut (lines 347, 350) and gives up on an empty or too small range
  (lines 427, 434). The summary goes where the range began
  (``openhands/sdk/event/condenser.py`` line 95) as a user message (line 130).
* openhands-ai 0.62.0, ``openhands/core/config/condenser_config.py``: the
  observation masking condenser's ``attention_window`` is 100 (lines 23-24); the
  amortized forgetting condenser's ``max_size`` is 100 (lines 92-93) and
  ``keep_first`` 1 (lines 99-100).
  ``openhands/memory/condenser/impl/observation_masking_condenser.py`` line 23 masks
  every observation older than the window;
  ``openhands/memory/condenser/impl/amortized_forgetting_condenser.py`` lines 41-55
  keep the first ``keep_first`` and the newest ``max_size // 2 - keep_first``
  events, and line 58 triggers above ``max_size``. The view it counts is the
  log less what was forgotten, nothing else (``openhands/memory/view.py`` lines
  48-93): a call or result whose partner was forgotten stays counted, and only
  ``openhands/memory/conversation_memory.py`` leaves it out of the prompt
  (lines 751-800), which starts with the system prompt even once the view has
  lost it (lines 805-826).

OpenHands never switches condensation off, so the breaker's limit is set out of
reach; its conversations carry on in place, and the system prompt is one of the
events it counts.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.assemble import summary_text
from hermeslab.context.baselines import BaselineResult
from hermeslab.context.openhands_condensers import openhands_strategy
from hermeslab.context.openhands_view import event_count
from hermeslab.context.types import SummaryRequest
from hermeslab.context.zoo_common import Message, ZooInput
from hermeslab.core.config import CompressionConfig, ConfigError

from .base import NEVER_SWITCH_OFF, Citation, Policy, Preset

SDK_VERSION = "1.58.2"
LEGACY_VERSION = "0.62.0"

SUMMARIZING = f"openhands-{SDK_VERSION}-llm-summarizing"
MASKING = f"openhands-{LEGACY_VERSION}-observation-masking"
AMORTIZED = f"openhands-{LEGACY_VERSION}-amortized-forgetting"

_COMMON: dict[str, Any] = {
    # Tokens matter only when the prompt would exceed the window itself.
    "compression.threshold": 1.0,
    "compression.min_threshold_tokens": 0,
    "compression.small_window_limit": None,
    "compression.min_saving": 0.0,
    # OpenHands condenses whenever its rule says so: the breaker is out of reach.
    "compression.ineffective_limit": NEVER_SWITCH_OFF,
    "compression.in_place": True,
    "compression.system_in_pipeline": True,
}


#: ``compression.strategy`` → the rule of ``hermeslab.context.openhands_condensers``.
RULES = {"openhands_summarizing": "summarizing", "openhands_amortized": "amortized", "openhands_masking": "masking"}
#: ``minimum_progress`` of the summarizing condenser (llm_summarizing_condenser.py line 72).
MINIMUM_PROGRESS = 0.1


class _NoSummary(Exception):
    """The summariser returned no text."""


def condense(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One condensation under the OpenHands rule the config's strategy names (no memory between them).

    A compression asked for while the context is within ``trigger_events`` (a
    token trigger, an overflow or ``/compress``) is OpenHands' condensation
    request: keep half of what is there. A summariser that returns nothing
    leaves the context as it was, as OpenHands does when its summary call fails.
    """
    cfg, limit = zoo.cfg, zoo.cfg.trigger_events
    errors: list[str] = []

    def summarise(span: list[dict]) -> str:
        outcome = zoo.summariser.summarise(SummaryRequest(span=span, previous_summary=None, focus=zoo.focus,
                                                          budget_tokens=zoo.budgets.max_summary_tokens))
        if not outcome.body.strip():
            errors.append(outcome.error or "the summariser returned no text")
            raise _NoSummary()
        return summary_text(outcome.body.strip())

    try:
        return openhands_strategy(messages, rule=RULES[cfg.strategy], max_size=limit, keep_first=cfg.keep_first_events,
                                  attention_window=limit, minimum_progress=MINIMUM_PROGRESS,
                                  requested=event_count(messages) <= limit, summarise=summarise,
                                  estimate=zoo.estimate, min_saving=cfg.min_saving)
    except _NoSummary:
        before = sum(map(zoo.estimate, messages))
        return BaselineResult(list(messages), before, before, 0, False,
                              {"strategy": cfg.strategy, "outcome": "no_summary", "error": errors[-1]}, aborted=True)


def validate_openhands_settings(cfg: CompressionConfig) -> None:
    """Raise ConfigError for event settings OpenHands' condensers would refuse (or hermeslab cannot use)."""
    limit = cfg.trigger_events
    if limit is None:
        raise ConfigError(f"compression.strategy {cfg.strategy} needs compression.trigger_events (OpenHands' max_size)")
    # The summarizing condenser needs room for a tail (llm_summarizing_condenser.py lines 89-97), the
    # amortized one a head under half of max_size (amortized_forgetting_condenser.py lines 26-29).
    room = {"openhands_summarizing": limit // 2 - 1, "openhands_amortized": limit // 2}.get(cfg.strategy)
    if room is not None and cfg.keep_first_events >= room:
        raise ConfigError(f"compression.keep_first_events ({cfg.keep_first_events}) must be under {room} "
                          f"for {cfg.strategy} with trigger_events {limit}")


POLICY = Policy(
    agent="OpenHands",
    source=f"openhands-sdk {SDK_VERSION} and openhands-ai {LEGACY_VERSION} (PyPI)",
    presets=(
        Preset(SUMMARIZING, {**_COMMON, "compression.strategy": "openhands_summarizing",
                             "compression.trigger_events": 80, "compression.keep_first_events": 4},
               "past 80 events: keep the first 4 and the newest half, summarise the rest into a user message."),
        Preset(MASKING, {**_COMMON, "compression.strategy": "openhands_masking",
                         "compression.trigger_events": 100, "compression.keep_first_events": 0},
               "past 100 events: mask every observation older than the newest 100 events."),
        Preset(AMORTIZED, {**_COMMON, "compression.strategy": "openhands_amortized",
                           "compression.trigger_events": 100, "compression.keep_first_events": 1},
               "past 100 events: keep the first event and the newest half, forget the rest."),
    ),
    fidelity="parity",
    strategies={name: condense for name in RULES},
    citations=(
        Citation("default_condenser: max_size 80, keep_first 4", "trigger_events, keep_first_events",
                 "openhands/sdk/context/condenser/llm_summarizing_condenser.py 558-559"),
        Citation("minimum_progress 0.1", "MINIMUM_PROGRESS", "openhands/sdk/context/condenser/"
                 "llm_summarizing_condenser.py 72"),
        Citation("observation masking attention_window 100", "trigger_events",
                 "openhands/core/config/condenser_config.py 23-24"),
        Citation("amortized forgetting max_size 100, keep_first 1", "trigger_events, keep_first_events",
                 "openhands/core/config/condenser_config.py 92-93, 99-100"),
    ),
    validate=validate_openhands_settings,
    reinjects_todos=True,
)
