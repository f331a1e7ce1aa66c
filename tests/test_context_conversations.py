"""Conversation builders and Hypothesis strategies shared by the context tests.

The strategy produces realistic agent transcripts: a system prompt, user turns
(some multimodal with base64 images, some back to back), assistant turns with
1-3 parallel tool calls and their results (small, huge, repeated, JSON),
plain replies, long JSON arguments and the odd non-JSON argument string.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.core.messages import validate_messages
from hermeslab.context.types import SummaryOutcome

WORDS = ("alpha", "build", "cache", "delta", "error", "file", "graph", "index", "json", "kernel", "log", "merge",
         "node", "order", "patch", "query", "retry", "shell", "token", "user", "value", "window", "x86", "yaml")
TOOLS = ("terminal", "read_file", "write_file", "search_files", "web_search", "get_order_details", "bash")
IMAGE_URL = "data:image/png;base64," + "iVBORw0KGgo" * 40


_WORD_CYCLE = [WORDS[(i * 7) % len(WORDS)] for i in range(len(WORDS))] * 200


def text(n_words: int, salt: int = 0) -> str:
    """Deterministic filler: ``n_words`` words, varied by ``salt``."""
    start = (salt * 7) % len(WORDS)
    return " ".join(_WORD_CYCLE[start:start + n_words])


def system(content: str = "You are a careful coding agent.") -> dict:
    return {"role": "system", "content": content}


def user(content) -> dict:
    return {"role": "user", "content": content}


def assistant(content: str = "", calls: list[dict] | None = None) -> dict:
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def call(call_id: str, name: str, arguments) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def tool(call_id: str, content) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def tool_turn(call_id: str, name: str, arguments, output, note: str = "") -> list[dict]:
    """An assistant message with one call, followed by its result."""
    return [assistant(note, [call(call_id, name, arguments)]), tool(call_id, output)]


def agent_session(turns: int = 6, output_words: int = 300, task: str = "Fix the failing login test in auth.py",
                  call_prefix: str = "c") -> list[dict]:
    """A deterministic coding session: one task, then tool turns and short replies."""
    messages = [system(), user(task)]
    for i in range(turns):
        messages += tool_turn(f"{call_prefix}{i}", "terminal", {"command": f"pytest -k case{i}"}, text(output_words, i),
                              note=f"Running case {i}.")
        messages.append(assistant(f"Case {i} done: {text(12, i)}"))
        messages.append(user(f"Now look at case {i + 1}, please."))
    return messages


class FixedSummariser:
    """A summariser test double: always returns the same short body, and remembers its requests."""

    def __init__(self, body: str = "## Active Task\nContinue with the latest request.\n\n## Completed Actions\n1. ran tests"):
        self.body = body
        self.requests = []

    def summarise(self, request):
        self.requests.append(request)
        return SummaryOutcome(body=self.body)


class FailingSummariser:
    """Raises, like a summariser whose provider is unreachable and has no fallback."""

    def __init__(self):
        self.calls = 0

    def summarise(self, request):
        self.calls += 1
        raise ConnectionError("connection refused")


# ---------------------------------------------------------------- strategies
# Strategies are built once and drawn from plain functions: building strategy
# objects inside a composite costs more than the drawing itself.

_SALT = st.integers(0, 50)
_OUTPUT_KIND = st.sampled_from(["small", "medium", "huge", "repeat", "json"])
_ARGS_KIND = st.sampled_from(["small", "small", "long", "broken"])
_TOOL = st.sampled_from(TOOLS)
_SIZES = {name: st.integers(lo, hi) for name, (lo, hi) in {
    "small": (1, 20), "medium": (40, 400), "huge": (800, 3000), "json": (30, 200), "long": (100, 400),
    "command": (1, 8), "user": (2, 60), "system": (5, 200), "thought": (0, 30), "reply": (1, 80),
    "turns": (1, 8), "steps": (0, 4), "calls": (1, 3), "die": (0, 8), "exit": (0, 2)}.items()}


def _tool_output(draw, previous: list[str]) -> str:
    kind = draw(_OUTPUT_KIND)
    if kind == "repeat" and previous:
        return previous[draw(st.integers(0, len(previous) - 1))]
    if kind == "json":
        return json.dumps({"exit_code": draw(_SIZES["exit"]), "output": text(draw(_SIZES["json"]), draw(_SALT))})
    return text(draw(_SIZES["medium" if kind == "repeat" else kind]), draw(_SALT))


def _tool_arguments(draw):
    kind = draw(_ARGS_KIND)
    if kind == "broken":
        return "{not json"
    if kind == "long":
        return {"path": "src/app.py", "content": text(draw(_SIZES["long"]), draw(_SALT))}
    return {"command": text(draw(_SIZES["command"]), draw(_SALT)), "path": "src/app.py"}


def _user_message(draw, index: int) -> dict:
    words = text(draw(_SIZES["user"]), index)
    if draw(_SIZES["die"]) == 0:
        return user([{"type": "text", "text": f"Request {index}: {words}"},
                     {"type": "image_url", "image_url": {"url": IMAGE_URL}}])
    return user(f"Request {index}: {words}")


@st.composite
def conversations(draw, max_turns: int = 8) -> list[dict]:
    """A valid conversation: every tool call answered by one result right after its group."""
    messages: list[dict] = []
    if draw(_SIZES["die"]) < 7:
        messages.append(system(f"You are an agent. {text(draw(_SIZES['system']))}"))
    outputs: list[str] = []
    call_number = 0
    for turn in range(min(draw(_SIZES["turns"]), max_turns)):
        messages.append(_user_message(draw, turn))
        if draw(_SIZES["die"]) == 0:
            messages.append(_user_message(draw, turn + 100))
        for _ in range(draw(_SIZES["steps"])):
            calls = []
            results = []
            for _ in range(draw(_SIZES["calls"])):
                call_id = f"call_{call_number}"
                call_number += 1
                calls.append(call(call_id, draw(_TOOL), _tool_arguments(draw)))
                output = _tool_output(draw, outputs)
                outputs.append(output)
                results.append(tool(call_id, output))
            thought = text(draw(_SIZES["thought"]), call_number)
            messages.append(assistant(thought, calls))
            messages += results
        if draw(_SIZES["die"]) > 1:
            messages.append(assistant(f"Done with request {turn}: {text(draw(_SIZES['reply']), turn)}"))
            if draw(_SIZES["die"]) == 0:
                messages.append(assistant("One more note: " + text(5, turn)))
    return messages


@st.composite
def conversations_with_orphans(draw) -> list[dict]:
    """A conversation with one tool result that answers no call."""
    messages = draw(conversations(max_turns=4))
    position = draw(st.integers(0, len(messages)))
    return messages[:position] + [tool("ghost_call", "stray output")] + messages[position:]


# ---------------------------------------------------------------- the generators themselves


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_generated_conversations_are_valid(messages):
    validate_messages(messages)
    assert any(m["role"] == "user" for m in messages)


def test_agent_session_is_valid():
    messages = agent_session()
    validate_messages(messages)
    assert messages[1]["content"].startswith("Fix the failing login test")
