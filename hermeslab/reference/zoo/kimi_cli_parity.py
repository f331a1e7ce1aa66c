"""Decision parity of ``kimi-cli-1.52.0`` with Kimi CLI's own trigger and ``SimpleCompaction`` (kimi-cli 1.52.0).

Both sides step a recording as Kimi CLI steps its agent: before every
recorded assistant reply the context is measured and, at Kimi's trigger,
compacted. Kimi's side (``worker/kimi_cli_steps.py``) asks its own
``should_auto_compact`` and ``SimpleCompaction.prepare``; hermeslab's runs the
policy's trigger rule and strategy. Every message is counted with hermeslab's
estimate on both sides (the summary too: a fixed stub text), so a difference
is one of decisions, not of token counting. A step's record is whether Kimi
compacted and the keys of the messages its history then holds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hermeslab.context.zoo_common import Message, split_system, summary_message
from hermeslab.core.config import Config, CompressionConfig
from hermeslab.core.messages import text_of
from hermeslab.core.tokens import message_estimator
from hermeslab.policies.kimi_cli import (OPENING, POLICY, PRESET, kimi_simple_compaction, kimi_trigger,
                                         reserved_context)
from hermeslab.reference.zoo.checks import ParityCheck, Step, Variant
from hermeslab.reference.zoo.client import ZooReference
from hermeslab.reference.zoo.stepping import STUB, steps_before_replies, stub_zoo_input
from hermeslab.reference.zoo.venv import KIMI_CLI as PACKAGE

SUMMARY = "summary"


def compression(params: dict[str, Any]) -> CompressionConfig:
    base = Config().with_overrides(dict(POLICY.presets[0].overrides)).compression
    return dataclasses.replace(base, threshold=params.get("ratio", base.threshold),
                               protect_last_n=params.get("keep", base.protect_last_n))


def wire(messages: list[Message], params: dict[str, Any]) -> list[dict]:
    """The recording as the worker reads it: each message's key, role, text and hermeslab's token count."""
    estimate = message_estimator(compression(params))
    return [{"key": f"m{i}", "role": m.get("role"), "text": text_of(m), "tokens": estimate(m)}
            for i, m in enumerate(messages)]


def worker_params(params: dict[str, Any]) -> dict[str, Any]:
    """The variant as Kimi's settings, with the stub summary's size in hermeslab's count."""
    cfg = compression(params)
    summary_tokens = message_estimator(cfg)(summary_message("user", f"{OPENING}\n{STUB}"))
    return {"window": params["window"], "ratio": cfg.threshold, "keep": cfg.protect_last_n,
            "reserved": reserved_context(None), "summary_tokens": summary_tokens}


def reference(sessions: list[list[Message]], variants: list[dict[str, Any]]) -> list[list[list[Step]]]:
    """Kimi CLI's own trigger and compaction over every recording, for each variant, in one worker."""
    with ZooReference(PACKAGE, "kimi_cli") as worker:
        return [worker.replay([wire(messages, params) for messages in sessions], worker_params(params))
                for params in variants]


def ours(messages: list[Message], params: dict[str, Any]) -> list[Step]:
    """hermeslab's decisions before each recorded reply, the history rewritten by each compaction."""
    cfg = compression(params)
    window = params["window"]
    # The budgets only size the summary request; the trigger is the policy's own rule.
    zoo = stub_zoo_input(cfg, window, message_estimator(cfg))
    return steps_before_replies(messages, kimi_simple_compaction, zoo, kimi_trigger(cfg, window, None), _view)


def _view(history: list[Message], keys: dict[int, str]) -> list[str]:
    _, rest = split_system(history)
    return [keys.get(id(m)) or SUMMARY for m in rest]


CHECK = ParityCheck(
    preset=PRESET, requirement=PACKAGE.requirement,
    variants=(Variant("window_262k", {"window": 262_144}), Variant("window_64k", {"window": 65_536}),
              Variant("window_55k", {"window": 55_000}), Variant("window_55k_keep_3", {"window": 55_000, "keep": 3}),
              Variant("window_30k_every_step", {"window": 30_000})),
    reference=reference, ours=ours)
