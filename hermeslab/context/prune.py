"""Phase 1: shrink old tool traffic without a model call.

Tool outputs are most of an agent's context and are rarely needed verbatim
once the agent has acted on them. Three passes, each recorded per message:

1. ``dedupe`` — an output repeated later (same file read twice) is replaced by a
   back-reference naming the newer call; nothing is lost.
2. ``one_line`` / ``image_placeholder`` — old outputs become one line saying what
   ran and how big the result was; images in tool results become a placeholder.
3. ``shrink_args`` — long tool-call arguments (whole files passed to write_file)
   keep their JSON shape, with every long string value cut.

Passes 2 and 3 touch only messages before the prune boundary. Scope of the
protected head (``compression.prune_head``): Hermes lets all passes rewrite the
head, and deduplication rewrite anything; the seed never rewrites the head,
which holds the task statement and is the prefix a provider's prompt cache
reuses. Deduplication still applies after the head because it is lossless:
the newer copy stays in the context.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, NamedTuple, Sequence

from hermeslab.core.config import CompressionConfig
from hermeslab.core.rough import is_image_part, known_newlines

from .hermes_texts import one_liner as hermes_one_liner
from .hermes_texts import texts_for

DUPLICATE_MARKER = "[duplicate tool output]"
IMAGE_PLACEHOLDER = "[image removed from an old tool result to save context]"
TRUNCATION_MARKER = "...[truncated]"
_ONE_LINE_MAX_CHARS = 180


class PruneDecision(NamedTuple):
    """What one pass did to one message (a tuple: a prune makes dozens, and a tuple is the cheapest record)."""

    index: int
    #: ``dedupe``, ``one_line``, ``image_placeholder`` or ``shrink_args``.
    action: str
    detail: str

    def as_record(self) -> dict:
        return {"index": self.index, "action": self.action, "detail": self.detail}


def compute_prune_boundary(messages: Sequence[dict], *, tail_token_budget: int, protect_last_n: int,
                           estimate: Callable[[dict], int]) -> int:
    """Index before which old tool traffic may be pruned.

    Walks back from the end until the protected messages pass ``tail_token_budget``
    (the message that crosses it stays protected), but always protects at least
    ``protect_last_n`` messages: recent outputs are what the agent is working with.
    """
    total = len(messages)
    floor = min(protect_last_n, total)
    used = 0
    protected = 0
    for index in range(total - 1, -1, -1):
        used += estimate(messages[index])
        protected += 1
        if used > tail_token_budget and protected >= floor:
            break
    return max(0, total - max(protected, protect_last_n))


# ---------------------------------------------------------------- one-line descriptions


def _single_line(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    # Already one line of single spaces (printable excludes every other white space): nothing to collapse.
    if not (text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " "):
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _size(result: str) -> str:
    return f"{len(result):,} chars"


def _line_count(text: str) -> int:
    if not text:
        return 0
    newlines = known_newlines(text)  # an output the rough list estimate has just read through
    return (text.count("\n") if newlines is None else newlines) + 1


#: (literal start, pattern) of each way an output states its exit code; the form that usually opens an
#: output (mini-swe-agent's) first, so the other is looked for only before it.
_EXIT_CODES = (
    ("<returncode>", re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")),
    ('"exit_code"', re.compile(r'"exit_code"\s*:\s*(-?\d+)')),
)


def _exit_code(result: str) -> str | None:
    """The first exit code an output states.

    Each form is located with ``str.find`` before the pattern is tried there:
    outputs run to thousands of characters, and a plain regex search over
    them dominated the whole prune phase. Once one form is found, the next
    is searched for only where it could start earlier.
    """
    found: tuple[int, str] | None = None
    for literal, pattern in _EXIT_CODES:
        # A match starting before ``found`` ends before found + len(literal) - 1.
        end = len(result) if found is None else found[0] + len(literal) - 1
        at = result.find(literal, 0, end)
        while at >= 0:
            match = pattern.match(result, at)
            if match:
                found = (at, match.group(1))
                break
            at = result.find(literal, at + 1, end)
    return found[1] if found else None


def _describe_command(name: str, args: dict, result: str) -> str:
    code = _exit_code(result)
    status = f"exit {code}, " if code is not None else ""
    return f"[{name}] ran {_single_line(args.get('command', ''), 80)} -> {status}{_line_count(result)} lines"


def _describe_read_file(name: str, args: dict, result: str) -> str:
    start = args.get("offset", args.get("start_line", args.get("line", 1)))
    return f"[{name}] read {_single_line(args.get('path', '?'), 80)} from line {start} ({_size(result)})"


def _describe_write_file(name: str, args: dict, result: str) -> str:
    content = args.get("content", "")
    lines = _line_count(content) if isinstance(content, str) else 0
    return f"[{name}] wrote {_single_line(args.get('path', '?'), 80)} ({lines} lines)"


def _describe_search(name: str, args: dict, result: str) -> str:
    total: Any = "?"
    if result.lstrip().startswith("{"):  # only an object can carry a count; failed parses are costly
        try:
            parsed = json.loads(result)
            total = parsed.get("total_count", "?") if isinstance(parsed, dict) else "?"
        except ValueError:
            pass
    target = _single_line(args.get("target", "content"), 20)
    pattern = _single_line(args.get("pattern", ""), 40)
    path = _single_line(args.get("path", "."), 40)
    return f"[{name}] {target} search for '{pattern}' in {path} -> {total} matches"


def _describe_patch(name: str, args: dict, result: str) -> str:
    return f"[{name}] {args.get('mode', 'patch')} {_single_line(args.get('path', '?'), 80)} ({_size(result)})"


def _describe_browser(name: str, args: dict, result: str) -> str:
    where = args.get("url") or args.get("ref")
    target = f" {_single_line(where, 80)}" if where else ""
    return f"[{name}]{target} ({_size(result)})"


def _describe_web_search(name: str, args: dict, result: str) -> str:
    return f"[{name}] query '{_single_line(args.get('query', ''), 80)}' ({_size(result)})"


def _describe_web_extract(name: str, args: dict, result: str) -> str:
    urls = args.get("urls") or ([args["url"]] if args.get("url") else [])
    if not isinstance(urls, list):
        urls = [urls]
    first = urls[0] if urls else ""
    if isinstance(first, dict):
        first = first.get("url", "")
    more = f" +{len(urls) - 1} more" if len(urls) > 1 else ""
    return f"[{name}] {_single_line(first, 80)}{more} ({_size(result)})"


def _describe_delegate(name: str, args: dict, result: str) -> str:
    return f"[{name}] goal '{_single_line(args.get('goal', ''), 60)}' ({_size(result)})"


def _describe_code(name: str, args: dict, result: str) -> str:
    return f"[{name}] ran code '{_single_line(args.get('code', ''), 60)}' -> {_line_count(result)} lines"


def _describe_named(name: str, args: dict, result: str) -> str:
    return f"[{name}] {_single_line(args.get('name', ''), 60)} ({_size(result)})"


def _describe_vision(name: str, args: dict, result: str) -> str:
    return f"[{name}] asked '{_single_line(args.get('question', ''), 50)}' ({_size(result)})"


def _describe_memory(name: str, args: dict, result: str) -> str:
    return f"[{name}] {args.get('action', 'update')} on {args.get('target', 'memory')}"


def _describe_process(name: str, args: dict, result: str) -> str:
    session = args.get("session_id") or args.get("session") or ""
    suffix = f" {_single_line(session, 40)}" if session else ""
    return f"[{name}] {args.get('action', 'run')}{suffix} ({_size(result)})"


def _describe_generic(name: str, args: dict, result: str) -> str:
    shown = " ".join(f"{key}={_single_line(value, 40)}" for key, value in list(args.items())[:2])
    return f"[{name}] {shown} ({_size(result)} result)" if shown else f"[{name}] ({_size(result)} result)"


_DESCRIBERS: dict[str, Callable[[str, dict, str], str]] = {
    "terminal": _describe_command,
    "read_file": _describe_read_file,
    "write_file": _describe_write_file,
    "search_files": _describe_search,
    "patch": _describe_patch,
    "web_search": _describe_web_search,
    "web_extract": _describe_web_extract,
    "delegate_task": _describe_delegate,
    "execute_code": _describe_code,
    "skill_view": _describe_named,
    "skills_list": _describe_named,
    "skill_manage": _describe_named,
    "vision_analyze": _describe_vision,
    "memory": _describe_memory,
    "todo": lambda name, args, result: f"[{name}] updated the task list",
    "clarify": lambda name, args, result: f"[{name}] asked the user a question",
    "text_to_speech": lambda name, args, result: f"[{name}] spoke text ({_size(result)})",
    "cronjob": lambda name, args, result: f"[{name}] {args.get('action', 'update')} ({_size(result)})",
    "process": _describe_process,
}


def one_line_description(tool_name: str, arguments: dict, result: str) -> str:
    """One line saying which tool ran on what, and how big its result was; never raises."""
    name = _single_line(tool_name, 60) if isinstance(tool_name, str) and tool_name.strip() else "tool"
    try:
        args = arguments if isinstance(arguments, dict) else {}
        describe = _DESCRIBERS.get(name)
        if describe is None and name.startswith("browser_"):
            describe = _describe_browser
        line = (describe or _describe_generic)(name, args, result)
        return _single_line(line, _ONE_LINE_MAX_CHARS)
    except Exception:
        size = len(result) if isinstance(result, str) else 0
        return f"[{name}] ({size:,} chars result)"


# ---------------------------------------------------------------- passes


_MARKERS = (DUPLICATE_MARKER, IMAGE_PLACEHOLDER)


def _call_index(messages: Sequence[dict]) -> dict[str, tuple[str, Any]]:
    """tool_call_id -> (tool name, raw arguments) for every call in the list.

    Arguments are parsed only for the results that get described (``_arguments``):
    parsing every call would read whole files passed to write_file for nothing.
    """
    calls: dict[str, tuple[str, Any]] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            calls[call.get("id", "")] = (function.get("name", ""), function.get("arguments"))
    return calls


_NOT_JSON = object()
#: The decoder's own scanner: one JSON value at an index, without ``json.loads``'s Python layers.
_SCAN_VALUE = json.JSONDecoder().scan_once


def _json_value(raw: str) -> Any:
    """``json.loads(raw)``, or ``_NOT_JSON``.

    Arguments are nearly always exactly one value with nothing around it; the
    scanner reads those directly (a prune parses dozens). Anything else —
    whitespace around the value, extra data, an error — goes through
    ``json.loads``, so the outcome is always the same as its.
    """
    try:
        value, end = _SCAN_VALUE(raw, 0)
        if end == len(raw):
            return value
    except (StopIteration, ValueError):
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return _NOT_JSON


def _parsed(raw: str, memo: dict[str, Any]) -> Any:
    """``raw`` as JSON (``_NOT_JSON`` when it is not), parsed once per prune.

    Describing a result and shrinking its call read the same arguments, which
    for write_file hold a whole file.
    """
    if raw not in memo:
        memo[raw] = _json_value(raw)
    return memo[raw]


def _arguments(raw: Any, memo: dict[str, Any]) -> dict:
    """The arguments as an object; anything else (missing, not JSON, not an object) reads as none."""
    if not isinstance(raw, str) or not raw.strip():
        return {}
    value = _parsed(raw, memo)
    return value if isinstance(value, dict) else {}


def _shrink_leaves(value: Any, limit: int) -> tuple[Any, int]:
    """A copy of a JSON value with every string longer than ``limit`` cut; returns (copy, cuts)."""
    if isinstance(value, str):
        if len(value) > limit:
            return value[:limit] + TRUNCATION_MARKER, 1
        return value, 0
    if isinstance(value, list):
        items = [_shrink_leaves(item, limit) for item in value]
        return [item for item, _ in items], sum(cuts for _, cuts in items)
    if isinstance(value, dict):
        entries = {key: _shrink_leaves(item, limit) for key, item in value.items()}
        return {key: item for key, (item, _) in entries.items()}, sum(cuts for _, cuts in entries.values())
    return value, 0


def _back_reference(later: dict, calls: dict, cfg: CompressionConfig) -> str:
    texts = texts_for(cfg)
    if texts is not None:
        return texts.duplicate_marker
    if not cfg.name_duplicate_source:  # as long as Hermes's, and as many tokens (cl100k_base, o200k_base)
        return f"{DUPLICATE_MARKER} same as the result of the later call"
    call_id = str(later.get("tool_call_id", ""))[:40]
    name = calls.get(later.get("tool_call_id", ""), ("tool", None))[0] or "tool"
    return f"{DUPLICATE_MARKER} identical to the later result of {name} call {call_id}"


def _dedupe(out: list[dict], calls: dict, floor: int, cfg: CompressionConfig) -> list[PruneDecision]:
    decisions = []
    newest: dict[str, int] = {}
    for index in range(len(out) - 1, -1, -1):
        message = out[index]
        content = message.get("content")
        if message.get("role") != "tool" or not isinstance(content, str) or len(content) < cfg.prune_min_chars:
            continue
        # Keyed by the text itself (Hermes keys by an MD5 prefix: same decisions, without encoding every output).
        if content not in newest:
            newest[content] = index
            continue
        if index < floor:
            continue
        out[index] = {**message, "content": _back_reference(out[newest[content]], calls, cfg)}
        decisions.append(PruneDecision(index, "dedupe", f"{len(content):,} chars, same as message {newest[content]}"))
    return decisions


def _describe_old_results(out: list[dict], calls: dict, floor: int, boundary: int, cfg: CompressionConfig,
                          memo: dict[str, Any]) -> list[PruneDecision]:
    decisions = []
    min_chars = cfg.prune_min_chars
    texts = texts_for(cfg)
    markers = _MARKERS if texts is None else (texts.duplicate_marker, texts.screenshot_part)
    placeholder = IMAGE_PLACEHOLDER if texts is None else texts.screenshot_part
    for index in range(floor, boundary):
        message = out[index]
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, str):
            if len(content) <= min_chars or content.startswith(markers):
                continue
            call = calls.get(message.get("tool_call_id", ""))
            if texts is not None:  # Hermes's rules and wording; a result without its call is an unknown tool's
                name, raw = call if call is not None else ("unknown", "")
                line = hermes_one_liner(texts, name, raw, content)
            else:
                name, raw = call if call is not None else (message.get("name", ""), None)
                line = one_line_description(name, _arguments(raw, memo), content)
            out[index] = {**message, "content": line}
            decisions.append(PruneDecision(index, "one_line", f"{len(content):,} chars -> {line}"))
        elif isinstance(content, list) and any(is_image_part(p) for p in content):
            parts = [p if not is_image_part(p) else {"type": "text", "text": placeholder} for p in content]
            images = sum(1 for p in content if is_image_part(p))
            out[index] = {**message, "content": parts}
            decisions.append(PruneDecision(index, "image_placeholder", f"{images} image part(s)"))
    return decisions


def _shrunk_arguments(arguments: str, cfg: CompressionConfig, memo: dict[str, Any]) -> tuple[str, int] | None:
    """(new arguments, values cut) for one long argument string, or None to leave it alone."""
    parsed = _parsed(arguments, memo)
    if parsed is _NOT_JSON:
        return None  # no safe way to shorten it
    parsed, cuts = _shrink_leaves(parsed, cfg.shrink_leaf_chars)
    if not cuts and not cfg.rewrite_unshrunk_args:
        return None
    text = json.dumps(parsed, ensure_ascii=False)
    return (text, cuts) if text != arguments else None


def _shrink_arguments(out: list[dict], floor: int, boundary: int, cfg: CompressionConfig,
                      memo: dict[str, Any]) -> list[PruneDecision]:
    decisions = []
    for index in range(floor, boundary):
        message = out[index]
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        new_calls = []
        notes = []
        for call in message["tool_calls"]:
            arguments = (call.get("function") or {}).get("arguments")
            shrunk = None
            if isinstance(arguments, str) and len(arguments) > cfg.shrink_args_over:
                shrunk = _shrunk_arguments(arguments, cfg, memo)
            if shrunk is not None:
                text, cuts = shrunk
                call = {**call, "function": {**call["function"], "arguments": text}}
                notes.append(f"{call.get('id', '')}: {cuts} value(s) cut, {len(arguments):,} -> {len(text):,} chars")
            new_calls.append(call)
        if notes:
            out[index] = {**message, "tool_calls": new_calls}
            decisions.append(PruneDecision(index, "shrink_args", "; ".join(notes)))
    return decisions


def prune_messages(messages: Sequence[dict], *, prune_boundary: int, cfg: CompressionConfig,
                   head_end: int = 0) -> tuple[list[dict], list[PruneDecision]]:
    """Run the three passes; ``head_end`` leading messages are left untouched.

    The input is never modified: a changed message is a new dict, an unchanged
    one is the input's own (messages are never edited in place, so sharing it
    is safe, and its measured size stays valid). Decisions are sorted by index.
    """
    out = list(messages)
    boundary = max(0, min(prune_boundary, len(out)))
    floor = max(0, head_end)
    calls = _call_index(messages)
    decisions = _dedupe(out, calls, floor, cfg)
    memo: dict[str, Any] = {}
    decisions += _describe_old_results(out, calls, floor, boundary, cfg, memo)
    decisions += _shrink_arguments(out, floor, boundary, cfg, memo)
    decisions.sort(key=lambda d: d.index)
    return out, decisions
