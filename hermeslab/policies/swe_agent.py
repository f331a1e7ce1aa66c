"""SWE-agent's history processor ``Last5Observations``: every observation but the first and the newest five elided.

SWE-agent never summarises. Before every model query it passes its history
through a history processor; the one its paper configuration names keeps the
first observation (the task) and the newest five whole and replaces the text of
every other one by a one-line note saying how many lines it had. Everything
the model said stays, and so does every message's place and role.

SWE-agent 0.0.1 counts as an observation every user message that is not part
of a demonstration: its environment's outputs come back as user messages. In
hermeslab's messages an environment's output is a tool result, so here an
observation is a user message or a tool result (each result of a reply with
several calls counts once, as each would be one SWE-agent step). The elision
runs before every request, as SWE-agent's does; the conversation is rewritten
in place, which gives the same history as SWE-agent's rebuild from the full
log, because an observation once outside the newest five stays outside and its
note was counted from its full text.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, unchanged
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.errors import ConfigError
from hermeslab.core.messages import text_of

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

STRATEGY = "swe_agent_last_n_observations"
PRESET = "swe-agent-0.0.1"
#: Observations kept whole at the end of the history (``Last5Observations``).
KEEP_LAST_OBSERVATIONS = 5
#: Roles whose messages SWE-agent would see as observations.
OBSERVATION_ROLES = ("user", "tool")
#: Marks an elided message with the line count of the text it had, so a later pass leaves it as it is.
ELIDED_LINES = "_elided_lines"
SOURCE = "sweagent 0.0.1 (PyPI wheel sweagent-0.0.1-py3-none-any.whl), sweagent/agent/"


def elision_note(lines: int) -> str:
    """What an elided observation reads (hermeslab's wording; SWE-agent's names the same count)."""
    return f"[earlier output elided: {lines} lines]"


def observation_indices(history: list[Message]) -> list[int]:
    """Positions of the observations in ``history``, oldest first."""
    return [index for index, message in enumerate(history) if message.get("role") in OBSERVATION_ROLES]


def indices_to_elide(history: list[Message], keep_last: int) -> list[int]:
    """The observations SWE-agent elides: all but the first and the newest ``keep_last``."""
    observations = observation_indices(history)
    return observations[1:max(1, len(observations) - keep_last)]


def elided(message: Message) -> Message:
    """``message`` with its text replaced by the note counting its lines (an elided one unchanged)."""
    if ELIDED_LINES in message:
        return message
    lines = len(text_of(message).splitlines())
    return {**message, "content": elision_note(lines), ELIDED_LINES: lines}


def last_n_observations(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One pass of SWE-agent's history processor with ``n = compression.protect_last_n``."""
    system, history = split_system(messages)
    chosen = [i for i in indices_to_elide(history, zoo.cfg.protect_last_n) if ELIDED_LINES not in history[i]]
    record: dict[str, Any] = {"strategy": STRATEGY, "elided": [len(system) + i for i in chosen]}
    if not chosen:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    targets = set(chosen)
    out = system + [elided(m) if i in targets else m for i, m in enumerate(history)]
    return result(messages, out, condensed=len(chosen), zoo=zoo, record={**record, "outcome": "elided"})


def before_every_request(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """SWE-agent runs its history processor on every query, whatever the prompt's size."""
    return 1


def validate(cfg: CompressionConfig) -> None:
    """SWE-agent refuses a history processor keeping no observation."""
    if isinstance(cfg.protect_last_n, bool) or cfg.protect_last_n < 1:
        raise ConfigError(f"compression.protect_last_n: {STRATEGY} keeps the newest n observations and n must be "
                          f"a positive integer, got {cfg.protect_last_n!r}")


_OVERRIDES: dict[str, Any] = {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                               "compression.protect_last_n": KEEP_LAST_OBSERVATIONS, "compression.threshold": 1.0}

POLICY = Policy(
    agent="SWE-agent",
    source=SOURCE,
    presets=(Preset(PRESET, _OVERRIDES,
                    "before every request: keep the first observation and the newest 5 whole; every other tool "
                    "result or user message becomes a note of its line count; nothing is summarised."),),
    fidelity="parity",
    strategies={STRATEGY: last_n_observations},
    triggers={STRATEGY: before_every_request},
    citations=(
        Citation("The history processor runs on the history before every model query", "before_every_request",
                 "agents.py 254-257 (local_history), 425-427"),
        Citation("n must be positive", "validate", "history_processors.py 45-47"),
        Citation("Observations: user messages that are not demonstrations", "observation_indices",
                 "history_processors.py 49, 53-60; the task (instance template) and each later output are appended as "
                 "user messages, agents.py 396-425 (forward_model)"),
        Citation("The first observation (the task) and the newest n are kept whole", "indices_to_elide",
                 "history_processors.py 61-62"),
        Citation("Any other observation's text becomes a note of its line count", "elided",
                 "history_processors.py 63-65"),
        Citation("Roles, order and every other message unchanged", "last_n_observations",
                 "history_processors.py 51-58, 66"),
        Citation("n = 5", "KEEP_LAST_OBSERVATIONS", "history_processors.py 82-84 (Last5Observations); "
                 "princeton-nlp/SWE-agent config/configs/default_sys-env_window100-detailed_cmd_format-"
                 "last_5_history-1_demos.yaml line 108 @ 51699eb0"),
        Citation("The default processor changes nothing", "(not a preset)", "agents.py 56-57, "
                 "history_processors.py 40-42"),
    ),
    validate=validate,
)
