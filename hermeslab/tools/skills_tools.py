"""The skill tools: ``skills_list``, ``skill_view`` and ``skill_manage`` (create or patch).

The system prompt already lists every skill's name and description; the
model reads a body with ``skill_view`` when a task matches, and writes one
with ``skill_manage`` when it learned a procedure worth keeping.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from hermeslab.memory.skills import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, SkillError, SkillLibrary
from hermeslab.tools.registry import Tool, ToolError

_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "description": "e.g. 'deploy-docs'"}


def run_list(library: SkillLibrary, args: dict[str, Any]) -> str:
    skills = library.list()
    if not skills:
        return "No skills are saved yet."
    lines = [f"- {skill.name}: {skill.description or '(no description)'}" for skill in skills]
    return "\n".join([f"{len(skills)} skill{'s' if len(skills) != 1 else ''}:", *lines])


def run_view(library: SkillLibrary, args: dict[str, Any]) -> str:
    try:
        skill = library.view(args["name"])
    except SkillError as exc:
        raise ToolError(str(exc)) from None
    return f"# {skill.name}\n{skill.description}\n\n{skill.body}"


def run_manage(library: SkillLibrary, args: dict[str, Any]) -> str:
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
            handler=partial(run_list, library), read_only=True, idempotent=True,
        ),
        Tool(
            name="skill_view",
            description="Read a skill's steps; do so before a task the skill covers.",
            parameters={"type": "object", "properties": {"name": _NAME}, "required": ["name"],
                        "additionalProperties": False},
            handler=partial(run_view, library), read_only=True, idempotent=True,
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
                    "name": _NAME,
                    "description": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION_CHARS},
                    "body": {"type": "string", "minLength": 1},
                    "old_text": {"type": "string", "minLength": 1},
                    "new_text": {"type": "string"},
                },
                "required": ["action", "name"],
                "additionalProperties": False,
            },
            handler=partial(run_manage, library),
        ),
    ]
