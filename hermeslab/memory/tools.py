"""The tools memory offers the agent: ``memory`` (MEMORY.md / USER.md entries) and the skill tools.

They live with the memory they write, so the tools package stays generic
(registry, executor, workspace tools) and never depends on memory; `Memory`
hands these to whoever builds the agent's ToolRegistry.

The ``memory`` tool's replies are short and terminal on purpose: they report
the file's usage but never echo its entries, so the model does not read its
whole memory back after every save. Refusals (a threat, a full file, an
ambiguous match) come back as tool errors that say what to do instead.

The system prompt already lists every skill's name and description; the model
reads a body with ``skill_view`` when a task matches, and writes one with
``skill_manage`` when it learned a procedure worth keeping.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from hermeslab.tools.registry import Tool, ToolError

from .files import MemoryFiles, MemoryWriteError
from .skills import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, SkillError, SkillLibrary

MEMORY_ACTIONS = ("add", "replace", "remove")
_SKILL_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "description": "e.g. 'deploy-docs'"}


# ---------------------------------------------------------------- memory


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
                "action": {"type": "string", "enum": list(MEMORY_ACTIONS)},
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


# ---------------------------------------------------------------- skills


def run_skills_list(library: SkillLibrary, args: dict[str, Any]) -> str:
    skills = library.list()
    if not skills:
        return "No skills are saved yet."
    lines = [f"- {skill.name}: {skill.description or '(no description)'}" for skill in skills]
    return "\n".join([f"{len(skills)} skill{'s' if len(skills) != 1 else ''}:", *lines])


def run_skill_view(library: SkillLibrary, args: dict[str, Any]) -> str:
    try:
        skill = library.view(args["name"])
    except SkillError as exc:
        raise ToolError(str(exc)) from None
    return f"# {skill.name}\n{skill.description}\n\n{skill.body}"


def run_skill_manage(library: SkillLibrary, args: dict[str, Any]) -> str:
    action, name = args["action"], args["name"]
    try:
        if action == "create":
            missing = [key for key in ("description", "body") if not args.get(key)]
            if missing:
                raise ToolError(f"action 'create' needs {' and '.join(repr(k) for k in missing)}")
            skill = library.create(name, args["description"], args["body"])
            return f"Created skill {skill.name!r} ({len(skill.body):,} chars)."
        skill = library.patch(name, old_text=args.get("old_text"), new_text=args.get("new_text"),
                              description=args.get("description"))
        return f"Patched skill {skill.name!r} ({len(skill.body):,} chars)."
    except SkillError as exc:
        raise ToolError(str(exc)) from None


def skills_tools(library: SkillLibrary) -> list[Tool]:
    return [
        Tool(
            name="skills_list",
            description="List saved skills (name and description), including ones saved since the session began.",
            parameters={"type": "object", "properties": {}, "additionalProperties": False},
            handler=partial(run_skills_list, library), read_only=True, idempotent=True,
        ),
        Tool(
            name="skill_view",
            description="Read a skill's steps; do so before a task the skill covers.",
            parameters={"type": "object", "properties": {"name": _SKILL_NAME}, "required": ["name"],
                        "additionalProperties": False},
            handler=partial(run_skill_view, library), read_only=True, idempotent=True,
        ),
        Tool(
            name="skill_manage",
            description=(
                "Save a reusable procedure for a class of tasks. 'create': name, a one-line description of when "
                "to use it, and the steps as body. 'patch': replace old_text (found once in the body) with "
                "new_text, and/or set a new description."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "patch"]},
                    "name": _SKILL_NAME,
                    "description": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION_CHARS},
                    "body": {"type": "string", "minLength": 1},
                    "old_text": {"type": "string", "minLength": 1},
                    "new_text": {"type": "string"},
                },
                "required": ["action", "name"],
                "additionalProperties": False,
            },
            handler=partial(run_skill_manage, library),
        ),
    ]
