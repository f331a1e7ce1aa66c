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

from .baselines import BaselineResult
from .zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged

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
