"""hermeslab's side of the Inspect AI parity checks: a recording stepped through ``inspect_summary`` or
``inspect_trim``.

Before each recorded assistant reply the prompt is measured; past the
policy's trigger the strategy runs and a compaction replaces the history; a
compaction that Inspect would raise on (a failed summary, an input still over
the threshold) is recorded as a step without a view, as the worker records
it. The summariser answers a fixed text (or fails, in the variant that asks)
and the worker is told how many tokens that summary takes. Both sides count
a recorded message at its recorded size, also after a trim took tool calls
whose results went from it (the worker knows no other count for it).
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.zoo_common import Message
from hermeslab.core.config import Config, CompressionConfig
from hermeslab.core.tokens import message_estimator
from hermeslab.policies.inspect_ai import (
    POLICY,
    SUMMARY_PRESET,
    TRIM_PRESET,
    inspect_summary,
    inspect_trim,
    summary_of,
    trigger,
)
from hermeslab.reference.zoo.checks import ParityCheck, Step, Variant
from hermeslab.reference.zoo.client import ZooReference
from hermeslab.reference.zoo.stepping import STUB, stub_zoo_input
from hermeslab.reference.zoo.venv import INSPECT_AI

SUMMARY = "summary"
STRATEGIES = {"summary": inspect_summary, "trim": inspect_trim}


def compression() -> CompressionConfig:
    return Config().with_overrides(dict(POLICY.presets[0].overrides)).compression


def wire(messages: list[Message]) -> list[dict]:
    """The recording as the worker reads it: key, role, hermeslab's token count, the tool-call ids involved."""
    estimate = message_estimator(compression())
    return [{"key": f"m{i}", "role": m.get("role"), "tokens": estimate(m),
             "calls": [str(c.get("id")) for c in m.get("tool_calls") or [] if c.get("id")],
             "answers": str(m["tool_call_id"]) if m.get("tool_call_id") else None}
            for i, m in enumerate(messages)]


def worker_params(params: dict[str, Any]) -> dict[str, Any]:
    return {**params, "summary_tokens": message_estimator(compression())(summary_of(STUB))}


def reference(sessions: list[list[Message]], variants: list[dict[str, Any]]) -> list[list[list[Step]]]:
    """Inspect's own compaction handler over every recording, for each variant, in one worker."""
    wired = [wire(messages) for messages in sessions]
    with ZooReference(INSPECT_AI, "inspect_ai") as worker:
        return [worker.replay(wired, worker_params(params)) for params in variants]


KEY = "_parity_key"


def _view(history: list[Message]) -> list[str]:
    """Each message's key (a summary's fixed name), an assistant's with the number of calls it still makes."""
    view = []
    for message in history:
        key = message.get(KEY, SUMMARY)
        if message.get("role") == "assistant" and message.get("tool_calls"):
            key += f":{len(message['tool_calls'])}"
        view.append(key)
    return view


def ours(messages: list[Message], params: dict[str, Any]) -> list[Step]:
    cfg = compression()
    window = params["window"]
    counted = message_estimator(cfg)
    recorded = {f"m{index}": counted(message) for index, message in enumerate(messages)}

    def estimate(message: Message) -> int:
        """A recorded message counts what the worker is told it counts, even once a trim took calls from it."""
        return recorded[message[KEY]] if KEY in message else counted(message)

    zoo = stub_zoo_input(cfg, window, estimate, params.get("fails", False))
    strategy = STRATEGIES[params["strategy"]]
    threshold = trigger(cfg, window, None)
    history: list[Message] = []
    steps: list[Step] = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            compacted, view = False, None
            if sum(estimate(m) for m in history) >= threshold:
                compacted = True
                outcome = strategy(history, zoo, {})
                if not outcome.aborted:
                    history = list(outcome.messages)
                    view = _view(history)
            else:
                view = _view(history)
            steps.append({"at": index, "compacted": compacted, "view": view})
        history.append({**message, KEY: f"m{index}"})
    return steps


CHECKS = (ParityCheck(
    preset=SUMMARY_PRESET, requirement=INSPECT_AI.requirement,
    variants=(Variant("window_8k", {"window": 8_192, "strategy": "summary"}),
              Variant("window_16k", {"window": 16_384, "strategy": "summary"}),
              Variant("window_64k", {"window": 65_536, "strategy": "summary"}),
              Variant("window_16k_summary_fails", {"window": 16_384, "strategy": "summary", "fails": True})),
    reference=reference, ours=ours),
    ParityCheck(
    preset=TRIM_PRESET, requirement=INSPECT_AI.requirement,
    variants=(Variant("window_16k", {"window": 16_384, "strategy": "trim"}),
              Variant("window_64k", {"window": 65_536, "strategy": "trim"}),
              Variant("window_8k", {"window": 8_192, "strategy": "trim"})),
    reference=reference, ours=ours))
