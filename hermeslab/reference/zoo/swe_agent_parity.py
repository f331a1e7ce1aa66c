"""Decision parity of ``swe-agent-0.0.1`` with SWE-agent's own history processor (sweagent 0.0.1).

Both sides step a recording as SWE-agent queries its model: before every
recorded assistant reply. SWE-agent's side (``worker/swe_agent_steps.py``)
runs its own ``Last5Observations`` (or ``LastNObservations``) on the raw
history each step afresh, hermeslab's tool results rendered as the user
messages its environment would send; hermeslab's runs ``last_n_observations``
on the conversation it rewrote in place at the step before, as the live loop
does. A step's record is which messages are elided, each with the line count
its note states, and whether that set grew.

sweagent 0.0.1 declares a dependency that is not on the package index, so it
installs without dependencies (``no_deps``), which the history processors do
not need.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hermeslab.context.budget import derive_budgets
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.zoo_common import Message, ZooInput
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.messages import text_of
from hermeslab.policies.swe_agent import ELIDED_LINES, PRESET, STRATEGY, last_n_observations
from hermeslab.reference.zoo.checks import ParityCheck, Step, Variant
from hermeslab.reference.zoo.client import ZooReference
from hermeslab.reference.zoo.venv import SWE_AGENT as PACKAGE

#: A window no recording fills: the processor never looks at sizes, and no summary is asked for.
WINDOW = 10_000_000


def wire(messages: list[Message]) -> list[dict]:
    """The recording as SWE-agent's history: each message's key, role (a tool result is a user message), text."""
    return [{"key": f"m{i}", "role": "user" if m.get("role") == "tool" else m.get("role"), "content": text_of(m)}
            for i, m in enumerate(messages)]


def reference(sessions: list[list[Message]], variants: list[dict[str, Any]]) -> list[list[list[Step]]]:
    """SWE-agent's own processor over every recording, for each variant, in one worker."""
    wired = [wire(messages) for messages in sessions]
    with ZooReference(PACKAGE, "swe_agent") as worker:
        return [worker.replay(wired, params) for params in variants]


def _zoo(keep_last: int) -> ZooInput:
    base = CompressionConfig()
    cfg = dataclasses.replace(base, strategy=STRATEGY, protect_last_n=keep_last, min_saving=0.0)
    # The budgets only size summaries, which this strategy never asks for.
    return ZooInput(cfg=cfg, budgets=derive_budgets(base, WINDOW), summariser=ExtractiveSummariser(),
                    estimate=lambda m: len(text_of(m)))


def ours(messages: list[Message], params: dict[str, Any]) -> list[Step]:
    """hermeslab's elisions before each recorded reply, the conversation rewritten in place between steps."""
    zoo = _zoo(params["keep_last"])
    current: list[Message] = []
    steps: list[Step] = []
    previous: list[list] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        current = current + [dict(m) for m in messages[len(current):index]]
        current = last_n_observations(current, zoo, {}).messages
        elided = [[f"m{i}", m[ELIDED_LINES]] for i, m in enumerate(current) if ELIDED_LINES in m]
        steps.append({"at": index, "compacted": elided != previous, "elided": elided})
        previous = elided
    return steps


CHECK = ParityCheck(
    preset=PRESET, requirement=PACKAGE.requirement,
    variants=(Variant("last_5", {"keep_last": 5}), Variant("last_2", {"keep_last": 2}),
              Variant("last_1", {"keep_last": 1}), Variant("last_20", {"keep_last": 20})),
    reference=reference, ours=ours)
