"""The ``memory`` tool: add, replace or remove an entry of MEMORY.md or USER.md.

Replies are short and terminal on purpose: they report the file's usage but
never echo its entries, so the model does not read its whole memory back
after every save. Refusals (a threat, a full file, an ambiguous match) come
back as tool errors that say what to do instead.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from hermeslab.memory.files import MemoryFiles, MemoryWriteError
from hermeslab.tools.registry import Tool, ToolError

ACTIONS = ("add", "replace", "remove")


def run_memory(files: MemoryFiles, args: dict[str, Any]) -> str:
    action = args["action"]
    try:
        target = files.target(args.get("target", "memory"))
        content, old_text = args.get("content"), args.get("old_text")
        if action in ("replace", "remove") and old_text is None:
            raise ToolError(f"action '{action}' needs 'old_text': a piece of text that occurs in exactly one entry")
        if action in ("add", "replace") and content is None:
            raise ToolError(f"action '{action}' needs 'content': the text of the entry")
        if action == "add":
            usage = target.add(content)
            done = "Saved"
        elif action == "replace":
            usage = target.replace(old_text, content)
            done = "Replaced the entry"
        else:
            usage = target.remove(old_text)
            done = "Removed the entry"
    except MemoryWriteError as exc:
        raise ToolError(str(exc)) from None
    return f"{done} in {target.name}: now {usage.describe()}. Done; no need to read it back."


def memory_tool(files: MemoryFiles) -> Tool:
    targets = files.targets
    if not targets:
        raise ValueError("both memory files are switched off; there is nothing for the memory tool to write")
    return Tool(
        name="memory",
        description=(
            "Keep facts across sessions: target 'user' (USER.md) for who the user is and how they like to work, "
            "'memory' (MEMORY.md) for lasting facts about the environment and projects. 'add' a short entry, or "
            "'replace'/'remove' the entry containing old_text. Each file has a character budget: replace stale "
            "entries rather than adding near-duplicates. Not for task progress, secrets or instructions."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS)},
                "target": {"type": "string", "enum": targets, "description": "Default 'memory'."},
                "content": {"type": "string", "minLength": 1, "description": "The entry (add, replace)."},
                "old_text": {"type": "string", "minLength": 1,
                             "description": "Text found in exactly one entry (replace, remove)."},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
        handler=partial(run_memory, files),
    )
