"""Filling a summary template deterministically from the conversation quoted in the prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

Message = dict[str, Any]

_SUMMARY_ASK = re.compile(r"\bsummar(?:y|ies|i[sz]e|i[sz]ing|i[sz]ation)\b", re.IGNORECASE)
_BLOCK_LABEL = re.compile(
    r"^\s*(?:\[(?P<bracket>USER|ASSISTANT|TOOL(?:[ _](?:RESULT|CALL)S?)?|SYSTEM)\b[^\]\n]*\]|"
    r"(?P<plain>User|Assistant|Tool|System)\s*:)\s*:?\s*(?P<rest>.*)$"
)
_CALL_LINE = re.compile(r"^\s*(?:[-*]\s*)?(?:(?:tool\s*call|called|call)\s*:?\s*)?(?P<call>[A-Za-z_][\w.:-]*\(.*\))\s*$",
                        re.IGNORECASE)
_URL = re.compile(r"https?://[^\s)>\]\"'`]+")
_PATH = re.compile(
    r"(?<![\w/.:@-])(?:~?/)?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.:@-])[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}\b"
)
_IDENTIFIER = re.compile(
    r"#\d+\b|\b[A-Za-z]+[-_]?\d+[\w-]*\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b|\b\d+\.\d+\b|\b\d{3,}\b"
)
_ERROR_LINE = re.compile(r"\b(?:\w*error|\w*exception|traceback|failed|failure|fatal)\b", re.IGNORECASE)
_NOT_PATHS = frozenset({"e.g", "i.e", "etc"})
#: How many of each fact a filled template keeps.
_SUMMARY_LIMITS = {"ask_chars": 1400, "actions": 20, "action_chars": 200, "files": 12, "facts": 20, "errors": 5}


@dataclass
class _Block:
    role: str
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def template_headings(lines: list[str]) -> list[str]:
    """The headings of the template: the last run of distinct ``## `` lines, at most 3 other lines apart.

    The template closes the prompt's material, so earlier headings (a quoted
    file, the previous summary) are not taken for it; a heading seen twice
    marks where the previous summary ended and the template began.
    """
    headings: list[str] = []
    previous: int | None = None
    for index in reversed(range(len(lines))):
        if not lines[index].startswith("## "):
            continue
        heading = lines[index][3:].strip()
        if previous is not None and (previous - index - 1 > 3 or heading in headings):
            break
        if heading:
            headings.insert(0, heading)
        previous = index
    return headings


def _blocks(lines: list[str]) -> list[_Block]:
    """Labelled conversation blocks; a ``## `` line ends a block (what follows is template or old summary)."""
    blocks: list[_Block] = []
    current: _Block | None = None
    for line in lines:
        label = _BLOCK_LABEL.match(line)
        if label:
            word = (label.group("bracket") or label.group("plain")).lower()
            role = "assistant" if word.startswith("tool call") else "tool" if word.startswith("tool") else word
            current = _Block(role, [label.group("rest")] if label.group("rest") else [])
            blocks.append(current)
        elif line.startswith("## "):
            current = None
        elif current is not None:
            current.lines.append(line)
    return blocks


def _unique(items: list[str], limit: int) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
        if len(seen) == limit:
            break
    return seen


def _summary_facts(blocks: list[_Block]) -> dict[str, list[str]]:
    """Everything the template draws on, extracted from the labelled conversation blocks."""
    limits = _SUMMARY_LIMITS
    text = "\n".join(block.text for block in blocks)
    without_urls = _URL.sub(" ", text)
    asks = [re.sub(r"\s+", " ", block.text) for block in blocks if block.role == "user" and block.text]
    actions = [
        m.group("call")[: limits["action_chars"]]
        for block in blocks if block.role == "assistant"
        for m in map(_CALL_LINE.match, block.lines) if m
    ]
    paths = [p for p in _PATH.findall(without_urls) if p.lower() not in _NOT_PATHS and not p.replace(".", "").isdigit()]
    facts = _URL.findall(text) + _IDENTIFIER.findall(without_urls)
    errors = [line.strip() for block in blocks for line in block.lines if _ERROR_LINE.search(line)]
    return {
        "ask": [asks[0][: limits["ask_chars"]]] if asks else [],
        "actions": _unique(actions, limits["actions"]),
        "files": _unique(paths, limits["files"]),
        "facts": _unique(facts, limits["facts"]),
        "errors": _unique(errors, limits["errors"]),
    }


#: Heading keywords → how that section is filled from the facts; other sections get "None.".
_SECTION_FILLERS: tuple[tuple[tuple[str, ...], Callable[[dict[str, list[str]]], str]], ...] = (
    (("task", "goal"), lambda f: f"\u201c{f['ask'][0]}\u201d" if f["ask"] else ""),
    (("completed", "action"), lambda f: "\n".join(f"{i}. {call}" for i, call in enumerate(f["actions"], 1))),
    (("file",), lambda f: "\n".join(f"- {path}" for path in f["files"])),
    (("critical", "context"), lambda f: "\n".join(f"- {fact}" for fact in f["facts"])),
    (("blocked", "error"), lambda f: "\n".join(f"- {line}" for line in f["errors"])),
)


def fill_summary_template(request: str) -> str | None:
    """Fill the ``## `` template of a summary request, or None when this is no such request."""
    if not _SUMMARY_ASK.search(request):
        return None
    lines = request.splitlines()
    headings = template_headings(lines)
    if len(headings) < 2:
        return None
    facts = _summary_facts(_blocks(lines))
    sections = []
    for heading in headings:
        lowered = heading.lower()
        body = next((fill(facts) for keys, fill in _SECTION_FILLERS if any(key in lowered for key in keys)), "")
        sections.append(f"## {heading}\n{body or 'None.'}")
    return "\n\n".join(sections)
