"""hermeslab's side of the Aider parity check: a recording stepped through ``aider_chat_summary``.

Before each recorded assistant reply the prompt is measured; at or past the
policy's trigger the strategy runs, and a compaction replaces the history.
The summariser answers a fixed text (or fails, in the variant that asks), and
the worker is told how many tokens that summary and Aider's acknowledgement
take, so both sides count every message alike.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.turns import is_real_user_message
from hermeslab.context.zoo_common import Message, split_system
from hermeslab.core.config import Config, CompressionConfig
from hermeslab.core.tokens import message_estimator
from hermeslab.policies.aider import POLICY, PRESET, acknowledgement, aider_chat_summary, summary_of, trigger
from hermeslab.reference.zoo.checks import ParityCheck, Step, Variant
from hermeslab.reference.zoo.client import ZooReference
from hermeslab.reference.zoo.stepping import STUB, steps_before_replies, stub_zoo_input
from hermeslab.reference.zoo.venv import AIDER as PACKAGE

SUMMARY, ACK = "summary", "ack"


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
    # The trigger is the policy's own; the budgets come from the pipeline's rules.
    zoo = stub_zoo_input(cfg, window, message_estimator(cfg), params.get("fails", False))
    return steps_before_replies(messages, aider_chat_summary, zoo, trigger(cfg, window, None), _view)


def _view(history: list[Message], keys: dict[int, str]) -> list[str]:
    _, rest = split_system(history)
    return [keys.get(id(m)) or (SUMMARY if m.get("_compressed_summary") else ACK) for m in rest]


CHECK = ParityCheck(
    preset=PRESET, requirement=PACKAGE.requirement,
    variants=(Variant("window_16k", {"window": 16_384}), Variant("window_64k", {"window": 65_536}),
              Variant("window_200k", {"window": 200_000}),
              Variant("window_16k_summary_fails", {"window": 16_384, "fails": True})),
    reference=reference, ours=ours)
