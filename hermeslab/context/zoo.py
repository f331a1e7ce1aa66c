"""The compaction-zoo strategies by name: other agents' compaction policies, each beside hermeslab's own.

A strategy takes the messages, what it needs to ask for a summary, and a
small per-conversation memory (for agents that remember something between
compactions), and returns a BaselineResult. Its trigger rule lives in
``zoo_triggers`` under the same name.
"""

from __future__ import annotations

from typing import Any, Callable

from .baselines import BaselineResult
from .zoo_claude import anthropic_clear_tool_uses, claude_code_summary
from .zoo_codex import codex_user_messages
from .zoo_common import Message, ZooInput
from .zoo_gemini import gemini_state_snapshot
from .zoo_opencode import opencode_prune_summary
from .zoo_roo import roo_condense

ZooStrategy = Callable[[list[Message], ZooInput, dict[str, Any]], BaselineResult]

ZOO_STRATEGIES: dict[str, ZooStrategy] = {
    "codex_user_messages": codex_user_messages,
    "gemini_state_snapshot": gemini_state_snapshot,
    "opencode_prune_summary": opencode_prune_summary,
    "roo_condense": roo_condense,
    "claude_code_summary": claude_code_summary,
    "anthropic_clear_tool_uses": anthropic_clear_tool_uses,
}
