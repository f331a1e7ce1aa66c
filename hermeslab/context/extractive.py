"""The deterministic summariser: fills the handoff template without a model call.

It is the offline default and the fallback when a summary call fails, so it
must be honest (only what the span shows), reproducible (same span, same
text) and thrifty with facts: ids, paths and numbers are what an agent cannot
reconstruct, so ``Critical Context`` carries an entity list ranked by how
often and how recently each entity appeared. Everything it reads is redacted
first, and the result is fitted to the token budget by dropping whole lines,
lowest priority first.

A request that names the messages staying beside the summary (``kept``, sent
under ``summary_fact_context``) gets the fact-aware summary: facts read from
the span before pruning cut it, none that the kept messages (or a longer
fact) already show, those an earlier summary carried weighed as key, eight to
a line so the budget holds more of them, and a long focus shown by its first
line. Without it the summary is the plain one (``hermes-0.19`` sends none).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hermeslab.core.messages import parse_tool_arguments, text_of, tool_calls_of
from hermeslab.core.tokens import count_text

from .entities import extract_entities, uncovered_entities
from .redact import redact, redact_message
from .template import EMPTY_SECTION, HEADINGS, parse_sections
from .turns import is_real_user_message
from .types import SummaryOutcome, SummaryRequest

#: Longest user ask quoted in the Active Task section.
ACTIVE_TASK_MAX_CHARS = 1_400
_LINE_MAX_CHARS = 300
_MAX_BLOCKED = 5
_MAX_FILES = 12
#: Most entities Critical Context offers; the budget fit decides how many stay.
_MAX_ENTITIES = 240
#: The plain summary's cap, one entity per line.
_MAX_PLAIN_ENTITIES = 80
#: Entities per Critical Context line: one per line would spend a line break and a dash on each.
_ENTITIES_PER_LINE = 8
_MAX_NOTES = 5

# ---------------------------------------------------------------- reading a span

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning|reflection)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_THINK = re.compile(r"<(?:think|thinking|reasoning|reflection)>.*\Z", re.DOTALL | re.IGNORECASE)


def strip_think(text: str) -> str:
    """Assistant text without inline reasoning blocks; an unclosed block runs to the end."""
    if "<" not in text:  # no block can open: skip both scans
        return text.strip()
    return _UNCLOSED_THINK.sub("", _THINK_BLOCK.sub("", text)).strip()


def user_asks(span: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(index, text) of every real user message in ``span`` that has text to quote, oldest first.

    "Real" is the pipeline's own test (not a summary, not ``*_synthetic``
    scaffolding), so the Active Task and the kept tail agree on who asked what.
    """
    asks = []
    for index, message in enumerate(span):
        if is_real_user_message(message):
            text = text_of(message)
            if text.strip():
                asks.append((index, text))
    return asks


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _one_line(text: str, limit: int = _LINE_MAX_CHARS) -> str:
    return clip(" ".join(text.split()), limit)


_ERROR_LINE = re.compile(
    r"(?i)\b(?:error|exception|traceback|failed|failure|fatal|denied|not found|no such file|timed out|cannot|could not)\b"
)
_EXCEPTION_LINE = re.compile(r"(?m)^(?:[A-Za-z_][\w.]*(?:Error|Exception)\b|Traceback \(most recent call last\)|(?:error|fatal|ERROR|FATAL)\b:?)")
_NONZERO_EXIT = re.compile(r"<returncode>\s*[1-9]\d*\s*</returncode>|\bexit(?:ed with)? (?:code|status) [1-9]\d*|\"exit_code\":\s*[1-9]")
_TEST_STATUS = re.compile(r"(?m)^.*(?:\b\d+ (?:passed|failed|errors?)\b|\bRan \d+ tests?\b|^(?:OK|FAILED)\b).*$")
_CD_COMMAND = re.compile(r"(?:^|&&|;|\n)\s*cd\s+([^\s;&|]+)")
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file", "output_path", "notebook_path")
_DIR_KEYS = ("cwd", "workdir", "working_dir", "directory")
_ARG_PREFERENCE = ("command", "cmd", "path", "file_path", "filename", "query", "url", "pattern", "code", "id")
_DECISION = re.compile(
    r"(?i)\b(?:decided|decide to|chose|instead of|will use|going with|the fix is|the cause is|root cause|because)\b"
)
_CONSTRAINT = re.compile(
    r"(?i)\b(?:must|mustn't|should not|shouldn't|don't|do not|never|always|only|avoid|prefer|without|make sure|no more than|at most|at least)\b"
)
_TODO = re.compile(
    r"(?im)^\s*(?:[-*]\s*\[ \]\s*|TODO\b:?\s*|next(?: steps?)?:\s*|remaining:\s*)(.+)$|\b(?:still need to|next,? I(?:'ll| will))\s+([^.\n]+)"
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_FILE_LIKE = re.compile(r"^(?:~|\.{1,2})?/[^@\s]*$|^[\w.-]+/[^@\s]*$|^[\w.-]+\.[a-z][a-z0-9]{0,5}$")


def _is_error_result(text: str) -> bool:
    head = text.lstrip()[:200]
    return bool(_NONZERO_EXIT.search(text) or _EXCEPTION_LINE.search(text) or _ERROR_LINE.search(head.split("\n", 1)[0]))


def _error_line(text: str) -> str:
    """The most telling line of a failed result: the last exception line, else the last error-ish line, else the first."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for matcher in (_EXCEPTION_LINE.match, _ERROR_LINE.search):
        for line in reversed(lines):
            if matcher(line):
                return line
    return lines[0] if lines else ""


_MARKUP_ONLY = re.compile(r"^</?[\w-]+>(?:[^<]*</[\w-]+>)?$")


def _first_line(text: str) -> str:
    """The first line with content, passing over bare markup such as ``<output>``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if not _MARKUP_ONLY.match(line):
            return line
    return lines[0] if lines else ""


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    result: str | None = None


@dataclass
class _SpanFacts:
    """What the span shows, read once."""

    length: int = 0
    asks: list[tuple[int, str]] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)  # assistant text, think blocks removed
    calls: list[_Call] = field(default_factory=list)
    #: (message index, entities, weight): ids the agent passed to tools weigh double.
    entity_texts: list[tuple[int, list[str], int]] = field(default_factory=list)


def _json_leaves(value: Any) -> list[str]:
    """String and significant numeric leaves of parsed JSON, without the keys."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _json_leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _json_leaves(item)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def _entities_of_data(text: str) -> list[str]:
    """Entities of a tool payload; JSON objects contribute their values, not their key names."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            leaves = _json_leaves(json.loads(stripped))
        except ValueError:
            return extract_entities(text)
        return [entity for leaf in leaves for entity in extract_entities(leaf)]
    return extract_entities(text)


def _read_span(span: list[dict[str, Any]]) -> _SpanFacts:
    facts = _SpanFacts(length=len(span), asks=user_asks(span))
    by_id: dict[str, _Call] = {}
    for index, message in enumerate(span):
        role = message.get("role")
        if role == "assistant":
            note = strip_think(text_of(message))
            if note:
                facts.entity_texts.append((index, extract_entities(note), 1))
                facts.notes.append((index, note))
            for raw in tool_calls_of(message):
                function = raw.get("function") if isinstance(raw, dict) else None
                if not isinstance(function, dict):
                    continue
                arguments_text = function.get("arguments") or ""
                try:
                    arguments: dict[str, Any] | str = parse_tool_arguments(arguments_text)
                except ValueError:
                    arguments = arguments_text
                call = _Call(str(raw.get("id", "")), str(function.get("name") or "tool"), arguments)
                facts.calls.append(call)
                by_id[call.call_id] = call
                payload = json.dumps(arguments, ensure_ascii=False) if isinstance(arguments, dict) else arguments
                facts.entity_texts.append((index, _entities_of_data(payload), 2))
        elif role == "tool":
            result = text_of(message)
            call = by_id.get(str(message.get("tool_call_id", "")))
            if call is not None and call.result is None:
                call.result = result
            facts.entity_texts.append((index, _entities_of_data(result), 1))
        elif is_real_user_message(message):
            facts.entity_texts.append((index, extract_entities(text_of(message)), 1))
    return facts


# ---------------------------------------------------------------- section builders

#: Section contents as (line, priority): a higher priority survives budget trimming longer.
Lines = list[tuple[str, float]]


def _describe_arguments(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return _one_line(arguments, 80)
    keys = [key for key in _ARG_PREFERENCE if key in arguments] + [key for key in arguments if key not in _ARG_PREFERENCE]
    parts = []
    for key in keys[:2]:
        value = arguments[key]
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={_one_line(shown, 60)}")
    return ", ".join(parts)


def _outcome(call: _Call) -> str:
    if call.result is None:
        return "no result recorded"
    if _is_error_result(call.result):
        return "error: " + _one_line(_error_line(call.result), 120)
    first = _one_line(_first_line(call.result), 100)
    return f"ok: {first}" if first else "ok"


def _numbered_lines(section: str) -> tuple[list[str], int]:
    """Lines of a previous section and the number the next item should take."""
    lines = [line for line in section.splitlines() if line.strip() and line.strip() != EMPTY_SECTION]
    numbers = [int(m.group(1)) for line in lines if (m := re.match(r"\s*(\d+)[.)]", line))]
    return lines, (max(numbers) if numbers else len(lines)) + 1


def _completed_actions(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    earlier, next_number = _numbered_lines(previous.get("Completed Actions", ""))
    lines: Lines = [(line, 30 + 10 * (i + 1) / (len(earlier) + 1)) for i, line in enumerate(earlier)]
    total = len(facts.calls)
    for position, call in enumerate(facts.calls):
        text = f"{next_number + position}. {call.name}({_describe_arguments(call.arguments)}) - {_outcome(call)}"
        lines.append((text, 40 + 20 * (position + 1) / total))
    return lines


def _blocked(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    seen: dict[str, None] = {}
    for call in facts.calls:
        if call.result is not None and _is_error_result(call.result):
            line = clip(_error_line(call.result), _LINE_MAX_CHARS)
            seen.pop(line, None)
            seen[line] = None  # most recent occurrence last
    if seen:
        return [(f"- {line}", 70) for line in list(seen)[-_MAX_BLOCKED:]]
    if any(call.result is not None for call in facts.calls):
        return []  # tools ran cleanly since the earlier summary
    return _carried(previous.get("Blocked", ""), 60)


def _carried(section: str, priority: float) -> Lines:
    return [(line, priority) for line in section.splitlines() if line.strip() and line.strip() != EMPTY_SECTION]


def _paths_of(arguments: dict[str, Any] | str, keys: tuple[str, ...]) -> list[str]:
    if not isinstance(arguments, dict):
        return []
    return [str(arguments[key]) for key in keys if isinstance(arguments.get(key), str) and arguments[key].strip()]


def _active_state(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    directory = None
    touched: dict[str, None] = {}
    tests = None
    for call in facts.calls:
        for value in _paths_of(call.arguments, _DIR_KEYS):
            directory = value
        command = call.arguments.get("command") if isinstance(call.arguments, dict) else None
        if isinstance(command, str):
            for match in _CD_COMMAND.finditer(command):
                directory = match.group(1)
        for path in _paths_of(call.arguments, _PATH_KEYS):
            touched.pop(path, None)
            touched[path] = None
        if call.result:
            statuses = _TEST_STATUS.findall(call.result)
            if statuses:
                tests = statuses[-1].strip()
    lines: Lines = []
    if directory:
        lines.append((f"- Working directory: {clip(directory, 200)}", 68))
    if touched:
        lines.append((f"- Last files touched: {', '.join(clip(p, 120) for p in list(touched)[-3:])}", 67))
    if tests:
        lines.append((f"- Last test status: {_one_line(tests, 200)}", 69))
    return lines or _carried(previous.get("Active State", ""), 58)


def _in_progress(facts: _SpanFacts) -> Lines:
    lines: Lines = [
        (f"- {call.name}({_describe_arguments(call.arguments)}) was issued; its result is not in this part", 65)
        for call in facts.calls
        if call.result is None
    ]
    if facts.notes:
        index, note = facts.notes[-1]
        if not facts.asks or index > facts.asks[-1][0]:
            lines.append((f"- Last assistant note: {_one_line(note, 240)}", 62))
    return lines


def _sentences(text: str) -> list[str]:
    stripped = (s.strip().lstrip("-*• ").strip() for s in _SENTENCE_SPLIT.split(text))
    return [s for s in stripped if s]


def _recent_unique(candidates: list[str], limit: int) -> list[str]:
    ordered: dict[str, None] = {}
    for candidate in candidates:
        ordered.pop(candidate, None)
        ordered[candidate] = None
    return list(ordered)[-limit:]


def _key_decisions(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    found = [
        _one_line(s, 200) for _, note in facts.notes for s in _sentences(note) if _DECISION.search(s) and not s.endswith("?")
    ]
    return _carried(previous.get("Key Decisions", ""), 40) + [(f"- {s}", 50) for s in _recent_unique(found, _MAX_NOTES)]


def _answer_after(facts: _SpanFacts, index: int) -> str | None:
    for note_index, note in facts.notes:
        if note_index > index:
            return note
    return None


def _resolved_questions(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    found = []
    for index, ask in facts.asks:
        answer = _answer_after(facts, index)
        if "?" in ask and answer:
            first = _sentences(answer)[0] if _sentences(answer) else answer
            found.append(f"Q: {_one_line(ask, 150)} -> A: {_one_line(first, 200)}")
    return _carried(previous.get("Resolved Questions", ""), 38) + [(f"- {q}", 45) for q in _recent_unique(found, _MAX_NOTES)]


def _pending_asks(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    older = facts.asks[:-1]
    pending = [(f"- {_one_line(ask)}", 80) for index, ask in older if _answer_after(facts, index) is None]
    carried = _carried(previous.get("Pending User Asks", ""), 72) if not facts.notes else []
    return carried + pending


def _constraints(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    found = [_one_line(s, 200) for _, ask in facts.asks for s in _sentences(ask) if _CONSTRAINT.search(s)]
    return _carried(previous.get("Constraints & Preferences", ""), 72) + [(f"- {s}", 75) for s in _recent_unique(found, _MAX_NOTES)]


def _remaining_work(facts: _SpanFacts, previous: dict[str, str]) -> Lines:
    found = []
    for _, text in sorted(facts.notes + facts.asks):
        for match in _TODO.finditer(text):
            found.append(_one_line(match.group(1) or match.group(2), 200))
    carried = _carried(previous.get("Remaining Work", ""), 50)
    return carried + [(f"- {item}", 60) for item in _recent_unique(found, _MAX_NOTES)]


#: Weight of an entity the previous summary carried (fact-aware): it was already judged key once, so
#: it counts as much as an id the agent passed to a tool and is not pushed out by every new mention.
_CARRIED_WEIGHT = 2
#: Bonus of an entity mentioned at the very end of the span (scaled down linearly towards its start).
_RECENCY_WEIGHT = 2


def _rank_entities(facts: _SpanFacts, previous_entities: list[str], span_length: int,
                   carried_weight: int = 1) -> list[str]:
    """Entities ordered by weighted frequency (messages mentioning them) plus a recency bonus."""
    count: dict[str, int] = {}
    last: dict[str, int] = {}
    first: dict[str, int] = {}
    for order, entity in enumerate(previous_entities):
        count[entity] = carried_weight
        last[entity] = -1
        first[entity] = order - len(previous_entities)
    for index, found, weight in facts.entity_texts:
        for entity in dict.fromkeys(found):
            count[entity] = count.get(entity, 0) + weight
            last[entity] = index
            first.setdefault(entity, index)
    scale = max(span_length, 1)
    score = {entity: count[entity] + _RECENCY_WEIGHT * (last[entity] + 1) / scale for entity in count}
    return sorted(count, key=lambda e: (-score[e], -last[e], first[e], e))


def _files_and_entities(facts: _SpanFacts, previous: dict[str, str], previous_summary: str,
                        kept_text: str | None = None) -> tuple[Lines, Lines]:
    """Relevant Files (paths the tools used, most recent first, then paths seen in text) and Critical Context.

    With ``kept_text`` (what stays in the context beside the summary; None
    gives the plain list) Critical Context passes over entities it or the
    listed files show verbatim: they are not lost, so the places go to the
    next ones down the ranking.
    """
    aware = kept_text is not None
    ranked = _rank_entities(facts, extract_entities(previous_summary) if previous_summary else [], facts.length,
                            _CARRIED_WEIGHT if aware else 1)
    used: dict[str, None] = {}
    for call in facts.calls:
        for path in _paths_of(call.arguments, _PATH_KEYS + _DIR_KEYS):
            used.pop(path, None)
            used[path] = None
    mentioned = [e for e in ranked if _FILE_LIKE.match(e) and e not in used]
    files = (list(reversed(used)) + mentioned)[:_MAX_FILES]
    file_lines: Lines = [(f"- {clip(path, 200)}", 55 - 10 * i / _MAX_FILES) for i, path in enumerate(files)]
    earlier = [line for line, _ in _carried(previous.get("Relevant Files", ""), 0) if not any(f in line for f in files)]
    file_lines += [(line, 44) for line in earlier[: _MAX_FILES - len(files)]]
    if kept_text is None:
        listed = set(files)
        plain = [e for e in ranked if e not in listed][:_MAX_PLAIN_ENTITIES]
        return file_lines, [(f"- {clip(e, 200)}", 58 - 23 * i / max(len(plain), 1)) for i, e in enumerate(plain)]
    entities = uncovered_entities(ranked, "\n".join([kept_text, *files]), _MAX_ENTITIES)
    groups = [entities[start:start + _ENTITIES_PER_LINE] for start in range(0, len(entities), _ENTITIES_PER_LINE)]
    entity_lines: Lines = [("- " + "; ".join(clip(e, 200) for e in group), 58 - 23 * i / len(groups))
                           for i, group in enumerate(groups)]
    return file_lines, entity_lines


_FOCUS_SEPARATOR = "\n\nFocus: "


def _active_task(facts: _SpanFacts, previous: dict[str, str], focus: str | None, *, aware: bool) -> str:
    if facts.asks:
        task = clip(facts.asks[-1][1].strip(), ACTIVE_TASK_MAX_CHARS)
    elif previous.get("Active Task", EMPTY_SECTION) != EMPTY_SECTION:
        # The carried task drops its old focus paragraph, or each compression would add one more.
        task = previous["Active Task"].split(_FOCUS_SEPARATOR, 1)[0]
    else:
        task = "No new user request in this part of the conversation."
    if focus and focus.strip():
        shown = redact(focus.strip())
        task += _FOCUS_SEPARATOR + (_focus_quote(shown) if aware else clip(shown, ACTIVE_TASK_MAX_CHARS))
    return task


def _focus_quote(focus: str) -> str:
    """The focus as Active Task shows it: whole, or by its first line when longer than a task quote.

    A cut copy of a long focus cannot be the verbatim text its caller wanted
    (the pipeline quotes a long original task ahead of the summary itself), so
    repeating its first thousand characters would only spend the budget twice.
    """
    if len(focus) <= ACTIVE_TASK_MAX_CHARS:
        return focus
    return clip(focus.split("\n", 1)[0].strip(), _LINE_MAX_CHARS) + " [...]"


# ---------------------------------------------------------------- fitting to the budget


@dataclass(frozen=True)
class _Line:
    section: str
    text: str
    priority: float
    sequence: int


def _render(lines: list[_Line]) -> str:
    grouped: dict[str, list[str]] = {heading: [] for heading in HEADINGS}
    for line in lines:
        grouped[line.section].append(line.text)
    return "\n\n".join(f"## {heading}\n" + ("\n".join(grouped[heading]) or EMPTY_SECTION) for heading in HEADINGS)


def _fit(lines: list[_Line], budget: int) -> str:
    """Drop whole lines, lowest priority (then oldest) first, until the body fits ``budget`` tokens."""
    body = _render(lines)
    tokens = count_text(body)
    if tokens <= budget:
        return body
    fixed = [line for line in lines if line.section == "Active Task"]
    floor = count_text(_render(fixed))
    if floor > budget:
        raise ValueError(
            f"budget_tokens={budget} cannot hold the template headings and the Active Task ({floor} tokens needed)"
        )
    droppable = sorted((line for line in lines if line.section != "Active Task"), key=lambda l: (l.priority, l.sequence))
    kept = set(lines)
    # Estimate with per-line costs first, then confirm with an exact count.
    for line in droppable:
        if tokens <= budget:
            break
        kept.discard(line)
        tokens -= count_text(line.text) + 1
    body = _render([line for line in lines if line in kept])
    remaining = [line for line in droppable if line in kept]
    while count_text(body) > budget and remaining:
        kept.discard(remaining.pop(0))
        body = _render([line for line in lines if line in kept])
    return body


# ---------------------------------------------------------------- the summariser


def validate_request(request: SummaryRequest) -> None:
    """Raise TypeError/ValueError naming the field when a SummaryRequest cannot be summarised."""
    if not isinstance(request.span, list) or not all(isinstance(m, dict) for m in request.span):
        raise TypeError("SummaryRequest.span must be a list of message dicts")
    budget = request.budget_tokens
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"SummaryRequest.budget_tokens must be a positive int, got {budget!r}")
    window = request.window_tokens
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise ValueError(f"SummaryRequest.window_tokens must be a positive int or None, got {window!r}")
    for name in ("originals", "kept"):
        messages = getattr(request, name)
        if messages is not None and (not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages)):
            raise TypeError(f"SummaryRequest.{name} must be a list of message dicts or None")
    for name in ("previous_summary", "focus", "memory_context"):
        value = getattr(request, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"SummaryRequest.{name} must be a str or None, got {type(value).__name__}")


def _readable_span(request: SummaryRequest) -> list[dict[str, Any]]:
    """The span to read: as the conversation showed it when the request carries that, else as handed over.

    Pruning cut old tool results to one line; the whole results are where the
    ids, paths and numbers are, and reading them costs no summary tokens.
    """
    originals = request.originals
    if originals is not None and len(originals) == len(request.span):
        return originals
    return request.span


def _message_text(message: dict[str, Any]) -> str:
    """A message's text and its tool-call arguments: everything in it a fact could be quoted from."""
    arguments = [str((call.get("function") or {}).get("arguments") or "")
                 for call in tool_calls_of(message) if isinstance(call, dict)]
    return "\n".join([text_of(message), *arguments])


class ExtractiveSummariser:
    """Fills the 13-section template from the span alone: no model, no network, same input same output.

    With a previous summary it merges: earlier completed actions, decisions,
    files and entities are kept and numbering continues. Memory context is
    ignored: it is background for a model, not something that happened in the span.
    """

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        validate_request(request)
        facts = _read_span([redact_message(message) for message in _readable_span(request)])
        previous_summary = redact(request.previous_summary) if request.previous_summary else ""
        previous = parse_sections(previous_summary) if previous_summary else {}
        kept_text = None if request.kept is None else "\n".join(_message_text(m) for m in request.kept)
        files, entities = _files_and_entities(facts, previous, previous_summary, kept_text)
        aware = kept_text is not None
        goal = previous.get("Goal", EMPTY_SECTION)
        if goal == EMPTY_SECTION and facts.asks:
            goal = _one_line(facts.asks[0][1], 400)
        sections: dict[str, Lines] = {
            "Active Task": [(_active_task(facts, previous, request.focus, aware=aware), 100)],
            "Goal": [(goal, 90)] if goal and goal != EMPTY_SECTION else [],
            "Constraints & Preferences": _constraints(facts, previous),
            "Completed Actions": _completed_actions(facts, previous),
            "Active State": _active_state(facts, previous),
            "In Progress": _in_progress(facts),
            "Blocked": _blocked(facts, previous),
            "Key Decisions": _key_decisions(facts, previous),
            "Resolved Questions": _resolved_questions(facts, previous),
            "Pending User Asks": _pending_asks(facts, previous),
            "Relevant Files": files,
            "Remaining Work": _remaining_work(facts, previous),
            "Critical Context": entities,
        }
        lines: list[_Line] = []
        for heading in HEADINGS:
            for text, priority in sections[heading]:
                lines.append(_Line(heading, text, priority, len(lines)))
        return SummaryOutcome(body=_fit(lines, request.budget_tokens))
