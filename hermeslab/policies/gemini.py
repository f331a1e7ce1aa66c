"""Gemini CLI's chat compression: shorten old tool outputs, keep the newest ~30% verbatim, snapshot the rest.

The history is cut at a user message (never a tool result) once the messages
before it hold 70% of the history's characters; everything before the cut
becomes one user message holding the summary, followed by a short assistant
acknowledgement, then the kept messages. Before the cut is chosen, tool
outputs beyond a budget of the newest 50,000 tokens of them are shortened to
their first fifth and last four fifths of a character allowance.

A compaction that would leave the prompt larger than before is refused, and
from then on automatic compactions only shorten tool outputs (no summary),
as Gemini CLI remembers such a failure for the rest of the conversation.
"""

from __future__ import annotations

import json
from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.turns import has_tool_calls
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.messages import text_of, wire_message

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

#: Share of the history (in characters) kept verbatim after the cut.
PRESERVE_FRACTION = 0.3
#: Tokens of the newest tool outputs left whole before older ones are shortened.
TOOL_OUTPUT_BUDGET = 50_000
#: Longest shortened tool output, in characters (further capped by four characters per token of room).
TRUNCATE_MAX_CHARS = 40_000
#: Share of a shortened output's allowance taken from its beginning (the rest from its end).
TRUNCATE_HEAD_SHARE = 0.2
#: Gemini CLI's estimate: an ASCII character is a quarter token, any other character one and a half;
#: texts longer than this many characters are simply divided by four.
ESTIMATE_FULL_SCAN_CHARS = 100_000
ACK = "Understood. I will carry on from this snapshot of the work so far."
#: Flag remembered in the compactor's per-conversation memory once a compaction came out larger.
FAILED_FLAG = "gemini_failed_compression"


def estimate_text(text: str) -> float:
    """Gemini CLI's character-class token estimate of ``text``."""
    if len(text) > ESTIMATE_FULL_SCAN_CHARS:
        return len(text) / 4
    ascii_chars = sum(1 for ch in text if ord(ch) <= 127)
    return ascii_chars / 4 + (len(text) - ascii_chars) * 1.5


def shorten_output(text: str, max_chars: int) -> str:
    """``text`` cut to its first fifth and last four fifths of ``max_chars``, with a note of what was left out."""
    if len(text) <= max_chars:
        return text
    head = int(max_chars * TRUNCATE_HEAD_SHARE)
    tail = max_chars - head
    omitted = len(text) - head - tail
    return (f"[tool output shortened for the compaction: its first {head:,} and last {tail:,} characters]\n"
            f"{text[:head]}\n\n…[{omitted:,} characters left out]…\n\n{text[len(text) - tail:] if tail else ''}")


def shorten_old_outputs(history: list[Message], max_chars: int) -> tuple[list[Message], list[int]]:
    """Walk newest to oldest; tool outputs past the 50,000-token budget are shortened. Returns (messages, indices)."""
    used = 0.0
    out = list(history)
    shortened: list[int] = []
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.get("role") != "tool":
            continue
        text = text_of(message)
        tokens = estimate_text(text)
        if used + tokens > TOOL_OUTPUT_BUDGET:
            short = shorten_output(text, max_chars)
            if short != text:
                out[index] = {**message, "content": short}
                shortened.append(index)
            used += estimate_text(short)
        else:
            used += tokens
    return out, sorted(shortened)


def _chars(message: Message) -> int:
    return len(json.dumps(wire_message(message), ensure_ascii=False, default=str))


def split_point(history: list[Message], fraction: float = 1 - PRESERVE_FRACTION) -> int:
    """Index of the oldest message kept: the first user message with ``fraction`` of the characters before it.

    No such message: everything, when the history ends in an assistant reply that
    calls no tool; otherwise the last user message seen (0: nothing to compress).
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must lie strictly between 0 and 1, got {fraction}")
    counts = [_chars(m) for m in history]
    target = sum(counts) * fraction
    seen = 0
    last = 0
    for index, message in enumerate(history):
        if message.get("role") == "user":
            if seen >= target:
                return index
            last = index
        seen += counts[index]
    if history and history[-1].get("role") == "assistant" and not has_tool_calls(history[-1]):
        return len(history)
    return last


def gemini_state_snapshot(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Gemini CLI compression of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    if not history:
        return unchanged(messages, zoo, {"strategy": "gemini_state_snapshot", "outcome": "nothing_to_summarise"})
    prompt = sum(zoo.estimate(m) for m in messages)
    room_chars = max(0, 4 * (zoo.budgets.context_length - prompt))
    shortened, cut_indices = shorten_old_outputs(history, min(room_chars, TRUNCATE_MAX_CHARS))
    record: dict[str, Any] = {"strategy": "gemini_state_snapshot", "shortened_outputs": cut_indices}
    if memory.get(FAILED_FLAG):
        out = system + shortened
        if cut_indices and sum(map(zoo.estimate, out)) < prompt:
            return result(messages, out, condensed=len(cut_indices), zoo=zoo,
                          record={**record, "outcome": "outputs_shortened"})
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    cut = split_point(shortened)
    if cut == 0:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    original_span = history[:cut]
    span_tokens = sum(estimate_text(text_of(m)) for m in original_span)
    span = original_span if span_tokens < zoo.budgets.context_length else shortened[:cut]
    kept = shortened[cut:]
    summary = summarise(span, zoo, kept=kept)
    record.update(split_at=cut, kept_messages=len(kept))
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "empty_summary"}, aborted=True, error=summary.error)
    out = system + [summary_message("user", summary.body), {"role": "assistant", "content": ACK}] + kept
    if sum(map(zoo.estimate, out)) > prompt:
        memory[FAILED_FLAG] = True
        return unchanged(messages, zoo, {**record, "outcome": "inflated"})
    return result(messages, out, condensed=cut, zoo=zoo, record={**record, "outcome": "compressed"},
                  summary=summary.body, fallback=summary.fallback_used)


NAME = "gemini-cli-0.56.0-nightly.20260806"
STRATEGY = "gemini_state_snapshot"
SOURCE = "google-gemini/gemini-cli @ 5411f113"


def gemini_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Gemini CLI compresses unless ``tokens < fraction * window`` (the model's whole token limit)."""
    return max(1, share_of_window(window, cfg.threshold, round_up=True))


POLICY = Policy(
    agent="Gemini CLI",
    source=SOURCE,
    presets=(Preset(NAME, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY, "compression.threshold": 0.5},
                    "at 50% of the window: shorten old tool outputs past 50,000 tokens, keep the newest ~30% from "
                    "a user message on, summary as a user message plus an acknowledgement."),),
    strategies={STRATEGY: gemini_state_snapshot},
    triggers={STRATEGY: gemini_trigger},
    citations=(
        Citation("Chat compression is the default path; the experimental context manager is off unless enabled",
                 "strategy gemini_state_snapshot",
                 "packages/core/src/core/client.ts 643, 689; packages/cli/src/config/settingsSchema.ts 2461-2466"),
        Citation("No compression while the last prompt's tokens are under 0.5 of the model's token limit",
                 "gemini_trigger (ceil), compression.threshold: 0.5",
                 "packages/core/src/context/chatCompressionService.ts 41, 268-285"),
        Citation("Tool outputs, newest first, count against a 50,000-token budget; one that would pass it is "
                 "shortened and its shortened size counts on", "shorten_old_outputs, TOOL_OUTPUT_BUDGET",
                 "packages/core/src/context/chatCompressionService.ts 52, 137-237 (check at 183-186, 210-213)"),
        Citation("A shortened output keeps the first 20% and last 80% of its allowance", "shorten_output, "
                 "TRUNCATE_HEAD_SHARE", "packages/core/src/utils/fileUtils.ts 704-724"),
        Citation("Allowance: min(4 x (token limit - last prompt tokens), 40,000) characters",
                 "room_chars, TRUNCATE_MAX_CHARS", "packages/core/src/config/config.ts 478, 3794-3800"),
        Citation("Estimate: an ASCII character a quarter token, any other 1.5; over 100,000 characters, length / 4",
                 "estimate_text, ESTIMATE_FULL_SCAN_CHARS",
                 "packages/core/src/utils/tokenCalculation.ts 17, 28, 35, 40-57, 120-123"),
        Citation("The newest 30% of the history's characters is kept", "PRESERVE_FRACTION",
                 "packages/core/src/context/chatCompressionService.ts 47, 323-326"),
        Citation("Cut at the first user message (not a tool result) with 70% of the characters before it; none: "
                 "everything if the last message is a reply without tool calls, else the last user message seen",
                 "split_point", "packages/core/src/context/chatCompressionService.ts 60-100"),
        Citation("Nothing before the cut: no compression", "outcome nothing_to_summarise",
                 "packages/core/src/context/chatCompressionService.ts 331-340"),
        Citation("The summariser reads the unshortened span when it fits the token limit, else the shortened one",
                 "span choice in gemini_state_snapshot",
                 "packages/core/src/context/chatCompressionService.ts 342-351"),
        Citation("New history: the summary as a user message, a model acknowledgement, then the kept messages",
                 "[summary (user), ACK (assistant), *kept]",
                 "packages/core/src/context/chatCompressionService.ts 431-441"),
        Citation("An empty summary changes nothing", "outcome empty_summary (aborted)",
                 "packages/core/src/context/chatCompressionService.ts 413-429"),
        Citation("A result larger than the prompt before is refused", "outcome inflated",
                 "packages/core/src/context/chatCompressionService.ts 462-471"),
        Citation("After such a refusal, automatic compressions only shorten tool outputs", "FAILED_FLAG",
                 "packages/core/src/core/client.ts 1216-1221; "
                 "packages/core/src/context/chatCompressionService.ts 294-321"),
    ),
)
