"""hermeslab: a research instrument for how long-running LLM agents manage their context."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext hermeslab``: the ``%%hermes`` chat magic (imported only when asked for)."""
    from .notebook.extension import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from .notebook.extension import unload_ipython_extension as unload

    unload(shell)


def __getattr__(name: str) -> Any:
    """``hermeslab.plot_token_usage`` without importing matplotlib and pandas at ``import hermeslab``."""
    if name == "plot_token_usage":
        from .plots import plot_token_usage

        return plot_token_usage
    raise AttributeError(f"module 'hermeslab' has no attribute {name!r}")
