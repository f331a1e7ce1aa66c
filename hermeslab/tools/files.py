"""File tools confined to a workspace: read_file, write_file, list_dir, search_files.

Every output is shaped for a model's context: line-numbered, paged or capped,
and always saying how much was left out and how to get more.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from fnmatch import fnmatch
from functools import partial
from pathlib import Path
from typing import Any, Iterator

from hermeslab.tools.registry import Tool, ToolError
from hermeslab.tools.workspace import Workspace

READ_DEFAULT_LIMIT = 400
READ_MAX_LIMIT = 2_000
#: Longer lines are cut so one minified file cannot flood the context.
READ_MAX_LINE_CHARS = 2_000
LIST_MAX_ENTRIES = 500
SEARCH_MAX_HITS = 100
SEARCH_MAX_LINE_CHARS = 300
#: A NUL byte in this many leading bytes marks a file as binary.
_BINARY_PROBE_BYTES = 8_192
_NEW_FILE_MODE = 0o644


# ---------------------------------------------------------------- read_file


def read_file(workspace: Workspace, args: dict[str, Any]) -> str:
    path = workspace.resolve(args["path"])
    name = workspace.relative(path)
    offset = args.get("offset", 1)
    limit = args.get("limit", READ_DEFAULT_LIMIT)
    _require_file(path, name)
    shown: list[str] = []
    total = 0
    try:
        if _is_binary(path):
            raise ToolError(f"{name} is a binary file; read_file only reads text")
        with path.open(encoding="utf-8", errors="replace") as handle:
            for total, line in enumerate(handle, start=1):
                if offset <= total < offset + limit:
                    text = _clip(line.rstrip("\n"), READ_MAX_LINE_CHARS)
                    shown.append(f"{total:>5}| {text}")
    except OSError as exc:
        raise ToolError(f"cannot read {name}: {exc.strerror or exc}") from None
    if total == 0:
        return f"{name}: empty file (0 lines)"
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {name}, which has {total} lines")
    last = offset + len(shown) - 1
    if offset == 1 and last == total:
        header = f"{name}: {_count(total, 'line', 'lines')}"
    else:
        header = f"{name}: lines {offset}-{last} of {total}"
    parts = [header, *shown]
    if last < total:
        parts.append(f"[{total - last} more lines; call read_file with offset={last + 1} to continue]")
    return "\n".join(parts)


# ---------------------------------------------------------------- write_file


def write_file(workspace: Workspace, args: dict[str, Any]) -> str:
    path = workspace.resolve(args["path"])
    name = workspace.relative(path)
    content: str = args["content"]
    if path.is_dir():
        raise ToolError(f"{name} is a directory; give the path of a file to write")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("content contains lone surrogate characters, which cannot be written as UTF-8") from None
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, data)
    except OSError as exc:
        raise ToolError(f"cannot write {name}: {exc.strerror or exc}") from None
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "overwrote" if existed else "created"
    return f"{verb} {name}: {_count(len(data), 'byte', 'bytes')}, {_count(lines, 'line', 'lines')}"


def _atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary file beside the target, then rename over it.

    A crash or a full disk leaves either the old file or the new one, never half of each.
    """
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else _NEW_FILE_MODE
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


# ---------------------------------------------------------------- list_dir


def list_dir(workspace: Workspace, args: dict[str, Any]) -> str:
    path = workspace.resolve(args.get("path", "."))
    name = workspace.relative(path)
    if not path.exists():
        raise ToolError(f"no such directory: {name}")
    if not path.is_dir():
        raise ToolError(f"{name} is a file, not a directory; use read_file to read it")
    try:
        with os.scandir(path) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        lines = [_describe_entry(entry) for entry in entries[:LIST_MAX_ENTRIES]]
    except OSError as exc:
        raise ToolError(f"cannot list {name}: {exc.strerror or exc}") from None
    if not entries:
        return f"{name}/: empty directory"
    parts = [f"{name}/: {_count(len(entries), 'entry', 'entries')}", *lines]
    if len(entries) > LIST_MAX_ENTRIES:
        parts.append(f"[{len(entries) - LIST_MAX_ENTRIES} more entries not shown]")
    return "\n".join(parts)


def _describe_entry(entry: os.DirEntry[str]) -> str:
    # Symlinks are not followed: their target may lie outside the workspace.
    if entry.is_symlink():
        return f"{entry.name}@  (symlink)"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    return f"{entry.name}  ({_human_size(entry.stat(follow_symlinks=False).st_size)})"


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            break
        value /= 1024
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"


# ---------------------------------------------------------------- search_files


def search_files(workspace: Workspace, args: dict[str, Any]) -> str:
    pattern: str = args["pattern"]
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    base = workspace.resolve(args.get("path", "."))
    name = workspace.relative(base)
    glob: str | None = args.get("glob")
    if not base.exists():
        raise ToolError(f"no such file or directory: {name}")
    hits: list[str] = []
    total = 0
    matched_files = 0
    for file in _text_files(workspace, base, glob):
        relative = workspace.relative(file)
        found = _search_file(file, regex)
        if found:
            matched_files += 1
            total += len(found)
            for line_number, text in found[: SEARCH_MAX_HITS - len(hits)]:
                hits.append(f"{relative}:{line_number}: {_clip(text, SEARCH_MAX_LINE_CHARS)}")
    scope = name + (f" (files matching {glob!r})" if glob else "")
    if total == 0:
        return f"no matches for {pattern!r} under {scope}"
    header = f"{_count(total, 'match', 'matches')} in {_count(matched_files, 'file', 'files')} under {scope}"
    if total > len(hits):
        header += f"; showing the first {len(hits)} (narrow the pattern, path or glob to see the rest)"
    return "\n".join([header, *hits])


def _text_files(workspace: Workspace, base: Path, glob: str | None) -> Iterator[Path]:
    """Regular text files under ``base`` in name order, skipping ``.git`` and outward symlinks.

    ``glob`` matches either the file name or its workspace-relative path.
    """
    if base.is_file():
        candidates: Iterator[Path] = iter([base])
    else:
        candidates = _walk(base)
    for file in candidates:
        if glob and not (fnmatch(file.name, glob) or fnmatch(workspace.relative(file), glob)):
            continue
        if not file.is_file() or not workspace.contains(file):
            continue
        try:
            if _is_binary(file):
                continue
        except OSError:
            continue
        yield file


def _walk(base: Path) -> Iterator[Path]:
    for directory, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for filename in sorted(filenames):
            yield Path(directory, filename)


def _search_file(file: Path, regex: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        with file.open(encoding="utf-8", errors="replace") as handle:
            return [
                (number, line.rstrip("\n"))
                for number, line in enumerate(handle, start=1)
                if regex.search(line)
            ]
    except OSError:
        return []


# ---------------------------------------------------------------- shared


def _require_file(path: Path, name: str) -> None:
    if not path.exists():
        raise ToolError(f"no such file: {name}")
    if path.is_dir():
        raise ToolError(f"{name} is a directory; use list_dir to see its entries")


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_BINARY_PROBE_BYTES)


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number} {singular if number == 1 else plural}"


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [line cut at {limit} of {len(text)} characters]"


# ---------------------------------------------------------------- tool definitions


def file_tools(workspace: Workspace) -> list[Tool]:
    """The four file tools, bound to ``workspace``."""
    return [
        Tool(
            name="read_file",
            description=(
                "Read a text file in the workspace, shown with line numbers; long files come in pages "
                "(use offset and limit to read further). Use it to look at a file's contents. Not for "
                "directories (use list_dir) or for finding where something occurs (use search_files)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": READ_MAX_LIMIT,
                        "description": f"Number of lines to show (default {READ_DEFAULT_LIMIT}).",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=partial(read_file, workspace),
            read_only=True,
            idempotent=True,
        ),
        Tool(
            name="write_file",
            description=(
                "Create or overwrite a text file in the workspace with the given content; missing parent "
                "directories are created. Use it to save a whole file. It replaces the entire file, so pass "
                "the complete content. Not for reading (use read_file)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "content": {"type": "string", "description": "The full text to write."},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            handler=partial(write_file, workspace),
        ),
        Tool(
            name="list_dir",
            description=(
                "List a workspace directory: directories end with '/', files show their size, hidden files "
                "are included. Use it to see what a folder holds. Not for reading a file (use read_file) or "
                "for searching file contents (use search_files)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory relative to the workspace root (default '.')."},
                },
                "additionalProperties": False,
            },
            handler=partial(list_dir, workspace),
            read_only=True,
            idempotent=True,
        ),
        Tool(
            name="search_files",
            description=(
                "Search the text files under a workspace path for a regular expression (Python syntax); "
                "returns 'path:line: text' hits, skipping binary files and .git. Use it to find where "
                "something is defined or mentioned. Not for listing a directory (use list_dir) or reading "
                "a whole file (use read_file)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to look for in each line."},
                    "path": {"type": "string", "description": "File or directory to search (default '.')."},
                    "glob": {"type": "string", "description": "Only search files whose name or path matches, e.g. '*.py'."},
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            handler=partial(search_files, workspace),
            read_only=True,
            idempotent=True,
        ),
    ]
