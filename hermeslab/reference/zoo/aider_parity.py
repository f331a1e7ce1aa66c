"""hermeslab's side of the Aider parity check: a recording stepped through ``aider_chat_summary``.

Before each recorded assistant reply the prompt is measured; at or past the
policy's trigger the strategy runs, and a compaction replaces the history.
The summariser answers a fixed text (or fails, in the variant that asks), and
the worker is told how many tokens that summary and Aider's acknowledgement
take, so both sides count every message alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hermeslab.context.budget import derive_budgets
from hermeslab.context.turns import is_real_user_message
from hermeslab.context.types import SummaryOutcome, SummaryRequest
from hermeslab.context.zoo_common import Message, ZooInput, split_system
from hermeslab.core.config import Config, CompressionConfig
from hermeslab.core.tokens import message_estimator
from hermeslab.policies.aider import POLICY, PRESET, acknowledgement, aider_chat_summary, summary_of, trigger
from hermeslab.reference.zoo.checks import ParityCheck, Step, Variant
from hermeslab.reference.zoo.client import ZooReference
from hermeslab.reference.zoo.venv import AIDER as PACKAGE

STUB = "the stub summary"
SUMMARY, ACK = "summary", "ack"


class _Stub:
    """A summariser with a fixed answer, or one that always fails."""

    def __init__(self, fails: bool):
        self.fails = fails

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        return SummaryOutcome(body="", error="the summary model is down") if self.fails else SummaryOutcome(body=STUB)


def compression() -> CompressionConfig:
    return Config().with_overrides(dict(POLICY.presets[0].overrides)).compression


def wire(messages: list[Message], params: dict[str, Any]) -> list[dict]:
    """The recording as the worker reads it: each message's key, role, hermeslab's token count, whether a person
    wrote it."""
    estimate = message_estimator(compression())
    return [{"key": f"m{i}", "role": m.get("role"), "tokens": estimate(m), "real_user": is_real_user_message(m)}
            for i, m in enumerate(messages)]


def worker_params(params: dict[str, Any]) -> dict[str, Any]:
    estimate = message_estimator(compression())
    return {**params, "summary_tokens": estimate(summary_of(STUB)), "ack_tokens": estimate(acknowledgement())}


def reference(sessions: list[list[Message]], variants: list[dict[str, Any]]) -> list[list[list[Step]]]:
    """Aider's own ``ChatSummary`` over every recording, for each variant, in one worker."""
    wired = [wire(messages, {}) for messages in sessions]
    with ZooReference(PACKAGE, "aider") as worker:
        return [worker.replay(wired, worker_params(params)) for params in variants]


def ours(messages: list[Message], params: dict[str, Any]) -> list[Step]:
    cfg = compression()
    window = params["window"]
    estimate = message_estimator(cfg)
    # The budgets size the summary request only (the stub ignores them); they come from the pipeline's rules,
    # the trigger from the policy's own.
    budgets = derive_budgets(dataclasses.replace(cfg, strategy="summary"), window)
    zoo = ZooInput(cfg=cfg, budgets=budgets, summariser=_Stub(params.get("fails", False)), estimate=estimate)
    threshold = trigger(cfg, window, None)
    keys = {id(m): f"m{i}" for i, m in enumerate(messages)}
    history: list[Message] = []
    memory: dict[str, Any] = {}
    steps: list[Step] = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            compacted = False
            if sum(estimate(m) for m in history) >= threshold:
                outcome = aider_chat_summary(history, zoo, memory)
                if outcome.condensed:
                    history, compacted = list(outcome.messages), True
            steps.append({"at": index, "compacted": compacted, "view": _view(history, keys)})
        history.append(message)
    return steps


def _view(history: list[Message], keys: dict[int, str]) -> list[str]:
    _, rest = split_system(history)
    return [keys.get(id(m)) or (SUMMARY if m.get("_compressed_summary") else ACK) for m in rest]


CHECK = ParityCheck(
    preset=PRESET, requirement=PACKAGE.requirement,
    variants=(Variant("window_16k", {"window": 16_384}), Variant("window_64k", {"window": 65_536}),
              Variant("window_200k", {"window": 200_000}),
              Variant("window_16k_summary_fails", {"window": 16_384, "fails": True})),
    reference=reference, ours=ours)
