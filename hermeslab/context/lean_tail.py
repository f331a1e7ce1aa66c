"""Hermes's lean tail: a verbatim tail sized from the window alone, and old tool output in it cut to a stub.

The ratio tail keeps a share of the trigger verbatim, which on a large window
is a hundred thousand tokens or more. Lean mode keeps 2.5% of the window,
never less than 10,000 and never more than 25,000 tokens; both modes then cap
the tail at a share of the window (Hermes: 20%), because on a small window the
10,000-token floor alone would be most of the request. Inside that tail, tool
results older than the newest six rounds of tool calls that are at least
1,500 characters long become a one-line stub saying how long they were and
that the session's history still holds them.

Numbers are Hermes's (``docs/presets.md``); the stub's wording is hermeslab's own.
"""

from __future__ import annotations

from typing import Any, Sequence

from hermeslab.core.messages import tool_calls_of

#: Share of the window a lean tail keeps ...
LEAN_TAIL_SHARE = 0.025
#: ... clamped to these many tokens.
LEAN_TAIL_FLOOR_TOKENS = 10_000
LEAN_TAIL_CAP_TOKENS = 25_000
#: Tool rounds, newest first, whose results a lean tail keeps whole.
KEEP_TOOL_ROUNDS = 6
#: Shorter tool results stay whole wherever they are.
DEMOTE_MIN_CHARS = 1_500
STUB_MARK = "output cut at compaction"


def lean_tail_tokens(context_length: int) -> int:
    """2.5% of the window, clamped to 10,000..25,000 tokens."""
    return max(LEAN_TAIL_FLOOR_TOKENS, min(LEAN_TAIL_CAP_TOKENS, int(context_length * LEAN_TAIL_SHARE)))


def capped_tail_tokens(tail_tokens: int, context_length: int, max_context_share: float | None) -> int:
    """``tail_tokens``, at most ``max_context_share`` of the window when a share is given, and at least 1 then."""
    if max_context_share is None:
        return tail_tokens
    return max(1, min(tail_tokens, int(context_length * max_context_share)))


def stub_text(tool_name: str, chars: int, *, history_pointer: bool = True) -> str:
    """The line a cut tool result reads; naming ``session_search`` only with ``history_pointer``."""
    pointer = "; session_search finds them" if history_pointer else ""
    return f"[{tool_name or 'tool'} {STUB_MARK}: {chars:,} chars, still in this session's history{pointer}]"


def is_stub(content: str) -> bool:
    """A tool result already reduced to one line (this stub, or pruning's one-line description)."""
    return content.startswith("[") and (STUB_MARK in content or " chars)" in content) and len(content) < 400


def protected_rounds(messages: Sequence[dict[str, Any]], start: int, rounds: int = KEEP_TOOL_ROUNDS) -> set[int]:
    """Indices of the tool results of the newest ``rounds`` rounds at or after ``start``.

    A round is a run of adjacent tool results (the answers to one reply's calls).
    """
    protected: set[int] = set()
    seen = 0
    previous: int | None = None
    for index in range(len(messages) - 1, start - 1, -1):
        if messages[index].get("role") != "tool":
            continue
        if previous is None or previous - index > 1:
            seen += 1
        previous = index
        if seen > rounds:
            break
        protected.add(index)
    return protected


def _tool_names(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in tool_calls_of(message):
            function = call.get("function") or {}
            if call.get("id") and isinstance(function.get("name"), str):
                names[call["id"]] = function["name"]
    return names


def demote_stale_tail_tools(messages: Sequence[dict[str, Any]], tail_start: int,
                            rounds: int = KEEP_TOOL_ROUNDS, min_chars: int = DEMOTE_MIN_CHARS, *,
                            history_pointer: bool = True) -> tuple[list[dict[str, Any]], list[int]]:
    """``messages`` with every long tool result at or after ``tail_start`` outside the newest ``rounds`` rounds
    cut to a stub, and the indices cut. Messages before ``tail_start`` and all others are the same objects."""
    keep = protected_rounds(messages, tail_start, rounds)
    names = _tool_names(messages)
    out = list(messages)
    cut: list[int] = []
    for index in range(max(tail_start, 0), len(messages)):
        message = messages[index]
        content = message.get("content")
        if message.get("role") != "tool" or index in keep or not isinstance(content, str):
            continue
        if len(content) < min_chars or is_stub(content):
            continue
        name = names.get(message.get("tool_call_id") or "", message.get("name") or "")
        out[index] = {**message, "content": stub_text(name, len(content), history_pointer=history_pointer)}
        cut.append(index)
    return out, cut
