"""hermeslab's side of the LangChain parity check: a recording stepped through ``langchain_summarization``.

Before each recorded assistant reply the prompt is measured; at or past the
policy's trigger the strategy runs and a compaction replaces the history. The
summariser answers a fixed text (or fails, in the variant that asks) and the
worker is told how many tokens that summary takes, so both sides count every
message alike.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.zoo_common import Message, split_system
from hermeslab.core.config import Config, CompressionConfig
from hermeslab.core.tokens import message_estimator
from hermeslab.policies.langchain import TOO_LONG, POLICY, PRESET, langchain_summarization, summary_of, trigger
from hermeslab.reference.zoo.checks import ParityCheck, Step, Variant
from hermeslab.reference.zoo.client import ZooReference
from hermeslab.reference.zoo.stepping import STUB, steps_before_replies, stub_zoo_input
from hermeslab.reference.zoo.venv import LANGCHAIN

SUMMARY = "summary"


def compression(fraction: float) -> CompressionConfig:
    return Config().with_overrides({**POLICY.presets[0].overrides, "compression.threshold": fraction}).compression


def wire(messages: list[Message]) -> list[dict]:
    """The recording as the worker reads it: key, role, hermeslab's token count, the tool-call ids involved."""
    estimate = message_estimator(compression(POLICY.presets[0].overrides["compression.threshold"]))
    return [{"key": f"m{i}", "role": m.get("role"), "tokens": estimate(m),
             "calls": [str(c.get("id")) for c in m.get("tool_calls") or [] if c.get("id")],
             "answers": str(m["tool_call_id"]) if m.get("tool_call_id") else None}
            for i, m in enumerate(messages)]


def worker_params(params: dict[str, Any]) -> dict[str, Any]:
    estimate = message_estimator(compression(params["fraction"]))
    return {**params, "summary_tokens": estimate(summary_of(STUB)), "too_long_tokens": estimate(summary_of(TOO_LONG))}


def reference(sessions: list[list[Message]], variants: list[dict[str, Any]]) -> list[list[list[Step]]]:
    """LangChain's own middleware over every recording, for each variant, in one worker."""
    wired = [wire(messages) for messages in sessions]
    with ZooReference(LANGCHAIN, "langchain") as worker:
        return [worker.replay(wired, worker_params(params)) for params in variants]


def ours(messages: list[Message], params: dict[str, Any]) -> list[Step]:
    cfg = compression(params["fraction"])
    window = params["window"]
    zoo = stub_zoo_input(cfg, window, message_estimator(cfg), params.get("fails", False))
    return steps_before_replies(messages, langchain_summarization, zoo, trigger(cfg, window, None), _view)


def _view(history: list[Message], keys: dict[int, str]) -> list[str]:
    _, rest = split_system(history)
    return [keys.get(id(m), SUMMARY) for m in rest]


CHECK = ParityCheck(
    preset=PRESET, requirement=LANGCHAIN.requirement,
    variants=(Variant("window_8k", {"window": 8_192, "fraction": 0.8}),
              Variant("window_16k", {"window": 16_384, "fraction": 0.8}),
              Variant("window_64k", {"window": 65_536, "fraction": 0.8}),
              Variant("window_200k", {"window": 200_000, "fraction": 0.8}),
              Variant("window_32k_at_half", {"window": 32_768, "fraction": 0.5}),
              Variant("window_16k_summary_fails", {"window": 16_384, "fraction": 0.8, "fails": True})),
    reference=reference, ours=ours)
