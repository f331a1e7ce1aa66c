"""Goose's automatic compaction: past 80% of the window, one summary, a note to go on, the newest request.

Goose summarises every message the model can see. Afterwards the model sees
the summary (as a user message), an assistant note saying the context was
compacted, and a fresh copy of the newest user message that holds text and no
tool content. When the summary request itself is too long for the model, Goose
retries without some of the tool results, taken from the middle outwards:
10%, then 20%, 50% and finally all of them. Goose turns automatic compaction
off for a threshold at or above 1 (or at or below 0), so this policy accepts
only shares strictly between the two.

Goose keeps the results of one assistant message's calls in one message; here
a run of consecutive tool messages is that one message.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.budget import summary_budget
from hermeslab.context.zoo_common import (Message, ZooInput, result, split_system, summarise, summary_message,
                                          total, unchanged)
from hermeslab.core.config import CompressionConfig
from hermeslab.core.errors import ConfigError
from hermeslab.core.messages import text_of

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

SOURCE = "block/goose @ 0036b819bdd7dd02042fb6038e946d22ef56d926 (crates/goose/src/context_mgmt/mod.rs)"
STRATEGY = "goose_summary"
NAME = "goose-0036b81"

#: Share of the window past which Goose compacts.
DEFAULT_THRESHOLD = 0.8
#: Percentages of the tool-result messages left out of successive summary requests that overflow.
REMOVAL_PERCENTAGES = (0, 10, 20, 50, 100)

AFTER_CONVERSATION = ("[The conversation so far was compacted into the summary above. Carry on from it "
                      "without mentioning the summary.]")
AFTER_TOOL_LOOP = ("[The conversation so far was compacted into the summary above. Carry on with the task, "
                   "calling tools as needed, without mentioning the summary.]")


# ---------------------------------------------------------------- when it fires


def goose_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``tokens / window > threshold``: the smallest whole count strictly past the share."""
    return share_of_window(window, cfg.threshold, round_up=False) + 1


def validate(cfg: CompressionConfig) -> None:
    """Goose reads a threshold outside (0, 1) as "auto-compaction off", which a trigger cannot express."""
    if not 0 < cfg.threshold < 1:
        raise ConfigError(f"compression.threshold: Goose compacts only for a share strictly between 0 and 1 "
                          f"(it switches auto-compaction off otherwise), got {cfg.threshold}")


# ---------------------------------------------------------------- what the summariser reads


def tool_result_runs(messages: list[Message]) -> list[list[int]]:
    """Indices of each run of consecutive tool messages: Goose's tool-response messages."""
    runs: list[list[int]] = []
    for index, message in enumerate(messages):
        if message.get("role") != "tool":
            continue
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def middle_out(messages: list[Message], percent: int) -> list[Message]:
    """``messages`` without ``percent``% (at least one) of the tool-response messages, nearest the middle first."""
    runs = tool_result_runs(messages)
    if percent == 0 or not runs:
        return list(messages)
    count = max(len(runs) * percent // 100, 1)
    middle = len(runs) // 2
    chosen: list[int] = []
    for step in range(count):
        offset = step // 2
        if step % 2 == 0 and middle > offset:
            chosen.append(middle - offset - 1)
        elif step % 2 == 1 and middle + offset < len(runs):
            chosen.append(middle + offset)
    dropped = {i for run in chosen for i in runs[run]}
    return [m for i, m in enumerate(messages) if i not in dropped]


def summary_overflows(span: list[Message], zoo: ZooInput) -> bool:
    """Whether a summary request for ``span`` (its messages and the summary's budget) passes the window."""
    span_tokens = total(span, zoo.estimate)
    return span_tokens + summary_budget(zoo.cfg, zoo.budgets, span_tokens) > zoo.budgets.context_length


def request_span(history: list[Message], zoo: ZooInput) -> tuple[list[Message], int] | None:
    """The first of Goose's attempts whose request fits, with its percentage; None when none does."""
    for percent in REMOVAL_PERCENTAGES:
        span = middle_out(history, percent)
        if not summary_overflows(span, zoo):
            return span, percent
    return None


# ---------------------------------------------------------------- the compaction


def newest_text_request(history: list[Message]) -> int | None:
    """Index of the newest user message holding text (tool results are other messages here)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.get("role") == "user" and text_of(message).strip():
            return index
    return None


def goose_summary(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Goose auto-compaction of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    if not history:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    attempt = request_span(history, zoo)
    if attempt is None:
        return unchanged(messages, zoo, {**record, "outcome": "summary_request_overflows"}, aborted=True,
                         error="the summary request overflows the window even without tool results")
    span, percent = attempt
    summary = summarise(span, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True,
                         error=summary.error or "empty summary")
    request = newest_text_request(history)
    last = request is not None and request == len(history) - 1
    out = system + [summary_message("user", summary.body),
                    {"role": "assistant", "content": AFTER_CONVERSATION if last else AFTER_TOOL_LOOP}]
    if request is not None:
        out.append({"role": "user", "content": text_of(history[request])})
    return result(messages, out, condensed=len(history), zoo=zoo,
                  record={**record, "outcome": "compressed", "tool_results_left_out_percent": percent,
                          "request_kept": request is not None},
                  summary=summary.body, fallback=summary.fallback_used)


# ---------------------------------------------------------------- the policy


_MOD = "crates/goose/src/context_mgmt/mod.rs"

POLICY = Policy(
    agent="Goose",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                           "compression.threshold": DEFAULT_THRESHOLD},
                    "past 80% of the window: one summary of everything, a note to go on and the newest request; "
                    "tool results left out from the middle when the summary request overflows."),),
    fidelity="reading",
    strategies={STRATEGY: goose_summary},
    triggers={STRATEGY: goose_trigger},
    validate=validate,
    citations=(
        Citation("default threshold 0.8 of the context limit", "DEFAULT_THRESHOLD", f"{_MOD} 19, 189-194"),
        Citation("compacts when tokens / context limit > threshold (strictly)", "goose_trigger", f"{_MOD} 215-221"),
        Citation("a threshold <= 0 or >= 1 switches auto-compaction off", "validate", f"{_MOD} 217-218"),
        Citation("tokens: the session's reported total, else an estimate of the visible messages", "hermeslab's count",
                 f"{_MOD} 198-213"),
        Citation("every visible message is summarised", "summarise(span)", f"{_MOD} 124-127, 280-284"),
        Citation("attempts leave out 0, 10, 20, 50, then 100% of the tool-response messages", "REMOVAL_PERCENTAGES",
                 f"{_MOD} 286-287"),
        Citation("count = max(len * percent / 100, 1); taken alternately below and above the middle", "middle_out",
                 f"{_MOD} 225-272"),
        Citation("a context-length error moves to the next attempt; after the last, compaction fails", "request_span",
                 f"{_MOD} 289-340 (do_compact's match on ContextLengthExceeded)"),
        Citation("the summary is a user message the model sees", "summary_message('user', ...)",
                 f"{_MOD} 149, do_compact (response.role = Role::User)"),
        Citation("an assistant note follows: one wording after a user's request, another mid tool loop",
                 "AFTER_CONVERSATION, AFTER_TOOL_LOOP", f"{_MOD} 26-34, 153-164"),
        Citation("the newest user message with text and no tool content is re-added as a fresh user message",
                 "newest_text_request", f"{_MOD} 106-122, 169-173"),
        Citation("every earlier message leaves the model's view", "everything else dropped", f"{_MOD} 135-147"),
    ),
)
