"""Anthropic's documented context management: Claude Code's compaction and the API's tool-result clearing.

Neither is open source, so both follow Anthropic's published documentation
(pages and dates in ``docs/presets.md``), not a reading of code.

Claude Code: a compaction replaces the conversation with one structured
summary; the system prompt is not part of the history and stays as it was.
With nothing but the system prompt there is nothing to compact. The docs
say Claude Code clears older tool outputs before it summarises, but give no
rule for which or how many, so that step is left out here.

The API's ``clear_tool_uses_20250919`` with its documented defaults: every
tool result but the newest three is replaced by a placeholder; the calls
that asked for them stay as they were, no tool is exempt, and no minimum
amount has to be freed. The API applies the edit to each request and leaves
the client's history whole; here the cleared conversation replaces the old
one when the trigger fires (the only point at which a strategy acts).
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.compression_config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

#: Tool uses (call and result) the API leaves untouched, newest first: the documented default of ``keep``.
KEEP_TOOL_USES = 3
#: What a cleared tool result reads; the documented text is not published, so this wording is hermeslab's.
CLEARED = "[tool result cleared to save context]"


def claude_code_summary(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Claude Code compaction: the system prompt, then one summary of everything after it."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": "claude_code_summary"}
    if not history:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    summary = summarise(history, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "empty_summary"}, aborted=True, error=summary.error)
    out = system + [summary_message("user", summary.body)]
    return result(messages, out, condensed=len(history), zoo=zoo, record={**record, "outcome": "compressed"},
                  summary=summary.body, fallback=summary.fallback_used)


def results_to_clear(messages: list[Message], keep: int = KEEP_TOOL_USES) -> list[int]:
    """Indices of the tool results older than the newest ``keep`` that still hold their output."""
    results = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    older = results[:max(0, len(results) - keep)]
    return [i for i in older if messages[i].get("content") != CLEARED]


def anthropic_clear_tool_uses(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One ``clear_tool_uses_20250919`` edit at its defaults: old tool results become a placeholder."""
    chosen = results_to_clear(messages)
    record: dict[str, Any] = {"strategy": "anthropic_clear_tool_uses", "cleared_results": chosen}
    if not chosen:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_clear"})
    cleared = set(chosen)
    out = [{**m, "content": CLEARED} if i in cleared else m for i, m in enumerate(messages)]
    return result(messages, out, condensed=len(chosen), zoo=zoo, record={**record, "outcome": "cleared"})


CLAUDE_CODE = "claude-code-docs-2026-08-22"
CLEAR_TOOL_USES = "anthropic-clear-tool-uses-20250919"
SUMMARY = "claude_code_summary"
CLEAR = "anthropic_clear_tool_uses"
#: Input tokens ``clear_tool_uses_20250919`` waits for the prompt to exceed by default (its ``trigger``).
CLEAR_TOOL_USES_TRIGGER = 100_000


def claude_code_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Claude Code compacts when the conversation reaches the auto-compact window, by default the whole window."""
    return max(1, share_of_window(window, cfg.threshold, round_up=True))


def clear_tool_uses_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Tool-result clearing acts once the prompt exceeds ``min_threshold_tokens`` (the edit's ``trigger``)."""
    return cfg.min_threshold_tokens + 1


POLICY = Policy(
    agent="Claude Code and Anthropic's context editing",
    source="Anthropic's docs, 2026-08-22: code.claude.com/docs/en/model-config and context-window (Claude Code "
           "v2.1.240); platform.claude.com/docs/en/build-with-claude/context-editing",
    presets=(
        # With no auto-compact window set, Claude Code compacts at the model's context limit; the
        # fraction stands for an auto-compact window set below it.
        Preset(CLAUDE_CODE, {**IN_PLACE_NO_BREAKER, "compression.strategy": SUMMARY, "compression.threshold": 1.0},
               "at the whole window: replace everything after the system prompt with one summary "
               "(the documented clearing of older tool outputs first is left out: no rule published)."),
        # The API's trigger is in tokens, not a share of the window: it rides in min_threshold_tokens.
        Preset(CLEAR_TOOL_USES, {**IN_PLACE_NO_BREAKER, "compression.strategy": CLEAR,
                                 "compression.threshold": 1.0,
                                 "compression.min_threshold_tokens": CLEAR_TOOL_USES_TRIGGER},
               "once the prompt exceeds 100,000 tokens: replace every tool result but the newest 3 "
               "with a placeholder; calls stay, nothing is summarised."),
    ),
    strategies={SUMMARY: claude_code_summary, CLEAR: anthropic_clear_tool_uses},
    triggers={SUMMARY: claude_code_trigger, CLEAR: clear_tool_uses_trigger},
    # Line numbers are those of the pages' stored copies named in docs/presets.md: Claude Code's pages as
    # docs/<page>.md in ericbuess/claude-code-docs @ ec68a5b2, the API's page as
    # content/en/build-with-claude/context-editing.md in thevibeworks/claude-code-docs @ 3f1ef7c2.
    citations=(
        Citation("With no auto-compact window set, Claude Code compacts when the conversation reaches the "
                 "model's context limit", "claude_code_trigger, compression.threshold: 1.0",
                 "model-config page, \"Default auto-compact thresholds\" (model-config.md 651-653)"),
        Citation("An auto-compact window of 100K to 1M tokens, capped at the model's window, sets how full the "
                 "context gets first", "a compression.threshold below 1.0",
                 "model-config page, \"Set the auto-compact window\" (model-config.md 635-649); env-vars page, "
                 "CLAUDE_CODE_AUTO_COMPACT_WINDOW (env-vars.md 212)"),
        Citation("Only the context limit is named, no output reserve", "model.max_tokens plays no part",
                 "model-config page (model-config.md 651-653)"),
        Citation("A compaction replaces the conversation with a structured summary", "claude_code_summary",
                 "context-window page, \"What survives compaction\" (context-window.md 1582, 1586)"),
        Citation("The system prompt is unchanged and not part of the message history",
                 "system messages kept in front", "context-window page, \"What survives compaction\" table "
                 "(context-window.md 1588-1590)"),
        Citation("The automatic pass works as /compact does", "one strategy for every trigger",
                 "context-window page, \"When your context fills up\" (context-window.md 1604)"),
        Citation("A fresh session has nothing to compact", "outcome nothing_to_summarise",
                 "costs page, \"Reduce token usage\" (costs.md 175)"),
        Citation("clear_tool_uses_20250919 trigger: 100,000 input tokens; clearing begins once the prompt "
                 "exceeds it", "CLEAR_TOOL_USES_TRIGGER, clear_tool_uses_trigger",
                 "context-editing page, \"Configuration options for tool result clearing\" "
                 "(context-editing.md 1731)"),
        Citation("keep: 3 tool uses, the oldest cleared first", "KEEP_TOOL_USES, results_to_clear",
                 "context-editing page (context-editing.md 1732; \"Tool result clearing\", 36-40)"),
        Citation("clear_at_least: none; exclude_tools: none", "min_saving 0, no tool exempt",
                 "context-editing page (context-editing.md 1733-1734)"),
        Citation("clear_tool_inputs: false, so the calls stay and only results are cleared",
                 "anthropic_clear_tool_uses", "context-editing page (context-editing.md 1735; 40)"),
        Citation("Each cleared result is replaced by placeholder text saying it was removed", "CLEARED",
                 "context-editing page, \"Tool result clearing\" (context-editing.md 40)"),
    ),
)
