"""hermeslab: a research instrument for how long-running LLM agents manage their context."""

from __future__ import annotations

__version__ = "0.1.0"
