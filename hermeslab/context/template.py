"""The structured handoff template every summary follows.

One fixed set of sections makes summaries comparable across summarisers and
across compressions: the LLM is asked to fill it, the extractive summariser
fills it deterministically, and an iterative update can find the previous
summary's parts by heading. ``Active Task`` comes first because the model
resuming work must see the open request before anything else.
"""

from __future__ import annotations

import re

#: (heading, what belongs under it), in the order they appear in a summary.
SECTIONS: tuple[tuple[str, str], ...] = (
    (
        "Active Task",
        "The newest user request that is not fulfilled yet, quoted word for word. A question counts as a "
        "request; a later stop, undo or change of subject replaces the earlier request.",
    ),
    ("Goal", "What the user is ultimately trying to achieve, in one or two sentences."),
    (
        "Constraints & Preferences",
        "Rules, limits and preferences the user stated: style, tools to use or avoid, things not to touch.",
    ),
    (
        "Completed Actions",
        "Numbered, oldest first, one line each: `N. ACTION target - outcome [tool: name]`. "
        "Continue the numbering of any earlier summary.",
    ),
    (
        "Active State",
        "Where things stand now: working directory or branch, files changed, test results, running processes.",
    ),
    ("In Progress", "Work that had started but was not finished when this part of the conversation ended."),
    ("Blocked", "Errors or obstacles that are still open, with the exact error text."),
    ("Key Decisions", "Choices that were made, each with its reason."),
    ("Resolved Questions", "Questions that were settled, each with its answer."),
    ("Pending User Asks", "Older user requests that were neither answered nor done."),
    ("Relevant Files", "Paths that were read, created or changed, with a few words on each."),
    ("Remaining Work", "Steps still to do, in order."),
    (
        "Critical Context",
        "Exact identifiers, numbers with units, names, URLs and values later work depends on. Never credentials.",
    ),
)

HEADINGS: tuple[str, ...] = tuple(heading for heading, _ in SECTIONS)

#: Section names used by Hermes summaries, so imported sessions can be merged too.
_ALIASES = {
    "historical task snapshot": "Active Task",
    "historical in-progress state": "In Progress",
    "historical pending user asks": "Pending User Asks",
    "historical remaining work": "Remaining Work",
}
_CANONICAL = {heading.lower(): heading for heading in HEADINGS} | _ALIASES
_HEADING_LINE = re.compile(r"^[ ]{0,3}#{1,6}[ \t]+(?P<title>.+?)[ \t#:]*$")
_FENCE = re.compile(r"^[ ]{0,3}(```|~~~)")

EMPTY_SECTION = "None."


def canonical_heading(title: str) -> str | None:
    """The template heading a title refers to (case and spacing ignored), or None."""
    return _CANONICAL.get(" ".join(title.replace("*", "").split()).lower())


def render_empty_template() -> str:
    """The template as shown to a model: every heading followed by its instruction."""
    return "\n\n".join(f"## {heading}\n{instruction}" for heading, instruction in SECTIONS)


def render_compact_template() -> str:
    """The headings alone, for a summary call whose window cannot also hold the instructions."""
    return "\n".join(f"## {heading}" for heading in HEADINGS)


def _scan(body: str) -> list[tuple[str, int, int]]:
    """(heading, start of heading line, start of content) for each known heading outside code fences.

    A fence that is never closed (a quote clipped inside a code block) must not
    hide every section after it. With an odd number of fence lines, either the
    first or the last one is taken as plain text, whichever leaves more
    distinct sections visible.
    """
    lines = body.splitlines(keepends=True)
    fences = [i for i, line in enumerate(lines) if _FENCE.match(line)]
    if len(fences) % 2 == 0:
        return _headings(lines, set(fences))
    readings = (_headings(lines, set(fences[1:])), _headings(lines, set(fences[:-1])))
    return max(readings, key=lambda found: len({heading for heading, _, _ in found}))


def _headings(lines: list[str], fences: set[int]) -> list[tuple[str, int, int]]:
    found: list[tuple[str, int, int]] = []
    in_fence = False
    offset = 0
    for number, line in enumerate(lines):
        if number in fences:
            in_fence = not in_fence
        elif not in_fence:
            match = _HEADING_LINE.match(line.rstrip("\r\n"))
            heading = canonical_heading(match.group("title")) if match else None
            if heading is not None:
                found.append((heading, offset, offset + len(line)))
        offset += len(line)
    return found


def parse_sections(body: str) -> dict[str, str]:
    """Map each template heading found in ``body`` to its stripped content.

    Only template headings (or Hermes's names for them) split sections; other
    markdown headings stay inside the section they appear in, and text before
    the first template heading is ignored. A heading that appears twice has
    its contents joined.
    """
    if not isinstance(body, str):
        raise TypeError(f"parse_sections() needs a str, got {type(body).__name__}")
    marks = _scan(body)
    sections: dict[str, str] = {}
    for position, (heading, _, content_start) in enumerate(marks):
        content_end = marks[position + 1][1] if position + 1 < len(marks) else len(body)
        content = body[content_start:content_end].strip()
        sections[heading] = f"{sections[heading]}\n{content}".strip() if heading in sections else content
    return sections


def render_sections(sections: dict[str, str]) -> str:
    """All 13 sections in template order; missing or empty ones read ``None.``."""
    by_heading: dict[str, str] = {}
    for title, content in sections.items():
        heading = canonical_heading(title)
        if heading is None:
            raise ValueError(f"unknown summary section {title!r}; expected one of: {', '.join(HEADINGS)}")
        if not isinstance(content, str):
            raise TypeError(f"section {title!r} must be a str, got {type(content).__name__}")
        by_heading[heading] = content.strip()
    return "\n\n".join(f"## {heading}\n{by_heading.get(heading) or EMPTY_SECTION}" for heading in HEADINGS)


def replace_section(body: str, heading: str, content: str) -> str:
    """``body`` with one section's content replaced, or the section prepended if it is missing.

    Works on the text itself, so a summary that does not follow the template
    elsewhere keeps every other line untouched.
    """
    canonical = canonical_heading(heading)
    if canonical is None:
        raise ValueError(f"unknown summary section {heading!r}; expected one of: {', '.join(HEADINGS)}")
    marks = _scan(body)
    for position, (found, _, content_start) in enumerate(marks):
        if found == canonical:
            content_end = marks[position + 1][1] if position + 1 < len(marks) else len(body)
            head, tail = body[:content_start], body[content_end:]
            if not head.endswith("\n"):
                head += "\n"
            return f"{head}{content.strip()}\n" + (f"\n{tail}" if tail else "")
    rest = body.strip()
    return f"## {canonical}\n{content.strip()}" + (f"\n\n{rest}" if rest else "")
