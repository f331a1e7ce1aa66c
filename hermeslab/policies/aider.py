"""Aider's chat-history summary: keep the finished turns under a small budget by summarising their older part.

Aider sends the finished exchanges ("done" messages) before the current turn.
When they exceed the history budget, a sixteenth of the model's input limit
held between 1,024 and 8,192 tokens, it keeps the newest messages that fit
under half the budget (the kept part starting after an assistant message),
summarises the older part as one user message and recurses while the summary
and the kept part still exceed the budget; with four messages or fewer, or
past depth three, everything is summarised. A summary that fails drops the
finished turns altogether. The current turn, from the newest user message
on, is never summarised.

Aider's history has no tool messages. Here an assistant message and the tool
results that follow it count as one Aider message (its role assistant, its
tokens their sum), so a cut never parts a call from its result; a tool result
with no assistant before it counts as its own message with role ``tool``.
Aider decides at the end of a turn and applies the summary before the next
request; here the decision is taken at the first request of the next turn
(the same finished turns), once per turn.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Sequence

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.turns import is_real_user_message
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

VERSION = "0.86.2"
PRESET = f"aider-{VERSION}"
STRATEGY = "aider_chat_summary"
#: The history budget is this share of the model's input limit ...
HISTORY_SHARE = Fraction(1, 16)
#: ... held between these bounds.
HISTORY_FLOOR = 1_024
HISTORY_CAP = 8_192
#: At or under this many messages, or past this depth, everything is summarised.
MIN_SPLIT = 4
MAX_DEPTH = 3
#: Tokens of the summariser's input limit Aider leaves free when it sizes the part it summarises.
INPUT_MARGIN = 512
OPENING = "Here is what we discussed earlier in this conversation, summarised:"
ACKNOWLEDGEMENT = "Ok."


def history_budget(cfg: CompressionConfig, window: int) -> Fraction:
    """Aider's ``max_chat_history_tokens``: the threshold's share of the window, held between 1,024 and 8,192."""
    return min(max(window * Fraction(str(cfg.threshold)), Fraction(HISTORY_FLOOR)), Fraction(HISTORY_CAP))


def trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """The smallest prompt whose finished turns could exceed the budget; the strategy checks the turns."""
    return math.floor(history_budget(cfg, window)) + 1


@dataclass(frozen=True)
class Unit:
    """One message as Aider counts it: a role, its tokens, and the hermeslab messages it stands for."""

    role: str
    tokens: int
    messages: tuple[Message, ...]


def units_of(history: Sequence[Message], estimate: Callable[[Message], int]) -> list[Unit]:
    """``history`` as Aider's messages: each tool result joins the assistant message before it."""
    units: list[Unit] = []
    for message in history:
        role = message.get("role")
        if role == "tool" and units and units[-1].role == "assistant":
            last = units[-1]
            units[-1] = Unit(last.role, last.tokens + estimate(message), (*last.messages, message))
        else:
            units.append(Unit(str(role), estimate(message), (message,)))
    return units


@dataclass(frozen=True)
class Plan:
    """One level of Aider's split: summarise ``head[:summarised]`` and keep ``units[split:]``, or all of it."""

    split: int
    summarised: int
    everything: bool


def plan(units: Sequence[Unit], budget: Fraction, input_limit: int, depth: int) -> Plan:
    """Where Aider splits ``units`` at ``depth`` (``summarize_real`` before it asks for a summary)."""
    if len(units) <= MIN_SPLIT or depth > MAX_DEPTH:
        return Plan(0, len(units), True)
    half = math.floor(budget / 2)
    tail_tokens, split = 0, len(units)
    for index in range(len(units) - 1, -1, -1):
        if tail_tokens + units[index].tokens < half:
            tail_tokens += units[index].tokens
            split = index
        else:
            break
    while units[split - 1].role != "assistant" and split > 1:
        split -= 1
    if split <= MIN_SPLIT:
        return Plan(0, len(units), True)
    cap, taken, summarised = input_limit - INPUT_MARGIN, 0, 0
    for unit in units[:split]:
        taken += unit.tokens
        if taken > cap:
            break
        summarised += 1
    return Plan(split, summarised, False)


def finished_turns(history: list[Message]) -> int:
    """How many leading messages of ``history`` are finished turns: those before the newest user message."""
    for index in range(len(history) - 1, -1, -1):
        if is_real_user_message(history[index]):
            return index
    return 0


def _fingerprint(messages: Sequence[Message]) -> str:
    return hashlib.sha256(json.dumps(list(messages), sort_keys=True, default=str).encode()).hexdigest()


def summary_of(body: str) -> Message:
    """The user message a summary becomes (hermeslab's wording for Aider's opening line)."""
    return summary_message("user", f"{OPENING}\n{body}")


def acknowledgement() -> Message:
    """The assistant reply Aider puts after a rebuilt history that does not end with one."""
    return {"role": "assistant", "content": ACKNOWLEDGEMENT, "_synthetic": True}


class _SummaryFailed(Exception):
    pass


def _summarise_units(units: Sequence[Unit], zoo: ZooInput) -> Unit:
    span = [m for unit in units for m in unit.messages]
    summary = summarise(span, zoo)
    if not summary.body:
        raise _SummaryFailed(summary.error or "empty summary")
    message = summary_of(summary.body)
    return Unit("user", zoo.estimate(message), (message,))


def summarise_history(units: list[Unit], budget: Fraction, zoo: ZooInput) -> tuple[list[Unit], int]:
    """Aider's ``summarize``: the finished turns rebuilt under ``budget``, and how many summaries that took."""
    calls, depth = 0, 0
    while True:
        step = plan(units, budget, zoo.budgets.context_length, depth)
        calls += 1
        if step.everything:
            units = [_summarise_units(units, zoo)]
            break
        summary, tail = _summarise_units(units[:step.summarised], zoo), units[step.split:]
        units = [summary, *tail]
        if summary.tokens + sum(unit.tokens for unit in tail) < budget:
            break
        depth += 1
    if units[-1].role != "assistant":
        ack = acknowledgement()
        units.append(Unit("assistant", zoo.estimate(ack), (ack,)))
    return units, calls


def aider_chat_summary(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Aider history check before a request: summarise the finished turns when they exceed the budget."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    done_count = finished_turns(history)
    done, current = history[:done_count], history[done_count:]
    budget = history_budget(zoo.cfg, zoo.budgets.context_length)
    units = units_of(done, zoo.estimate)
    done_tokens = sum(unit.tokens for unit in units)
    record.update(history_tokens=done_tokens, history_budget=float(budget))
    if done_tokens <= budget:
        return unchanged(messages, zoo, {**record, "outcome": "history_within_budget"})
    fingerprint = _fingerprint(done)
    if memory.get("aider_decided") == fingerprint:
        return unchanged(messages, zoo, {**record, "outcome": "decided_this_turn"})
    try:
        rebuilt, calls = summarise_history(units, budget, zoo)
    except _SummaryFailed as failure:
        return result(messages, system + current, condensed=len(done), zoo=zoo,
                      record={**record, "outcome": "summary_failed_history_dropped"}, error=str(failure))
    kept = [m for unit in rebuilt for m in unit.messages]
    memory["aider_decided"] = _fingerprint(kept)
    summaries = [m for m in kept if m.get("_compressed_summary")]
    return result(messages, system + kept + current, condensed=len(done), zoo=zoo,
                  record={**record, "outcome": "compressed", "summary_calls": calls},
                  summary=str(summaries[0]["content"]) if summaries else None)


#: Where each number and rule was read, in aider-chat 0.86.2 as installed from the package index.
CITATIONS = (
    Citation("history budget = max_input_tokens / 16, at least 1,024, at most 8,192", "history_budget",
             "aider/models.py:344-346"),
    Citation("the summarizer gets the main model's max_chat_history_tokens as its budget", "history_budget",
             "aider/coders/base_coder.py:510-513"),
    Citation("summarise only when the finished turns exceed the budget (strictly greater)", "aider_chat_summary",
             "aider/history.py:15-18, aider/coders/base_coder.py:1002-1004"),
    Citation("finished turns move to done_messages and are checked at the end of each turn", "finished_turns",
             "aider/coders/base_coder.py:1036-1038"),
    Citation("min_split = 4; depth > 3 summarises everything", "MIN_SPLIT, MAX_DEPTH", "aider/history.py:42-44"),
    Citation("kept tail: newest messages whose tokens stay under max_tokens // 2", "plan",
             "aider/history.py:46-57"),
    Citation("the summarised head ends with an assistant message", "plan", "aider/history.py:59-61"),
    Citation("split at or under 4 summarises everything", "plan", "aider/history.py:63-64"),
    Citation("head sized to the summariser's max_input_tokens less 512 (4,096 when unknown); the rest of the "
             "head is dropped", "INPUT_MARGIN, plan", "aider/history.py:72-87"),
    Citation("summary plus tail under the budget ends; otherwise recurse one level deeper", "summarise_history",
             "aider/history.py:89-96"),
    Citation("the summary is one user message; an assistant 'Ok.' follows when the result ends otherwise",
             "summarise_history", "aider/history.py:27-31, 114-119"),
    Citation("a failed summary leaves done_messages empty (the worker's result is never set)",
             "aider_chat_summary", "aider/coders/base_coder.py:1014-1034, aider/history.py:123"),
)

POLICY = Policy(
    agent="Aider",
    source=f"aider-chat {VERSION} (PyPI)",
    presets=(Preset(PRESET, {
        **IN_PLACE_NO_BREAKER,
        "compression.strategy": STRATEGY,
        "compression.threshold": float(HISTORY_SHARE),
    }, "once the finished turns pass 1/16 of the window (1,024-8,192 tokens): summarise their older part as a "
       "user message, keep the newest under half that budget"),),
    fidelity="parity",
    strategies={STRATEGY: aider_chat_summary},
    triggers={STRATEGY: trigger},
    citations=CITATIONS,
)
