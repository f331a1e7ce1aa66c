"""Inspect AI's compaction: past 90% of the window, summarise the conversation or trim its older messages.

Inspect keeps the system messages and the task's input (everything up to
the first user message) and compacts the rest once the input it would send
exceeds ``int(0.9 * window)`` tokens. ``CompactionSummary`` (what
``CompactionAuto`` falls back to where the provider has no compaction of its
own) replaces the conversation since the latest summary with one user
summary; ``CompactionTrim`` keeps the newest 80% of the conversation's
messages, drops tool results whose call went and calls whose result went,
and an assistant message left last. A pass that leaves the input over the
threshold is repeated up to three more times while it still shrinks; if the
input is then still over, Inspect raises (here the conversation is kept and
the attempt aborted). ``CompactionEdit`` and the provider-native strategy are
not reproduced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import Message, ZooInput, result, summarise, summary_message, unchanged
from hermeslab.core.config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

VERSION = "0.3.285"
SUMMARY_PRESET = f"inspect-ai-{VERSION}"
TRIM_PRESET = f"inspect-ai-{VERSION}-trim"
SUMMARY_STRATEGY = "inspect_summary"
TRIM_STRATEGY = "inspect_trim"
#: The default threshold: this share of the model's input limit.
THRESHOLD = 0.9
#: Share of the conversation's messages a trim keeps.
PRESERVE = 0.8
#: Passes after the first while the input is still over the threshold.
MORE_PASSES = 3
OPENING = "Summary of the work on this task so far, written to replace the earlier conversation (not the user's):"
CLOSING = "Go on with the task from where it stood."


def threshold_tokens(cfg: CompressionConfig, window: int) -> int:
    """``int(threshold * window)`` in Inspect's float arithmetic (a threshold above 1 is a token count)."""
    return int(cfg.threshold) if cfg.threshold > 1.0 else int(cfg.threshold * window)


def trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Inspect compacts when the input exceeds the threshold: the smallest such prompt is one token more."""
    return threshold_tokens(cfg, window) + 1


@dataclass(frozen=True)
class Parts:
    """Inspect's partition: every system message, the task's input, and the conversation after it."""

    system: list[Message]
    input: list[Message]
    conversation: list[Message]


def partition(messages: list[Message]) -> Parts:
    """The input is the messages up to and including the first user message (a summary ends it early)."""
    system = [m for m in messages if m.get("role") == "system"]
    conversation = [m for m in messages if m.get("role") != "system"]
    taken: list[Message] = []
    while conversation and not is_summary_message(conversation[0]):
        message = conversation.pop(0)
        taken.append(message)
        if message.get("role") == "user":
            break
    return Parts(system, taken, conversation)


def _summary_pass(messages: list[Message], zoo: ZooInput) -> list[Message] | str:
    """One ``CompactionSummary.compact``: system + input + a summary of the conversation from its latest summary."""
    parts = partition(messages)
    start = max((i for i, m in enumerate(parts.conversation) if is_summary_message(m)), default=0)
    summary = summarise(parts.input + parts.conversation[start:], zoo)
    if not summary.body:
        return summary.error or "empty summary"
    return parts.system + parts.input + [summary_of(summary.body)]


def summary_of(body: str) -> Message:
    """The user message a summary becomes (hermeslab's wording in the place of Inspect's)."""
    return summary_message("user", f"{OPENING}\n\n{body}\n\n{CLOSING}")


def trim(messages: list[Message], preserve: float = PRESERVE) -> list[Message]:
    """One ``trim_messages``: system + input + the newest share of the conversation, tool pairs made whole."""
    parts = partition(messages)
    start = int(len(parts.conversation) * (1 - preserve))
    kept: list[Message] = []
    active: set[str] = set()
    for message in parts.conversation[start:]:
        role = message.get("role")
        if role == "assistant":
            active = {str(call.get("id")) for call in message.get("tool_calls") or []}
            kept.append(message)
        elif role == "tool" and str(message.get("tool_call_id")) in active:
            kept.append(message)
        elif role == "user":
            active = set()
            kept.append(message)
    answered = {str(m.get("tool_call_id")) for m in kept if m.get("role") == "tool"}
    whole = [_answered_calls_only(m, answered) for m in kept]
    if whole and whole[-1].get("role") == "assistant":
        whole.pop()
    return parts.system + parts.input + whole


def _answered_calls_only(message: Message, answered: set[str]) -> Message:
    calls = message.get("tool_calls") or []
    if message.get("role") != "assistant" or not calls:
        return message
    valid = [call for call in calls if str(call.get("id")) in answered]
    if len(valid) == len(calls):
        return message
    copy = {key: value for key, value in message.items() if key != "tool_calls"}
    return {**copy, "tool_calls": valid} if valid else copy


def _compact(messages: list[Message], zoo: ZooInput, record: dict[str, Any],
             one_pass: Callable[[list[Message]], list[Message] | str]) -> BaselineResult:
    """Inspect's ``_perform_compaction``: one pass, then up to three more while over the threshold and shrinking."""
    limit = threshold_tokens(zoo.cfg, zoo.budgets.context_length)
    out = one_pass(messages)
    passes = 1
    if isinstance(out, str):
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True, error=out)
    tokens = sum(zoo.estimate(m) for m in out)
    for _ in range(MORE_PASSES):
        if tokens <= limit:
            break
        previous = tokens
        again = one_pass(out)
        passes += 1
        if isinstance(again, str):
            return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True, error=again)
        out, tokens = again, sum(zoo.estimate(m) for m in again)
        if tokens >= previous:
            break
    if tokens > limit:
        return unchanged(messages, zoo, {**record, "outcome": "insufficient", "passes": passes}, aborted=True,
                         error=f"compaction left {tokens:,} tokens, over the threshold of {limit:,}")
    summaries = [m for m in out if m.get("_compressed_summary")]
    return result(messages, out, condensed=max(1, len(messages) - len(out)), zoo=zoo,
                  record={**record, "outcome": "compressed", "passes": passes},
                  summary=str(summaries[-1]["content"]) if summaries else None)


def inspect_summary(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One ``CompactionSummary`` compaction at its defaults."""
    return _compact(messages, zoo, {"strategy": SUMMARY_STRATEGY}, lambda current: _summary_pass(current, zoo))


def inspect_trim(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One ``CompactionTrim`` compaction at its defaults (keep 80% of the conversation's messages)."""
    return _compact(messages, zoo, {"strategy": TRIM_STRATEGY}, trim)


_C = "inspect_ai/model/_compaction"

#: Where each number and rule was read, in inspect-ai 0.3.285 as installed from the package index.
CITATIONS = (
    Citation("threshold 0.9 of the context window by default", "THRESHOLD",
             f"{_C}/types.py:42, summary.py:37, trim.py:28, auto.py:35"),
    Citation("a threshold above 1 is a token count, else int(threshold * input limit)", "threshold_tokens",
             f"{_C}/_compaction.py:440-462"),
    Citation("compacts when the input's tokens (tools included) exceed the threshold", "trigger",
             f"{_C}/_compaction.py:186-218"),
    Citation("one pass, then up to 3 more while over the threshold and shrinking; still over raises",
             "MORE_PASSES, _compact", f"{_C}/_compaction.py:398-433"),
    Citation("partition: every system message, the input up to the first user message, the conversation",
             "partition", "inspect_ai/model/_trim.py:99-123"),
    Citation("summary: system + input + one user summary of the conversation from its latest summary",
             "inspect_summary", f"{_C}/summary.py:88-161"),
    Citation("trim keeps int(n * (1 - preserve)) on, preserve 0.8", "PRESERVE, trim",
             f"{_C}/trim.py:30, 62; inspect_ai/model/_trim.py:38-39"),
    Citation("trim drops results whose call went, calls whose result went, and a last assistant message",
             "trim", "inspect_ai/model/_trim.py:45-84"),
)


def _preset(name: str, strategy: str, line: str) -> Preset:
    return Preset(name, {**IN_PLACE_NO_BREAKER, "compression.strategy": strategy, "compression.threshold": THRESHOLD},
                  line)


POLICY = Policy(
    agent="Inspect AI",
    source=f"inspect-ai {VERSION} (PyPI)",
    presets=(_preset(SUMMARY_PRESET, SUMMARY_STRATEGY, "past 90% of the window: keep the system messages and the "
                     "task's input, replace the rest with one user summary"),
             _preset(TRIM_PRESET, TRIM_STRATEGY, "past 90% of the window: keep the system messages, the task's "
                     "input and the newest 80% of the other messages")),
    fidelity="parity",
    strategies={SUMMARY_STRATEGY: inspect_summary, TRIM_STRATEGY: inspect_trim},
    triggers={SUMMARY_STRATEGY: trigger, TRIM_STRATEGY: trigger},
    citations=CITATIONS,
)
