"""The probe bank: questions about what a compaction removed, with gold answers cut from the transcript.

No model is involved. For each effective compaction (``context``), the
removed messages are read for five kinds of fact:

* ``recall`` — an identifier, path or number (``context.entities``), an error
  line of a tool result, or a command the assistant ran;
* ``artifact`` — the set of files the removed calls created, changed or
  deleted (file tools by name and path argument; shell commands by
  redirection, ``sed -i``, ``rm``, ``mv``, ``cp``, ``touch``, ``tee``), and,
  for a file whose last change before the compaction is in the region, its
  last state: the first line last written, else the command that changed it;
* ``continuation`` — the user's latest real request when the compaction
  removed it, and the step in progress (the latest tool call) when removed;
* ``decision`` — an assistant sentence stating a choice and its reason
  (``because``, ``since``, ``so that``, ``in order to``, ``to avoid``…): the
  question shows the choice, the gold is the reason;
* ``constraint`` — a user sentence of the never / do not / must / always /
  avoid kind: the question shows its start, the gold is the instruction.
  The transcript cannot say when an instruction lapses, so each is taken as
  still in force.

Every gold is a verbatim span of a removed message that the conversation
itself produced (never of a summary or stub a compactor wrote), so it is in
the uncompacted context; a gold the system prompt or the question already
holds is dropped, so the floor cannot know it. Questions that need a cue quote
the text around the gold with the gold blanked out. The bank is a pure
function of the replay: the same recording and config give the same probes,
and ``bank_hash`` names them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from hermeslab.context.entities import extract_entities
from hermeslab.context.turns import is_real_user_message
from hermeslab.core.cache import bounded_put
from hermeslab.core.messages import tool_calls_of

from ..metrics import message_text
from ..replay import ReplayRun
from .context import EffectiveCompaction, effective_compactions
from .text import UNKNOWN, normal, normal_answer

PROBE_TYPES = ("recall", "artifact", "continuation", "decision", "constraint", "model_written")
#: The types the bank writes from the transcript; ``model_written`` comes from a model (``written``).
BANK_TYPES = PROBE_TYPES[:5]
#: Changes whenever what the bank writes does, so probes of another version never pair with these.
BANK_VERSION = "bank-1"

#: Probes of each type kept per compaction at most (spread over the region in order).
LIMITS = {"recall": 8, "artifact": 4, "continuation": 2, "decision": 3, "constraint": 3}
#: Characters of quoted text shown either side of a blank.
CUE_WIDTH = 90
#: Longest gold kept (a longer fact is cut at a word boundary; the cut text is still verbatim).
MAX_GOLD = 200
#: Shortest gold, in normal form: shorter ones are found by chance in any context.
MIN_GOLD = 4
BLANK = "____"
#: Removed messages read for identifiers (evenly spaced over the region), and the characters read of each.
FACT_MESSAGES = 8
FACT_CHARS = 3_000


@dataclass(frozen=True)
class Probe:
    """One question about a compaction, its gold answer and where the gold came from."""

    probe_id: str
    probe_type: str
    question: str
    #: One answer, or a set of them (the files of an artifact probe) as a tuple.
    gold: str | tuple[str, ...]
    #: Index in the pre-compaction context (``EffectiveCompaction.before``) of the message the gold came from.
    source_message: int
    #: Character span of the gold in that message's ``message_text``.
    source_span: tuple[int, int]
    recording_id: str
    #: 0-based index of the effective compaction within the replay.
    compaction: int

    @property
    def golds(self) -> tuple[str, ...]:
        return self.gold if isinstance(self.gold, tuple) else (self.gold,)


def probe_id(recording_id: str, probe_type: str, question: str, gold: str | tuple[str, ...]) -> str:
    """A probe's content hash: equal probes under two configs get one id, which is what pairs them."""
    payload = json.dumps([BANK_VERSION, recording_id, probe_type, question, gold], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def bank_hash(probes: Sequence[Probe]) -> str:
    """The hash of a bank: its version and its probes' ids, in order."""
    digest = hashlib.sha256(BANK_VERSION.encode())
    for probe in probes:
        digest.update(probe.probe_id.encode())
    return digest.hexdigest()[:20]


def build_bank(run: ReplayRun, record_index: int) -> list[Probe]:
    """The probes of the ``record_index``-th effective compaction of ``run`` (see the module docstring)."""
    compactions = effective_compactions(run)
    if not 0 <= record_index < len(compactions):
        raise IndexError(f"{run.recording_id} has {len(compactions)} effective compaction(s); "
                         f"there is no compaction {record_index}")
    return bank_of(run.recording_id, compactions[record_index])


def run_bank(run: ReplayRun, compactions: Sequence[EffectiveCompaction] | None = None) -> list[Probe]:
    """The probes of every effective compaction of ``run``, a probe asked twice kept at its first compaction."""
    seen: set[str] = set()
    probes: list[Probe] = []
    for compaction in effective_compactions(run) if compactions is None else compactions:
        for probe in bank_of(run.recording_id, compaction):
            if probe.probe_id not in seen:
                seen.add(probe.probe_id)
                probes.append(probe)
    return probes


def bank_of(recording_id: str, compaction: EffectiveCompaction) -> list[Probe]:
    """The probes of one effective compaction, in a fixed order: by type, then by place in the region."""
    if not compaction.removed:
        return []
    reader = _Region(compaction)
    probes: list[Probe] = []
    for probe_type, finder in (("recall", _recall), ("artifact", _artifacts), ("continuation", _continuation),
                               ("decision", _decisions), ("constraint", _constraints)):
        found: list[Probe] = []
        seen: set[Any] = set()
        for question, gold, source, span in finder(reader):
            key = gold if isinstance(gold, tuple) else normal_answer(gold)
            if key in seen or not reader.fair(question, gold):
                continue
            seen.add(key)
            found.append(Probe(probe_id(recording_id, probe_type, question, gold), probe_type, question, gold,
                               source, span, recording_id, compaction.index))
        probes.extend(_spread(found, LIMITS[probe_type]))
    return probes


def _spread(found: list[Any], limit: int) -> list[Any]:
    """At most ``limit`` of ``found``, evenly spaced over it (first and last included)."""
    if len(found) <= limit:
        return found
    if limit == 1:
        return found[:1]
    return [found[round(k * (len(found) - 1) / (limit - 1))] for k in range(limit)]


# ---------------------------------------------------------------- the region


Candidate = tuple[str, "str | tuple[str, ...]", int, tuple[int, int]]


class _Region:
    """The removed messages of one compaction, their texts, and the texts a probe must not give away."""

    def __init__(self, compaction: EffectiveCompaction):
        self.compaction = compaction
        self.before = compaction.before
        self.removed = compaction.removed
        self.texts = {i: message_text(self.before[i]) for i in self.removed}
        history = compaction.uncompacted
        system = history[0] if history and history[0].get("role") == "system" else None
        self.system = normal(message_text(system)) if system is not None else ""
        self.results = {m.get("tool_call_id"): message_text(m) for m in self.before if m.get("role") == "tool"}

    def fair(self, question: str, gold: str | tuple[str, ...]) -> bool:
        """A gold long enough to mean something, absent from the question and the system prompt."""
        asked = normal(question)
        return all(self.fair_gold(item) and normal_answer(item) not in asked
                   for item in (gold if isinstance(gold, tuple) else (gold,)))

    def fair_gold(self, gold: str) -> bool:
        """A gold long enough to mean something that the system prompt does not hold."""
        key = normal_answer(gold)
        return len(key) >= MIN_GOLD and key != UNKNOWN and key not in self.system

    def cloze(self, index: int, start: int, end: int) -> str:
        """The text around ``[start, end)`` of a removed message, the gold (wherever it recurs) blanked."""
        text = self.texts[index]
        left = text[max(0, start - CUE_WIDTH):start]
        right = text[end:end + CUE_WIDTH]
        if start > CUE_WIDTH and " " in left:
            left = left.split(" ", 1)[1]
        if end + CUE_WIDTH < len(text) and " " in right:
            right = right.rsplit(" ", 1)[0]
        return _masked(_squash(left) + BLANK + _squash(right), _squash(text[start:end]))

    def tool_calls(self) -> Iterator[tuple[int, dict[str, Any], str, dict[str, Any]]]:
        """(message index, call, tool name, parsed arguments) of every removed assistant tool call."""
        for index in self.removed:
            message = self.before[index]
            if message.get("role") != "assistant":
                continue
            for call in tool_calls_of(message):
                function = call.get("function") or {}
                yield index, call, str(function.get("name") or ""), _arguments(function.get("arguments"))

    def span(self, index: int, value: str) -> tuple[int, int] | None:
        """Where ``value`` first appears verbatim in removed message ``index``."""
        at = self.texts[index].find(value)
        return None if at < 0 or not value else (at, at + len(value))


def _masked(text: str, gold: str) -> str:
    """``text`` with every occurrence of ``gold`` (case folded) blanked out."""
    if not gold:
        return text
    folded, key = text.casefold(), gold.casefold()
    if len(folded) != len(text) or key not in folded:  # folding changed lengths: positions would not line up
        return re.sub(re.escape(gold), BLANK, text, flags=re.IGNORECASE) if key in folded else text
    parts, position = [], 0
    while (at := folded.find(key, position)) >= 0:
        parts += [text[position:at], BLANK]
        position = at + len(key)
    return "".join(parts) + text[position:]


def _squash(text: str) -> str:
    return " ".join(text.split())


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _clip(text: str, limit: int = MAX_GOLD) -> str:
    """The first line of ``text`` with characters, at most ``limit``, cut at a word boundary (still verbatim)."""
    line = text.strip().split("\n", 1)[0].strip()
    if len(line) <= limit:
        return line
    cut = line[:limit]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


_ROLE_LABEL = {"tool": "a tool result", "user": "the user", "assistant": "the assistant"}


def _said(role: Any) -> str:
    return _ROLE_LABEL.get(role, "a message")


# ---------------------------------------------------------------- recall

#: A word that marks a line of a tool result as an error report.
_ERROR_WORD = re.compile(r"(?:Error|Exception)\b|\b(?:error|ERROR|FAILED|fatal|Traceback|denied)\b|"
                         r"\bnot found\b|\bNo such file\b")
_COMMAND_KEYS = ("command", "cmd", "script", "code")


def _recall(region: _Region) -> Iterator[Candidate]:
    commands: list[tuple[int, tuple[int, int], str, str]] = []
    errors: list[tuple[int, tuple[int, int], str]] = []
    facts: list[tuple[int, tuple[int, int], str]] = []
    for index, call, name, arguments in region.tool_calls():
        for key in _COMMAND_KEYS:
            value = arguments.get(key)
            if not isinstance(value, str):
                continue
            command = _clip(value)
            span = region.span(index, command)
            output = _clip(region.results.get(call.get("id")) or "", 100)
            if span is not None and len(output) >= MIN_GOLD and region.fair_gold(command):
                commands.append((index, span, command, f"{name!r} tool whose output began: «{output}»"))
            break
    for index in region.removed:
        if region.before[index].get("role") == "tool":
            text = region.texts[index]
            end = 0
            for match in _ERROR_WORD.finditer(text):
                if match.start() < end:
                    continue
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.end())
                end = len(text) if end < 0 else end
                line = _clip(text[start:end])
                span = region.span(index, line)
                if span is not None and region.fair_gold(line):
                    errors.append((index, span, line))
    for index in _spread(list(region.removed), FACT_MESSAGES):
        text = region.texts[index]
        for fact in _entities(text[:FACT_CHARS]):
            at = text.find(fact)
            if at >= 0 and region.fair_gold(fact):
                facts.append((index, (at, at + len(fact)), fact))
    chosen_commands = _take(commands, 2)
    chosen_errors = _take(errors, 2)
    for index, span, command, where in chosen_commands:
        shown = _masked(_squash(where), _squash(command))
        yield (f"Earlier in this conversation the assistant ran a command with its {shown}. "
               f"What was the exact command?", command, index, span)
    for index, span, line in chosen_errors:
        yield (f"An error was reported earlier in this conversation. Which exact line fills the blank: "
               f"«{region.cloze(index, *span)}»?", line, index, span)
    for index, span, fact in _take(facts, LIMITS["recall"] - len(chosen_commands) - len(chosen_errors)):
        role = region.before[index].get("role")
        yield (f"{_said(role).capitalize()} said earlier in this conversation: «{region.cloze(index, *span)}». "
               f"What exactly goes in the blank ({_kind(fact)})?", fact, index, span)


#: Entities of removed texts: every config replayed over a recording removes the same recorded texts.
_ENTITIES: dict[str, list[str]] = {}
_ENTITIES_MAX = 50_000


def _entities(text: str) -> list[str]:
    found = _ENTITIES.get(text)
    if found is None:
        found = extract_entities(text)
        bounded_put(_ENTITIES, text, found, _ENTITIES_MAX)
    return found


def _take(candidates: list[tuple[Any, ...]], count: int) -> list[tuple[Any, ...]]:
    """Up to ``count`` candidates (index, span, gold, ...) with distinct golds, evenly spaced over them."""
    distinct: dict[str, tuple[Any, ...]] = {}
    for candidate in candidates:
        distinct.setdefault(normal_answer(candidate[2]), candidate)
    values = list(distinct.values())
    if count <= 0:
        return []
    if len(values) <= count:
        return values
    if count == 1:
        return values[:1]
    return [values[round(k * (len(values) - 1) / (count - 1))] for k in range(count)]


def _kind(fact: str) -> str:
    if "/" in fact or re.search(r"\.[A-Za-z]{1,5}$", fact):
        return "a path or file name"
    if re.fullmatch(r"[$€£]?[\d,.]+\s*\S*", fact):
        return "a number"
    return "an identifier"


# ---------------------------------------------------------------- artifacts

_PATH_KEYS = ("path", "file_path", "filepath", "file", "filename", "target_file", "target", "destination",
              "dest", "new_path")
_CONTENT_KEYS = ("content", "file_text", "new_str", "new_string", "new_content", "contents", "text", "code",
                 "replacement", "insert_text")
_WRITING_TOOL = re.compile(r"write|create|edit|replace|patch|save|append|insert|delete|remove|move|rename|"
                           r"str_replace|apply", re.IGNORECASE)
_REMOVING_TOOL = re.compile(r"delete|remove|unlink", re.IGNORECASE)
_SEGMENT = re.compile(r"&&|\|\||;|\n|\|")
_REDIRECT = re.compile(r"(?<![<>&\d])>>?\s*(['\"]?)([^\s;&|<>'\"()]+)\1")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_PATHISH = re.compile(r"[\w.~/-]*[\w/][\w.~/-]*")


@dataclass(frozen=True)
class _Change:
    path: str
    index: int
    #: The first line written, or the command that made the change.
    state: str
    by_command: bool


def _changes(region: _Region, indices: Sequence[int]) -> list[_Change]:
    """Every file change the assistant's tool calls in messages ``indices`` of ``before`` made, in order."""
    changes: list[_Change] = []
    before = region.compaction.before
    for index in indices:
        message = before[index]
        if message.get("role") != "assistant":
            continue
        for call in tool_calls_of(message):
            function = call.get("function") or {}
            name, arguments = str(function.get("name") or ""), _arguments(function.get("arguments"))
            command = next((arguments[k] for k in _COMMAND_KEYS if isinstance(arguments.get(k), str)), None)
            if command is not None and not any(isinstance(arguments.get(k), str) for k in _PATH_KEYS):
                changes.extend(_Change(path, index, state, by_command)
                               for path, state, by_command in _shell_changes(command))
                continue
            if not _WRITING_TOOL.search(name):
                continue
            path = next((arguments[k] for k in _PATH_KEYS if isinstance(arguments.get(k), str)), None)
            if not path or not _PATHISH.fullmatch(path):
                continue
            content = next((arguments[k] for k in _CONTENT_KEYS if isinstance(arguments.get(k), str)), "")
            first = next((line.strip() for line in content.splitlines() if line.strip()), "")
            deleted = _REMOVING_TOOL.search(name) is not None
            changes.append(_Change(path, index, "" if deleted else _clip(first), False))
    return changes


def _shell_changes(command: str) -> Iterator[tuple[str, str, bool]]:
    """(path, state, state is a command) for each file a shell command writes, edits, moves or deletes: the
    state is the first line of a here-document written to it, else the command segment that changed it."""
    bodies: dict[int, str] = {}  # here-document bodies are text, not commands: cut out, first lines kept
    lines, kept = command.split("\n"), []
    position = 0
    while position < len(lines):
        line = lines[position]
        kept.append(line)
        position += 1
        heredoc = _HEREDOC.search(line)
        if heredoc is None:
            continue
        body = []
        while position < len(lines) and lines[position].strip() != heredoc.group(2):
            body.append(lines[position])
            position += 1
        position += 1
        bodies[len(kept) - 1] = next((b.strip() for b in body if b.strip()), "")
    for number, line in enumerate(kept):
        for raw in _SEGMENT.split(line):
            yield from _segment_changes(raw.strip(), bodies.get(number, ""))


def _segment_changes(segment: str, body: str) -> Iterator[tuple[str, str, bool]]:
    """The changes of one simple command; ``body`` is the first line of its here-document, if any."""
    if not segment:
        return
    words = segment.split()
    for match in _REDIRECT.finditer(segment):
        target = match.group(2)
        if not target.startswith(("/dev/", "&")) and _PATHISH.fullmatch(target):
            yield (target, _clip(body), False) if body else (target, segment, True)
    verb = words[0]
    operands = [w.strip("'\"") for w in words[1:] if not w.startswith("-")]
    if verb == "sed" and any(w.startswith("-i") for w in words[1:]) and len(operands) >= 2:
        yield operands[-1], segment, True
    elif verb in ("rm", "touch", "tee", "truncate", "unlink"):
        state = (_clip(body), False) if body and verb == "tee" else (segment, True)
        yield from ((o, *state) for o in operands if _PATHISH.fullmatch(o))
    elif verb in ("mv", "cp") and len(operands) >= 2:
        targets = operands if verb == "mv" else operands[-1:]
        yield from ((o, segment, True) for o in targets if _PATHISH.fullmatch(o))


def _artifacts(region: _Region) -> Iterator[Candidate]:
    changes = _changes(region, region.removed)
    if not changes:
        return
    located: list[tuple[str, int, tuple[int, int]]] = []
    for change in changes:
        span = region.span(change.index, change.path)
        if span is not None and change.path not in {p for p, _, _ in located}:
            located.append((change.path, change.index, span))
    if located:
        paths = tuple(p for p, _, _ in located[:8])
        _, index, span = located[0]
        yield ("Which files has the assistant created, changed or deleted in this conversation? "
               "List every path.", paths, index, span)
    latest = {change.path: change for change in _changes(region, range(len(region.compaction.before)))}
    removed = set(region.removed)
    for path, change in latest.items():
        if change.index not in removed or not change.state:
            continue
        span = region.span(change.index, change.state)
        if span is None:
            continue
        if change.by_command:
            question = f"What was the last command the assistant ran that changed the file {path}?"
        else:
            question = f"What is the first line of what the assistant last wrote to the file {path}?"
        yield question, change.state, change.index, span


# ---------------------------------------------------------------- continuation


def _continuation(region: _Region) -> Iterator[Candidate]:
    before = region.compaction.before
    removed = set(region.removed)
    latest = next((i for i in range(len(before) - 1, -1, -1) if is_real_user_message(before[i])), None)
    if latest is not None and latest in removed:
        text = region.texts[latest]
        line = next((_clip(line) for line in text.splitlines() if len(line.split()) >= 4), _clip(text))
        span = region.span(latest, line)
        if span is not None:
            yield ("What is the user's latest request in this conversation? Quote its opening line.",
                   line, latest, span)
    step = next((i for i in range(len(before) - 1, -1, -1)
                 if before[i].get("role") == "assistant" and tool_calls_of(before[i])), None)
    if step is not None and step in removed:
        call = tool_calls_of(before[step])[-1]
        function = call.get("function") or {}
        arguments = _arguments(function.get("arguments"))
        value = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), None)
        if value is not None:
            action = _clip(value)
            span = region.span(step, action)
            if span is not None:
                yield (f"What was the assistant's most recent step: its latest {function.get('name')!r} tool call "
                       f"was made with which argument?", action, step, span)


# ---------------------------------------------------------------- decisions and constraints

_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)", re.MULTILINE)
_CHOICE = re.compile(r"\b(?:I'll|I will|I'm going to|I am going to|let's|let me|I decided to|I've decided to|"
                     r"I chose|I choose|I prefer|we should|I should|I need to|we need to|I'd rather)\b",
                     re.IGNORECASE)
_REASON = re.compile(r"\s(because|since|so that|in order to|given that|to avoid|to make sure|to ensure|as it|"
                     r"as this|as the)\s", re.IGNORECASE)
_INSTRUCTION = re.compile(r"\b(never|do not|don't|must not|mustn't|must|always|make sure(?: to| that| you)?|"
                          r"avoid|should not|shouldn't|under no circumstances|not allowed to)\s", re.IGNORECASE)


def _sentences(text: str) -> Iterator[tuple[int, str]]:
    for match in _SENTENCE.finditer(text):
        if match.group(0).strip():
            yield match.start(), match.group(0)


def _decisions(region: _Region) -> Iterator[Candidate]:
    for index in region.removed:
        if region.before[index].get("role") != "assistant":
            continue
        text = region.texts[index]
        for start, sentence in _sentences(text):
            choice = _CHOICE.search(sentence)
            reason = _REASON.search(sentence, choice.end()) if choice else None
            if reason is None:
                continue
            said = sentence[choice.start():reason.start()].strip()
            gold = _clip(sentence[reason.end():].rstrip(".!? \t"))
            if len(said.split()) < 3 or len(gold.split()) < 3:
                continue
            at = start + reason.end()
            span = (at, at + len(gold))
            if text[span[0]:span[1]] != gold:
                continue
            yield (f"Earlier the assistant said: «{_squash(said)} {reason.group(1)} {BLANK}». "
                   f"What reason did it give?", gold, index, span)


def _constraints(region: _Region) -> Iterator[Candidate]:
    for index in region.removed:
        if not is_real_user_message(region.before[index]):
            continue
        text = region.texts[index]
        for start, sentence in _sentences(text):
            rule = _INSTRUCTION.search(sentence)
            if rule is None:
                continue
            gold = _clip(sentence[rule.end():].rstrip(".!? \t"))
            if len(gold.split()) < 2:
                continue
            at = start + rule.end()
            span = (at, at + len(gold))
            if text[span[0]:span[1]] != gold:
                continue
            opening = _squash(sentence[:rule.end()])
            yield (f"The user gave an instruction earlier: «{opening} {BLANK}». "
                   f"Complete it in the user's words.", gold, index, span)
