"""The memory snapshot: what the system prompt says about memory files and skills.

The snapshot is rendered when a session starts and then frozen: a memory
write during the session reaches the file at once but not the prompt, so the
prompt prefix stays byte-identical and the provider's prompt cache keeps
working. Only a compression, which rebuilds the context anyway, swaps in a
fresh snapshot (``swap_snapshot``). The block is wrapped in a tag so the swap
finds it again in any prompt, a resumed one included.
"""

from __future__ import annotations

import re

from .files import ENTRY_SEPARATOR, EntryFile
from .scan import scan
from .skills import Skill

OPEN_TAG = "<memory-snapshot>"
CLOSE_TAG = "</memory-snapshot>"
_BLOCK = re.compile(r"(?:\n\n)?" + re.escape(OPEN_TAG) + r".*?" + re.escape(CLOSE_TAG), re.DOTALL)
SNAPSHOT_NOTE = (
    "Saved across sessions, as of the start of this context. Changes you make with the memory and skill "
    "tools are stored at once and appear here after the next context rebuild."
)
SKILLS_HEADER = "Skills (read one with skill_view before following it):"


def render_file(file: EntryFile, entries: list[str]) -> str:
    """One file's block: a header with its usage, then its entries ("" when it has none).

    Entries that fail the threat scan (a file edited by hand) are left out, and the header says so.
    """
    safe = [entry for entry in entries if scan(entry) is None]
    if not safe:
        return ""
    usage = file.usage(entries)
    header = f"{file.name} — {file.label} [{usage.percent}% — {usage.chars:,}/{usage.limit:,} chars]"
    if len(safe) < len(entries):
        header += f" ({len(entries) - len(safe)} entries left out: they failed the safety scan)"
    return header + "\n" + ENTRY_SEPARATOR.join(safe)


def render_skills(skills: list[Skill]) -> str:
    listed = [skill for skill in skills if scan(skill.description) is None]
    if not listed:
        return ""
    return "\n".join([SKILLS_HEADER, *(f"- {s.name}: {s.description or '(no description)'}" for s in listed)])


def render_snapshot(blocks: list[str]) -> str:
    """The tagged block for the system prompt, or "" when every part is empty."""
    parts = [block for block in blocks if block]
    if not parts:
        return ""
    return f"{OPEN_TAG}\n" + "\n\n".join([SNAPSHOT_NOTE, *parts]) + f"\n{CLOSE_TAG}"


def with_snapshot(prompt: str, snapshot: str) -> str:
    """``prompt`` with its snapshot block replaced by ``snapshot`` (added at the end when it had none)."""
    match = _BLOCK.search(prompt)
    if match is None:
        return f"{prompt}\n\n{snapshot}" if snapshot and prompt else prompt or snapshot
    replacement = f"\n\n{snapshot}" if snapshot and match.start() > 0 else snapshot
    swapped = prompt[:match.start()] + replacement + prompt[match.end():]
    return swapped if match.start() > 0 or snapshot else swapped.lstrip("\n")
