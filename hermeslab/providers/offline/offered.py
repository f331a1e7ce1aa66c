"""The tools a request offers, bound to the intents the model recognised; the Draft it answers with."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from .intents import Intent

Message = dict[str, Any]

@dataclass
class Draft:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)



def call_id(digest: str, index: int, name: str, arguments: str) -> str:
    """Deterministic and unique per conversation state, so a replayed request gets the same ids."""
    return "call_" + hashlib.sha256(f"{digest}:{index}:{name}:{arguments}".encode("utf-8")).hexdigest()[:12]





#: Canonical tool → names the same kind of tool goes by.
TOOL_ALIASES: dict[str, tuple[str, ...]] = {
    "read_file": ("read_file", "file_read", "read", "cat", "view_file"),
    "list_dir": ("list_dir", "list_directory", "list_files", "ls"),
    "write_file": ("write_file", "file_write", "create_file", "write"),
    "search_files": ("search_files", "search_file_content", "grep", "search"),
    "terminal": ("terminal", "shell", "bash", "run_command", "execute_command"),
    "todo": ("todo", "todo_write", "todos"),
    "memory": ("memory", "memory_tool"),
}

#: Argument role → property names that mean it, first preferred.
ARGUMENT_ALIASES: dict[str, tuple[str, ...]] = {
    "path": ("path", "file_path", "filepath", "file", "filename", "directory", "dir", "target_file"),
    "content": ("content", "contents", "text", "data"),
    "pattern": ("pattern", "query", "regex", "search", "term"),
    "command": ("command", "cmd", "script"),
}


@dataclass(frozen=True)
class OfferedTool:
    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]


class OfferedTools:
    """The request's tool schemas, looked up by the kind of tool an intent needs."""

    def __init__(self, tools: Sequence[dict[str, Any]] | None):
        self.tools: list[OfferedTool] = []
        for tool in tools or ():
            function = tool.get("function", tool) if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            parameters = function.get("parameters") or {}
            self.tools.append(OfferedTool(
                name=function["name"],
                properties=dict(parameters.get("properties") or {}),
                required=tuple(parameters.get("required") or ()),
            ))

    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def find(self, kind: str) -> OfferedTool | None:
        by_name = {tool.name: tool for tool in self.tools}
        for alias in TOOL_ALIASES.get(kind, (kind,)):
            if alias in by_name:
                return by_name[alias]
        return None


def kind_of_tool(name: str) -> str:
    for kind, aliases in TOOL_ALIASES.items():
        if name in aliases:
            return kind
    return name


def bind_arguments(roles: dict[str, Any], tool: OfferedTool) -> dict[str, Any]:
    """Name each argument as the tool's schema names it.

    A role the schema does not know is dropped, unless it is the only value
    left and exactly one required property is still empty: then it fills that.
    """
    if not tool.properties:
        return dict(roles)
    bound: dict[str, Any] = {}
    unbound: list[Any] = []
    for role, value in roles.items():
        name = next((n for n in (role, *ARGUMENT_ALIASES.get(role, ())) if n in tool.properties and n not in bound), None)
        if name is None:
            unbound.append(value)
        else:
            bound[name] = value
    still_required = [name for name in tool.required if name not in bound]
    if len(unbound) == 1 and len(still_required) == 1:
        bound[still_required[0]] = unbound[0]
    return bound


def plan_tool_calls(intents: list["Intent"], offered: OfferedTools, digest: str) -> Draft:
    calls: list[dict[str, Any]] = []
    missing: list[str] = []
    for intent in intents:
        tool = offered.find(intent.kind)
        if tool is None:
            if intent.kind not in missing:
                missing.append(intent.kind)
            continue
        arguments = json.dumps(bind_arguments(intent.args, tool), ensure_ascii=False)
        calls.append({
            "id": call_id(digest, len(calls), tool.name, arguments),
            "type": "function",
            "function": {"name": tool.name, "arguments": arguments},
        })
    return Draft(text=unavailable_text(missing, offered) if missing else "", tool_calls=calls)


def unavailable_text(kinds: list[str], offered: OfferedTools) -> str:
    names = ", ".join(f"`{kind}`" for kind in kinds)
    what = f"the {names} tool, but it is" if len(kinds) == 1 else f"the {names} tools, but they are"
    available = ", ".join(f"`{name}`" for name in offered.names())
    tail = f"Tools available here: {available}." if available else "No tools are available in this conversation."
    return f"I recognised a request for {what} not available in this conversation. {tail}"
