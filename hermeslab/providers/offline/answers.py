"""Answering from tool results, grounded in what the tools returned."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ...core.messages import (
    text_of,
)
from .offered import ARGUMENT_ALIASES, kind_of_tool

Message = dict[str, Any]

_ERROR_TEXT = re.compile(
    r"^\s*(?:error(?:[:\s]|$)|\[error\]|no such |cannot |can't |could not |failed(?:[:\s]|$)|invalid |unknown |"
    r"not found\b|interrupted before running|permission denied|refus|absolute path |path is empty|command is empty|"
    r"action '\w+' needs|offset \d+ is past|\w*(?:Error|Exception)(?:[:\s]|$))"
    r"|\b(?:is a binary file|is a directory;|is a file, not a directory|escapes the workspace|outside the workspace|"
    r"contains a NUL byte|no todo item with id)",
    re.IGNORECASE,
)
_NUMBERED_LINE = re.compile(r"^\s*\d+\s*[|│]")
_SEARCH_HIT = re.compile(r"^[^\s:][^:\n]*:\d+:")
_EXIT_CODE = re.compile(r"exit code\s*[:=]?\s*(-?\d+)", re.IGNORECASE)


def answer_from_results(results: list[Message], calls: dict[str, dict]) -> str:
    """One short, grounded paragraph per tool result, in the order the results arrived."""
    sections = []
    for result in results:
        call = calls.get(result.get("tool_call_id"), {})
        function = call.get("function") or {}
        name = function.get("name") or "tool"
        try:
            args = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {}
        sections.append(describe_result(name, args if isinstance(args, dict) else {}, text_of(result)))
    return "\n\n".join(sections)


def describe_result(name: str, args: dict[str, Any], text: str) -> str:
    error = _error_text(text)
    if error is not None:
        return f"The `{name}` call failed: {error}"
    describe = _DESCRIBERS.get(kind_of_tool(name))
    answer = describe(args, text) if describe is not None else None
    return answer if answer is not None else _describe_generic(name, text)


def _error_text(text: str) -> str | None:
    """The error a result reports, or None when it reads as a success."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
    first = stripped.splitlines()[0] if stripped else ""
    if _ERROR_TEXT.search(first):
        return _clip_lines(stripped, 5)
    return None


def _arg(args: dict[str, Any], role: str, default: str = "") -> str:
    for name in (role, *ARGUMENT_ALIASES.get(role, ())):
        if isinstance(args.get(name), str) and args[name]:
            return args[name]
    return default


def _clip_lines(text: str, limit: int) -> str:
    lines = text.strip().splitlines()
    shown = "\n".join(lines[:limit])
    return shown if len(lines) <= limit else f"{shown}\n… ({len(lines) - limit} more lines)"


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else (plural or singular + 's')}"


def _fenced(lines: list[str]) -> str:
    return "```\n" + "\n".join(lines) + "\n```"


def _first_int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.IGNORECASE)
    return int(m.group(1)) if m else None


def _describe_read(args: dict[str, Any], text: str) -> str | None:
    path = _arg(args, "path", "the file")
    lines = text.splitlines()
    numbered = [line for line in lines if _NUMBERED_LINE.match(line)]
    if not numbered:
        return f"`{path}` is empty." if re.search(r"\bempty\b", text, re.IGNORECASE) else None
    header = "\n".join(line for line in lines if not _NUMBERED_LINE.match(line))
    total = _first_int(r"of\s+(\d+)\b", header) or _first_int(r"(\d+)\s+lines?\b", header) or len(numbered)
    shown = numbered[:10]
    lead = f"`{path}` has {_count(total, 'line')}."
    lead += f" The first {len(shown)}:" if len(shown) < total else " Here it is:"
    return f"{lead}\n{_fenced(shown)}"


def _describe_list(args: dict[str, Any], text: str) -> str | None:
    path = _arg(args, "path", ".")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and re.search(r"empty directory", lines[0], re.IGNORECASE):
        return f"`{path}` is an empty directory."
    header_count = _first_int(r":\s*(\d+)\s+entr(?:y|ies)\b", lines[0]) if lines else None
    entries = lines[1:] if header_count is not None else lines
    entries = [line for line in entries if not line.startswith("[")]
    total = header_count if header_count is not None else len(entries)
    shown = entries[:30]
    more = f"\n… and {total - len(shown)} more." if total > len(shown) else ""
    return f"`{path}` contains {_count(total, 'entry', 'entries')}:\n" + "\n".join(f"- {e}" for e in shown) + more


def _describe_search(args: dict[str, Any], text: str) -> str | None:
    pattern = _arg(args, "pattern", "the pattern")
    where = f" under `{_arg(args, 'path')}`" if _arg(args, "path") else ""
    hits = [line for line in text.splitlines() if _SEARCH_HIT.match(line)]
    if not hits:
        return f"No matches for `{pattern}`{where}." if re.search(r"\bno match", text, re.IGNORECASE) else None
    total = _first_int(r"(\d+)\s+match", text) or len(hits)
    files = len({hit.split(":", 1)[0] for hit in hits})
    shown = hits[:5]
    lead = f"Found {_count(total, 'match', 'matches')} for `{pattern}`{where}"
    lead += f" ({_count(files, 'file')} among the hits shown)." if total > len(hits) else f" in {_count(files, 'file')}."
    return f"{lead} First hits:\n" + "\n".join(f"- `{hit}`" for hit in shown)


def _describe_terminal(args: dict[str, Any], text: str) -> str | None:
    lines = text.strip().splitlines()
    code = _first_int(_EXIT_CODE.pattern, lines[0]) if lines else None
    if code is None:
        return None
    command = _arg(args, "command", "the command")
    outcome = "succeeded (exit code 0)" if code == 0 else f"failed with exit code {code}"
    if re.search(r"timed out", lines[0], re.IGNORECASE):
        outcome += " after timing out"
    output = [line for line in lines[1:] if line.strip() != "(no output)"]
    if not output:
        return f"The command `{command}` {outcome}. It printed nothing."
    tail = output[-12:]
    label = "Its output:" if len(tail) == len(output) else f"The last {len(tail)} of {len(output)} output lines:"
    return f"The command `{command}` {outcome}. {label}\n{_fenced(tail)}"


def _describe_write(args: dict[str, Any], text: str) -> str | None:
    first = text.strip().splitlines()[0] if text.strip() else "no details"
    return f"Done: `{_arg(args, 'path', 'the file')}` is written ({first})."


def _describe_todo(args: dict[str, Any], text: str) -> str | None:
    action = args.get("action")
    lead = {
        "add": f"Added {_count(len(args.get('items') or []), 'item')} to the todo list.",
        "update": f"Marked todo {args.get('id')} as {args.get('status')}.",
        "clear": "Cleared the todo list.",
    }.get(action if isinstance(action, str) else "", "Here is the todo list.")
    return f"{lead}\n{text.strip()}" if text.strip() else lead


def _describe_memory(args: dict[str, Any], text: str) -> str | None:
    content = _arg(args, "content")
    saved = f"Saved to memory: \u201c{content}\u201d." if content else "The memory tool finished."
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{saved} The memory tool replied: {first}" if first else saved


def _describe_generic(name: str, text: str) -> str:
    if not text.strip():
        return f"`{name}` finished without output."
    return f"`{name}` returned:\n{_fenced(_clip_lines(text, 15).splitlines())}"


_DESCRIBERS: dict[str, Callable[[dict[str, Any], str], str | None]] = {
    "read_file": _describe_read,
    "list_dir": _describe_list,
    "search_files": _describe_search,
    "terminal": _describe_terminal,
    "write_file": _describe_write,
    "todo": _describe_todo,
    "memory": _describe_memory,
}
