"""The C helpers an install builds where a compiler is present, and the mark that skips their own checks.

An install without a compiler still works (each helper has a Python
fallback), so a check of the C code itself skips there with the reason, while
the fallback's checks run either way.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType

import pytest


def c_helper(name: str) -> tuple[ModuleType | None, pytest.MarkDecorator]:
    """The built module ``name`` (None when it was not built) and a mark that skips a C-only check without it."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        module = None
    reason = f"{name} was not built (no C compiler at install); its Python fallback is tested instead"
    # CI installs with a compiler: a helper that failed to build there is a failure, not a skip.
    if module is None and os.environ.get("CI") == "true" and shutil.which(os.environ.get("CC", "cc")):
        raise ImportError(f"{name} was not built although a C compiler is present")
    return module, pytest.mark.skipif(module is None, reason=reason)
