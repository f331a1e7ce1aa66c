"""Chat with the agent in a notebook cell: ``%load_ext hermeslab``, then ``%%hermes``.

The turn streams into ordinary output (kept when the notebook is saved) while
the kernel stays free; a Stop button and a token-budget gauge are the only
widgets. ``current_chat()`` gives the chat behind the magics to code, e.g.
``await current_chat().wait()``.
"""

from __future__ import annotations

from .chat import ChatBusyError, NotebookChat, Status
from .extension import current_chat, load_ipython_extension, unload_ipython_extension
from .settings import Hermes
from .widgets import StopButton, TokenBudget

__all__ = [
    "ChatBusyError",
    "Hermes",
    "NotebookChat",
    "Status",
    "StopButton",
    "TokenBudget",
    "current_chat",
    "load_ipython_extension",
    "unload_ipython_extension",
]
