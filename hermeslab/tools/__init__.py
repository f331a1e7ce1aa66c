"""Tools the agent can call: the registry, the executor and the built-in tools."""

from __future__ import annotations

import os

from hermeslab.core.config import ToolsConfig
from hermeslab.tools.executor import ToolResult, execute_tool_calls
from hermeslab.tools.files import file_tools
from hermeslab.tools.registry import Tool, ToolError, ToolRegistry, TransientToolError
from hermeslab.tools.terminal import terminal_tool
from hermeslab.tools.todo import TodoItem, TodoStore, todo_tool
from hermeslab.tools.workspace import Workspace

__all__ = [
    "TodoItem",
    "TodoStore",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "TransientToolError",
    "Workspace",
    "builtin_registry",
    "execute_tool_calls",
]


def builtin_registry(config: ToolsConfig, *, todo_store: TodoStore | None = None) -> ToolRegistry:
    """File tools and todo, plus terminal when ``config.terminal.enabled``.

    Pass ``todo_store`` to share the task list with the code that re-injects it
    after a context compression.
    """
    workspace = Workspace(config.workspace or os.getcwd())
    registry = ToolRegistry(file_tools(workspace))
    if config.terminal.enabled:
        registry.register(terminal_tool(workspace, config.terminal))
    registry.register(todo_tool(todo_store if todo_store is not None else TodoStore()))
    return registry
