"""MEMORY.md and USER.md: short entries the agent keeps across sessions.

MEMORY.md holds the agent's own notes (the environment, conventions, lessons)
and USER.md what it learned about the user. Entries are separated by a line
holding only ``§``, and each file has a character budget counted over the
joined text, so the system prompt they are pasted into stays small. Every
change is made under a file lock and written atomically (``atomic.py``);
every new entry passes the threat scanner (``scan.py``) first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .atomic import BusyError, locked, read_text, write_atomic
from .scan import scan

ENTRY_SEPARATOR = "\n§\n"
MEMORY_FILE = "MEMORY.md"
USER_FILE = "USER.md"
#: Characters of an entry shown when a lookup has to list entries.
PREVIEW_CHARS = 60


class MemoryWriteError(ValueError):
    """A memory change that was refused; the text says why and what to do instead."""


@dataclass(frozen=True)
class Usage:
    chars: int
    limit: int
    entries: int

    @property
    def percent(self) -> int:
        return round(100 * self.chars / self.limit) if self.limit else 0

    def describe(self) -> str:
        return f"{self.entries} {'entry' if self.entries == 1 else 'entries'}, {self.chars:,}/{self.limit:,} chars " \
               f"({self.percent}%)"


def parse_entries(text: str) -> list[str]:
    """The entries of a memory file's text, in order, without blanks."""
    normalised = text.replace("\r\n", "\n")
    return [entry.strip() for entry in f"\n{normalised}\n".split(ENTRY_SEPARATOR) if entry.strip()]


def join_entries(entries: list[str]) -> str:
    return ENTRY_SEPARATOR.join(entries)


def _preview(entry: str) -> str:
    flat = " ".join(entry.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1] + "…"


class EntryFile:
    """One memory file with its character limit: read it, add, replace or remove an entry."""

    def __init__(self, path: Path, limit: int, *, label: str):
        if limit < 1:
            raise ValueError(f"{path.name}: the character limit must be positive, got {limit}")
        self.path = Path(path)
        self.limit = limit
        #: What the file holds, for the system prompt ("your notes", "the user profile").
        self.label = label

    @property
    def name(self) -> str:
        return self.path.name

    def entries(self) -> list[str]:
        return parse_entries(read_text(self.path))

    def usage(self, entries: list[str] | None = None) -> Usage:
        entries = self.entries() if entries is None else entries
        return Usage(len(join_entries(entries)), self.limit, len(entries))

    def add(self, content: str) -> Usage:
        entry = self._checked(content)

        def change(entries: list[str]) -> list[str]:
            if entry in entries:
                raise MemoryWriteError(f"{self.name} already has this entry; nothing was added")
            return entries + [entry]

        return self._update(change)

    def replace(self, old_text: str, content: str) -> Usage:
        entry = self._checked(content)

        def change(entries: list[str]) -> list[str]:
            index = self._find(entries, old_text)
            if entry in entries and entries[index] != entry:
                raise MemoryWriteError(f"{self.name} already has an entry with the new text; "
                                       "remove the old one instead")
            return entries[:index] + [entry] + entries[index + 1:]

        return self._update(change)

    def remove(self, old_text: str) -> Usage:
        def change(entries: list[str]) -> list[str]:
            index = self._find(entries, old_text)
            return entries[:index] + entries[index + 1:]

        return self._update(change)

    # ------------------------------------------------------------ internals

    def _checked(self, content: str) -> str:
        if not isinstance(content, str) or not content.strip():
            raise MemoryWriteError("the entry is empty; give the text to save")
        entry = content.strip().replace("\r\n", "\n")
        if any(line.strip() == "§" for line in entry.split("\n")):
            raise MemoryWriteError("an entry may not contain a line holding only '§' (it separates entries)")
        threat = scan(entry)
        if threat is not None:
            raise MemoryWriteError(
                f"refused: the entry {threat.describe()}. Memory is pasted into every future system prompt, "
                "so it must hold facts and preferences, never instructions aimed at the agent")
        return entry

    def _find(self, entries: list[str], old_text: str) -> int:
        """The index of the one entry containing ``old_text`` (identical duplicates count as one)."""
        if not isinstance(old_text, str) or not old_text.strip():
            raise MemoryWriteError("old_text is empty; give a piece of text that occurs in exactly one entry")
        needle = old_text.strip()
        matches = [i for i, entry in enumerate(entries) if needle in entry]
        if not matches:
            listing = "; ".join(f"[{i + 1}] {_preview(e)}" for i, e in enumerate(entries)) or "the file is empty"
            raise MemoryWriteError(f"no entry in {self.name} contains {needle!r}. Entries: {listing}")
        if len({entries[i] for i in matches}) > 1:
            listing = "; ".join(f"[{i + 1}] {_preview(entries[i])}" for i in matches)
            raise MemoryWriteError(f"{needle!r} occurs in {len(matches)} entries of {self.name} ({listing}); "
                                   "give a longer piece of text that occurs in only one")
        return matches[0]

    def _update(self, change: Callable[[list[str]], list[str]]) -> Usage:
        try:
            with locked(self.path):
                before = self.entries()
                after = change(before)
                used = len(join_entries(after))
                if used > self.limit:
                    room = max(self.limit - len(join_entries(before)), 0)
                    raise MemoryWriteError(
                        f"{self.name} is full: after this change it would hold {used:,} chars, over its limit of "
                        f"{self.limit:,}; {room:,} chars are free now. Remove or shorten entries first, then retry "
                        f"(entries: {'; '.join(_preview(e) for e in before) or 'none'})")
                write_atomic(self.path, join_entries(after) + ("\n" if after else ""))
                return self.usage(after)
        except BusyError as exc:
            raise MemoryWriteError(str(exc)) from None


#: The memory tool's targets and the file each one names.
TARGETS = {"memory": MEMORY_FILE, "user": USER_FILE}


class MemoryFiles:
    """The enabled memory files of one lab folder, by target name."""

    def __init__(self, folder: Path, *, memory_limit: int, user_limit: int, memory_enabled: bool = True,
                 user_enabled: bool = True):
        self.folder = Path(folder)
        self._files: dict[str, EntryFile] = {}
        if memory_enabled:
            self._files["memory"] = EntryFile(self.folder / MEMORY_FILE, memory_limit, label="your notes")
        if user_enabled:
            self._files["user"] = EntryFile(self.folder / USER_FILE, user_limit, label="the user profile")

    @property
    def targets(self) -> list[str]:
        return list(self._files)

    def files(self) -> list[EntryFile]:
        return list(self._files.values())

    def target(self, name: str) -> EntryFile:
        if name in self._files:
            return self._files[name]
        if name in TARGETS:
            raise MemoryWriteError(f"the {name!r} memory ({TARGETS[name]}) is switched off in this configuration")
        raise MemoryWriteError(f"unknown memory target {name!r}; use one of: {', '.join(self._files) or 'none'}")
