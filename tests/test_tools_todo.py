"""The todo store, its re-injection text and the todo tool."""

from __future__ import annotations

import json
import threading

import pytest

from hermeslab.core.config import ToolsConfig
from hermeslab.tools import TodoItem, TodoStore, builtin_registry, execute_tool_calls
from hermeslab.tools.todo import INJECTION_HEADER, INJECTION_ITEM_MAX_CHARS


def test_add_numbers_items_from_one_and_keeps_order():
    store = TodoStore()
    added = store.add(["write tests", "  fix bug  "])
    assert added == [TodoItem(1, "write tests", "pending"), TodoItem(2, "fix bug", "pending")]
    store.add(["ship"])
    assert [(i.id, i.text) for i in store.items()] == [(1, "write tests"), (2, "fix bug"), (3, "ship")]


def test_update_changes_status_and_open_items_exclude_done():
    store = TodoStore()
    store.add(["a", "b", "c"])
    assert store.update(2, "in_progress") == TodoItem(2, "b", "in_progress")
    store.update(1, "done")
    assert [item.id for item in store.open_items()] == [2, 3]
    store.update(1, "pending")
    assert [item.id for item in store.open_items()] == [1, 2, 3]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.add([]), "non-empty list"),
        (lambda s: s.add("one string"), "non-empty list"),
        (lambda s: s.add(["ok", "  "]), "item 1 must be non-empty text"),
        (lambda s: s.update(1, "finished"), "unknown status 'finished'; use one of pending, in_progress, done"),
        (lambda s: s.update(9, "done"), "no todo item with id 9; existing ids: 1"),
    ],
)
def test_store_rejects_bad_input_clearly(call, message):
    store = TodoStore()
    store.add(["first"])
    with pytest.raises(ValueError, match=message):
        call(store)
    assert store.items() == [TodoItem(1, "first")]


def test_clear_empties_the_list_and_restarts_numbering():
    store = TodoStore()
    store.add(["a", "b"])
    store.clear()
    assert store.items() == []
    assert store.add(["c"]) == [TodoItem(1, "c")]


def test_format_for_injection_lists_open_items_only():
    store = TodoStore()
    assert store.format_for_injection() is None
    store.add(["write tests", "fix bug", "ship"])
    store.update(2, "in_progress")
    store.update(3, "done")
    assert store.format_for_injection() == "\n".join(
        [INJECTION_HEADER, "- [ ] 1. write tests (pending)", "- [>] 2. fix bug (in_progress)"]
    )
    store.update(1, "done")
    store.update(2, "done")
    assert store.format_for_injection() is None


def test_format_for_injection_caps_each_item():
    store = TodoStore()
    store.add(["x" * (INJECTION_ITEM_MAX_CHARS + 100)])
    line = store.format_for_injection().splitlines()[1]
    assert line == f"- [ ] 1. {'x' * INJECTION_ITEM_MAX_CHARS}… (pending)"


def test_concurrent_adds_give_unique_ids():
    store = TodoStore()

    def add_many(prefix: str) -> None:
        for i in range(200):
            store.add([f"{prefix}{i}"])

    threads = [threading.Thread(target=add_many, args=(p,)) for p in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [item.id for item in store.items()]
    assert sorted(ids) == list(range(1, 801))


# ---------------------------------------------------------------- the tool


def todo_call(store: TodoStore, **arguments):
    registry = builtin_registry(ToolsConfig(), todo_store=store)
    [result] = execute_tool_calls(
        [{"id": "t", "type": "function", "function": {"name": "todo", "arguments": json.dumps(arguments)}}], registry
    )
    return result


def test_tool_actions_drive_the_shared_store():
    store = TodoStore()
    added = todo_call(store, action="add", items=["plan", "build"])
    assert added.content == "todo list: 2 items, 0 done\n- [ ] 1. plan (pending)\n- [ ] 2. build (pending)"
    updated = todo_call(store, action="update", id=1, status="done")
    assert updated.content == "todo list: 2 items, 1 done\n- [x] 1. plan (done)\n- [ ] 2. build (pending)"
    assert todo_call(store, action="list").content == updated.content
    assert store.format_for_injection() == f"{INJECTION_HEADER}\n- [ ] 2. build (pending)"
    assert todo_call(store, action="clear").content == "todo list is empty"
    assert store.items() == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"action": "add"}, "action 'add' needs 'items'"),
        ({"action": "update", "id": 1}, "action 'update' needs 'id' and 'status'"),
        ({"action": "update", "id": 7, "status": "done"}, "no todo item with id 7"),
        ({"action": "update", "id": 1, "status": "later"}, "invalid arguments for todo: status: 'later' is not one of"),
        ({"action": "remove"}, "invalid arguments for todo: action: 'remove' is not one of"),
        ({"action": "add", "items": ["ok", 5]}, "invalid arguments for todo: items/1: 5 is not of type 'string'"),
    ],
)
def test_tool_errors_are_clear_results(arguments, message):
    store = TodoStore()
    store.add(["existing"])
    result = todo_call(store, **arguments)
    assert result.is_error
    assert result.content.startswith(message)
    assert store.items() == [TodoItem(1, "existing")]


def test_registry_without_a_store_gets_its_own():
    registry = builtin_registry(ToolsConfig())
    first = registry.get("todo").handler({"action": "add", "items": ["solo"]})
    assert first.endswith("1. solo (pending)")
    other = builtin_registry(ToolsConfig()).get("todo").handler({"action": "list"})
    assert other == "todo list is empty"
