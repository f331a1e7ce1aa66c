"""Confine file tools to one directory tree.

Paths come from the model, so they are untrusted: every path is resolved to
its real location (following symlinks) and must stay inside the real root.
"""

from __future__ import annotations

import os
from pathlib import Path

from hermeslab.tools.registry import ToolError


class Workspace:
    """A root directory and the rules for turning model-supplied paths into real ones."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise ValueError(f"workspace root {str(root)!r} is not an existing directory")
        self.root = real

    def resolve(self, path: str) -> Path:
        """The real path for a path relative to the root; ToolError if it would leave the root."""
        if not isinstance(path, str):
            raise ToolError(f"path must be text, got {type(path).__name__}")
        if not path.strip():
            raise ToolError("path is empty; give a path relative to the workspace root (\".\" for the root)")
        if "\0" in path:
            raise ToolError(f"path {path!r} contains a NUL byte")
        if os.path.isabs(path):
            raise ToolError(f"absolute path {path!r} is not allowed; give a path relative to the workspace root")
        lexical = Path(os.path.normpath(self.root / path))
        if not lexical.is_relative_to(self.root):
            raise ToolError(f"path {path!r} escapes the workspace root")
        real = Path(os.path.realpath(self.root / path))
        if not real.is_relative_to(self.root):
            raise ToolError(f"path {path!r} leads through a symlink to a location outside the workspace root")
        return real

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """Whether an absolute path, after following symlinks, lies inside the root."""
        return _inside(Path(os.path.realpath(path)), self.root)

    def relative(self, path: Path) -> str:
        """How to name a resolved path to the model: relative to the root, with '/'."""
        return path.relative_to(self.root).as_posix()


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)
