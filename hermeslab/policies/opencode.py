"""opencode's compaction: clear old tool outputs past a protected budget, then summarise the whole session.

The prune walks back from the newest message, leaves the last two user turns
alone, stops at an earlier summary or at an output already cleared, and counts
the tokens of completed tool outputs (``skill`` outputs never count or clear).
Outputs beyond the newest 40,000 tokens are cleared, but only when that frees
more than 20,000 tokens. Then the whole conversation, as it now reads, is
summarised; afterwards the model sees only the request for a summary, the
summary as the assistant's answer, and a note asking it to go on.

opencode prunes after every turn and compacts when a reply's token count
reaches the usable window; here the prune runs when the compaction does (the
only point at which a strategy acts), so between compactions the context
still holds outputs opencode would already have cleared.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.messages import text_of, tool_calls_of

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

#: Tokens of the newest tool outputs the prune never clears.
PRUNE_PROTECT = 40_000
#: The prune applies only when it would clear more than this many tokens.
PRUNE_MINIMUM = 20_000
#: Tools whose outputs are never cleared.
PROTECTED_TOOLS = frozenset({"skill"})
#: User turns at the end of the conversation the prune leaves alone.
PROTECTED_TURNS = 2
CLEARED = "[older tool output cleared to save context]"
ASK = "Summarise what we have done so far."
GO_ON = "Go on with the next step if there is one; if you are unsure how to proceed, ask."


def estimate_tokens(text: str) -> int:
    """opencode's estimate: a quarter of the text's length in UTF-16 code units (JavaScript's
    ``length``), rounded half up as ``Math.round`` does."""
    return (len(text.encode("utf-16-le")) // 2 + 2) // 4


def _tool_names(history: list[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in history:
        for call in tool_calls_of(message):
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name", ""))
    return names


def outputs_to_clear(history: list[Message]) -> tuple[list[int], int, int]:
    """(indices of the tool outputs the prune clears, tokens counted, tokens they hold); none when under the minimum."""
    names = _tool_names(history)
    turns = 0
    counted = 0
    pruned = 0
    chosen: list[int] = []
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        role = message.get("role")
        if role == "user":
            turns += 1
        if turns < PROTECTED_TURNS:
            continue
        if role == "assistant" and is_summary_message(message):
            break
        if role != "tool":
            continue
        if names.get(str(message.get("tool_call_id")), "") in PROTECTED_TOOLS:
            continue
        text = text_of(message)
        if text == CLEARED:
            break
        tokens = estimate_tokens(text)
        counted += tokens
        if counted > PRUNE_PROTECT:
            pruned += tokens
            chosen.append(index)
    if pruned <= PRUNE_MINIMUM:
        return [], counted, pruned
    return sorted(chosen), counted, pruned


def prune(history: list[Message]) -> tuple[list[Message], list[int]]:
    """``history`` with old tool outputs cleared by opencode's rule, and the indices cleared."""
    chosen, _, _ = outputs_to_clear(history)
    cleared = set(chosen)
    return [{**m, "content": CLEARED} if i in cleared else m for i, m in enumerate(history)], chosen


def opencode_prune_summary(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One opencode compaction of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": "opencode_prune_summary"}
    if not history:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    pruned, cleared = prune(history)
    record["cleared_outputs"] = cleared
    summary = summarise(pruned, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "empty_summary"}, aborted=True, error=summary.error)
    out = system + [{"role": "user", "content": ASK, "_synthetic": True},
                    summary_message("assistant", summary.body),
                    {"role": "user", "content": GO_ON, "_synthetic": True}]
    return result(messages, out, condensed=len(history), zoo=zoo, record={**record, "outcome": "compressed"},
                  summary=summary.body, fallback=summary.fallback_used)


NAME = "opencode-1.1.59"
STRATEGY = "opencode_prune_summary"
SOURCE = "anomalyco/opencode (sst/opencode) @ fd78ec63"
#: Output cap opencode reserves when the model's own is larger or unknown.
OUTPUT_MAX = 32_000


def opencode_reserve(max_tokens: int | None) -> int:
    """The output reserve opencode keeps: the model's cap up to 32,000, else 32,000."""
    return min(max_tokens, OUTPUT_MAX) if max_tokens else OUTPUT_MAX


def opencode_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """opencode compacts once ``tokens >= window - min(output cap, 32,000)`` (no separate input limit known)."""
    return max(1, share_of_window(window, cfg.threshold, round_up=False) - opencode_reserve(max_tokens))


POLICY = Policy(
    agent="opencode",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY, "compression.threshold": 1.0},
                    "at the window less the output reserve: clear tool outputs past the newest 40,000 tokens "
                    "(if over 20,000 freed), then replace everything with a summary."),),
    strategies={STRATEGY: opencode_prune_summary},
    triggers={STRATEGY: opencode_trigger},
    output_reserves={STRATEGY: opencode_reserve},
    citations=(
        Citation("Compacts when a reply's token count reaches usable = context - the output reserve "
                 "(no separate input limit)", "opencode_trigger, compression.threshold: 1.0",
                 "packages/opencode/src/session/compaction.ts 32-48 (count >= usable, 47)"),
        Citation("Output reserve: the model's output cap, at most 32,000; 32,000 when unknown",
                 "OUTPUT_MAX, opencode_reserve",
                 "packages/opencode/src/provider/transform.ts 21 (OUTPUT_TOKEN_MAX), maxOutputTokens"),
        Citation("The prune leaves the newest 40,000 tokens of tool outputs alone", "PRUNE_PROTECT",
                 "packages/opencode/src/session/compaction.ts 51, 82"),
        Citation("The prune applies only when more than 20,000 tokens would be cleared", "PRUNE_MINIMUM",
                 "packages/opencode/src/session/compaction.ts 50, 90"),
        Citation("skill outputs never count nor clear", "PROTECTED_TOOLS",
                 "packages/opencode/src/session/compaction.ts 53, 77"),
        Citation("Walk back; skip until two user turns are seen; stop at a summary or an output already cleared",
                 "outputs_to_clear, PROTECTED_TURNS", "packages/opencode/src/session/compaction.ts 68-88"),
        Citation("A cleared output reads as a fixed placeholder", "CLEARED",
                 "packages/opencode/src/session/message-v2.ts, toModelMessages (time.compacted)"),
        Citation("Token estimate: round(length / 4), length in UTF-16 code units", "estimate_tokens",
                 "packages/opencode/src/util/token.ts @ 0f7d18ad, 2-6 (not stored at fd78ec63; a "
                 "character-class estimator was proposed to opencode in pull request 4799 and closed "
                 "without being merged)"),
        Citation("The summary is an assistant message marked summary, answering a compaction request",
                 "[ASK (user), summary (assistant)]", "packages/opencode/src/session/compaction.ts 113-121"),
        Citation("The summary request carries the whole (pruned) session", "summarise(pruned)",
                 "packages/opencode/src/session/compaction.ts 187-188"),
        Citation("Afterwards the history the model reads starts at that request", "everything before is gone",
                 "packages/opencode/src/session/message-v2.ts, filterCompacted"),
        Citation("An automatic compaction adds a synthetic user message asking the model to go on", "GO_ON",
                 "packages/opencode/src/session/compaction.ts 202-219"),
    ),
)
