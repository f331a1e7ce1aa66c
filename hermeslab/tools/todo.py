"""The agent's task list: a thread-safe store and the ``todo`` tool over it.

The store outlives context compression: after a compression the open items
are re-injected (``format_for_injection``) so the plan is not summarised away.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

from hermeslab.tools.registry import Tool, ToolError

STATUSES = ("pending", "in_progress", "done")
OPEN_STATUSES = ("pending", "in_progress")
#: Longest item text put back into the context after a compression.
INJECTION_ITEM_MAX_CHARS = 4_000
INJECTION_HEADER = "[Your task list was preserved across a context compression; open items:]"
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}


@dataclass(frozen=True)
class TodoItem:
    id: int
    text: str
    status: str = "pending"

    def line(self, max_chars: int | None = None) -> str:
        text = self.text if max_chars is None or len(self.text) <= max_chars else self.text[:max_chars] + "…"
        return f"- {_MARKS[self.status]} {self.id}. {text} ({self.status})"


class TodoStore:
    """Numbered items with a status; ids start at 1 and restart after ``clear``."""

    def __init__(self) -> None:
        self._items: list[TodoItem] = []
        self._next_id = 1
        self._lock = threading.Lock()

    def items(self) -> list[TodoItem]:
        with self._lock:
            return list(self._items)

    def open_items(self) -> list[TodoItem]:
        return [item for item in self.items() if item.status in OPEN_STATUSES]

    def add(self, texts: list[str]) -> list[TodoItem]:
        """Append pending items; returns the new ones."""
        if isinstance(texts, str) or not texts:
            raise ValueError("give a non-empty list of item texts")
        cleaned = []
        for index, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"item {index} must be non-empty text, got {text!r}")
            cleaned.append(text.strip())
        with self._lock:
            added = [TodoItem(self._next_id + offset, text) for offset, text in enumerate(cleaned)]
            self._next_id += len(added)
            self._items.extend(added)
        return added

    def update(self, item_id: int, status: str) -> TodoItem:
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        with self._lock:
            for position, item in enumerate(self._items):
                if item.id == item_id:
                    self._items[position] = TodoItem(item.id, item.text, status)
                    return self._items[position]
            known = ", ".join(str(item.id) for item in self._items) or "none"
        raise ValueError(f"no todo item with id {item_id}; existing ids: {known}")

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._next_id = 1

    def format_for_injection(self) -> str | None:
        """The open items as a short block for the context, or None when nothing is open."""
        open_items = self.open_items()
        if not open_items:
            return None
        return "\n".join([INJECTION_HEADER, *(item.line(INJECTION_ITEM_MAX_CHARS) for item in open_items)])


def _format_list(store: TodoStore) -> str:
    items = store.items()
    if not items:
        return "todo list is empty"
    done = sum(item.status == "done" for item in items)
    return "\n".join([f"todo list: {len(items)} items, {done} done", *(item.line() for item in items)])


def run_todo(store: TodoStore, args: dict[str, Any]) -> str:
    action = args["action"]
    try:
        if action == "add":
            if "items" not in args:
                raise ToolError("action 'add' needs 'items', a list of item texts")
            store.add(args["items"])
        elif action == "update":
            if "id" not in args or "status" not in args:
                raise ToolError("action 'update' needs 'id' and 'status'")
            store.update(args["id"], args["status"])
        elif action == "clear":
            store.clear()
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    return _format_list(store)


def todo_tool(store: TodoStore) -> Tool:
    return Tool(
        name="todo",
        description=(
            "Keep a task list for multi-step work: 'add' items, 'list' them, 'update' one item's status "
            "(pending, in_progress, done) or 'clear' the list; every action returns the whole list. Use it "
            "to plan and track work with three or more steps. Not for storing facts about the user or "
            "project (use memory) and not for simple one-step requests."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "list", "update", "clear"]},
                "items": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "description": "Texts of new items (action 'add').",
                },
                "id": {"type": "integer", "minimum": 1, "description": "Item to update (action 'update')."},
                "status": {"type": "string", "enum": list(STATUSES), "description": "New status (action 'update')."},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
        handler=partial(run_todo, store),
    )
