"""What the zoo policies' tests share: stand-in summarisers, a policy's input, the checks every pass must meet.

Each ``test_policy_<agent>.py`` keeps what is particular to its agent (the
source lines it pins, its own session shapes) and takes from here the parts
that are the same for every agent: a preset's compression settings, the
``ZooInput`` a strategy is called with, the properties any compaction pass
must keep on any conversation, and the comparison with the agent's own code
over the shipped recordings.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermeslab.context.budget import derive_budgets
from hermeslab.context.types import SummaryOutcome
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.config import CompressionConfig, Config
from hermeslab.core.messages import validate_messages
from hermeslab.eval.metrics import role_order_problems
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.policies.loading import load_config
from hermeslab.policies.running import budgets_of, make_compactor
from shared_data import needing_reference

#: The project's own recorded sessions, the ones the parity tests replay.
OWN = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


class Fixed:
    """Answers "SUMMARY" (or fails with "down") and keeps the spans it was asked about."""

    def __init__(self, fails: bool = False):
        self.fails = fails
        self.spans: list[list[dict]] = []

    def summarise(self, request):
        self.spans.append(list(request.span))
        return SummaryOutcome(body="", error="down") if self.fails else SummaryOutcome(body="SUMMARY")


class Failing:
    """A summary model that is down."""

    def summarise(self, request):
        return SummaryOutcome(body="", error="no model")


class Recording:
    """Answers with a fixed summary and keeps the spans it was asked about."""

    def __init__(self):
        self.spans = []

    def summarise(self, request):
        self.spans.append(request.span)
        return SummaryOutcome(body="THE SUMMARY")


def chars(message: dict) -> int:
    """One token per character of text, so tests set sizes directly."""
    return len(str(message.get("content") or ""))


def preset_compression(policy: Any) -> CompressionConfig:
    """The compression settings of the policy's first preset."""
    return Config().with_overrides(dict(policy.presets[0].overrides)).compression


def zoo_input(cfg: CompressionConfig, window: int, summariser: Any = None,
              estimate: Callable[[dict], int] = chars) -> ZooInput:
    """A strategy's input for ``cfg`` at ``window``, counted with ``estimate`` (characters unless told)."""
    budgets = derive_budgets(dataclasses.replace(cfg, strategy="summary"), window)
    return ZooInput(cfg=cfg, budgets=budgets, summariser=summariser or Fixed(), estimate=estimate)


def loaded_zoo_input(preset: str, window: int, summariser: Any = None, **overrides: Any) -> ZooInput:
    """A strategy's input as the lab builds it for ``preset`` at ``window``: its budgets, summariser and counter."""
    config = load_config(preset, {"model.context_length": window, **overrides})
    compactor = make_compactor(config, summariser or FixedSummariser("THE SUMMARY"))
    return ZooInput(cfg=config.compression, budgets=compactor.budgets, summariser=compactor.summariser,
                    estimate=compactor._estimate_message)


def checked_trigger(rule: Any, preset: str, window: int, overrides: dict | None = None) -> int:
    """The trigger ``rule`` (or, from a mapping of strategy to rule, the one of the preset's strategy) gives
    ``preset`` at ``window``, checked against the threshold the engine derives for the same settings."""
    cfg = load_config(preset, {"model.context_length": window, **(overrides or {})}).compression
    rule = rule if callable(rule) else rule[cfg.strategy]
    assert budgets_of(cfg, window).threshold_tokens == rule(cfg, window, None)
    return rule(cfg, window, None)


def users_joined(messages: list[dict]) -> list[dict]:
    """Each run of user messages counted once, as chat APIs join consecutive user turns (many agents put their
    summary, a user message, right before a kept part that may open with one)."""
    return [m for i, m in enumerate(messages) if not (i and m["role"] == "user" == messages[i - 1]["role"])]


def checked_pass(messages: list[dict], run: Callable[[list[dict]], Any], *, join_users: bool = False) -> Any:
    """Run one compaction pass and check what any pass must keep: the input is not mutated, every tool call
    keeps its result, no role-order problem is added (runs of user turns counted once when ``join_users``),
    the system prompt stays first, and a pass that changed nothing says so. Returns the pass's result."""
    snapshot = json.dumps(messages, sort_keys=True)
    result = run(messages)
    assert json.dumps(messages, sort_keys=True) == snapshot
    validate_messages(result.messages)
    counted = users_joined if join_users else list
    assert role_order_problems(counted(result.messages)) <= role_order_problems(counted(messages))
    if messages and messages[0]["role"] == "system":
        assert result.messages[0] == messages[0]
    if result.condensed == 0:
        assert result.messages == messages
    return result


def recorded_sessions(path: Path, count: int) -> list[list[dict]]:
    """The messages of the first ``count`` sessions of a recorded-session file."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line)["messages"] for line in handle if line.strip()][:count]


def own_sessions(count: int) -> list[list[dict]]:
    """The messages of the first ``count`` shipped sessions."""
    return recorded_sessions(OWN, count)


def assert_agrees_with_reference(check: Any, recordings: list[list[dict]], variants: list[dict]) -> None:
    """Every step of ours equals the agent's own code's on every recording and variant, and the agent's code
    compacted at least once (a skip naming the install command when its environment is missing)."""
    from hermeslab.reference.zoo.checks import Tally

    theirs = needing_reference(check.reference, recordings, variants)
    tally = Tally()
    for params, reference_steps in zip(variants, theirs):
        for number, (messages, steps) in enumerate(zip(recordings, reference_steps)):
            tally.add_session(str(number), steps, check.ours(messages, params), keep_examples=3)
    assert tally.examples == [] and tally.share == 1.0
    assert tally.compactions_reference > 0
