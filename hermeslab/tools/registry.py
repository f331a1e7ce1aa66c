"""Tool definitions and the registry the agent offers to the model.

A tool is data (name, description, JSON schema) plus a handler that turns
validated arguments into the text the model reads. Two flags tell the executor
what it may do with a call: ``read_only`` calls may overlap with each other,
``idempotent`` calls may be repeated after a transient failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from hermeslab.tools.schema_check import check_schema

#: The character set and length OpenAI-compatible APIs accept for function names.
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolError(Exception):
    """A failure the model should read and react to; its text becomes the tool result."""


class TransientToolError(ToolError):
    """A failure that may go away on its own (a busy resource, a flaky connection).

    The executor retries it only for idempotent tools, where running twice is harmless.
    """


Handler = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Tool:
    name: str
    #: Says when to use the tool and when not to: models pick tools by this text.
    description: str
    #: JSON schema of the arguments object.
    parameters: dict[str, Any]
    handler: Handler
    #: Safe to run concurrently with other read-only calls.
    read_only: bool = False
    #: Safe to retry after a transient failure.
    idempotent: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_PATTERN.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 characters of letters, digits, '_' or '-'")
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"tool {self.name}: the description must be non-empty text")
        if not callable(self.handler):
            raise ValueError(f"tool {self.name}: the handler must be callable")
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: parameters must be a JSON schema with \"type\": \"object\"")
        try:
            check_schema(self.parameters)
        except ValueError as exc:
            raise ValueError(f"tool {self.name}: parameters are not a valid JSON schema: {exc}") from None

    def schema(self) -> dict[str, Any]:
        """The entry for the ``tools`` list of a chat-completions request."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ToolRegistry:
    """Tools by name, in registration order (the order the model sees them)."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f"expected a Tool, got {type(tool).__name__}")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        if name not in self._tools:
            raise KeyError(f"no tool named {name!r} is registered")
        del self._tools[name]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self]  # a snapshot: MCP tools may change from another thread

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))
