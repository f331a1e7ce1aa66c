"""``%load_ext hermeslab``: settings, one chat per shell, and the magics under free names.

``%%hermes`` is registered unless another extension already owns that name;
``%%hermeslab`` always is, so the chat stays reachable either way. The line
magic follows the same rule. Loading twice changes nothing. In a kernel, an
InterruptRelay makes Kernel → Interrupt stop the chat's running turn.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass
from typing import Any

from .chat import NotebookChat
from .interrupt import InterruptRelay
from .magics import HermesMagics
from .settings import Hermes

NAMES = ("hermes", "hermeslab")
KINDS = ("cell", "line")


@dataclass
class LoadedExtension:
    settings: Hermes
    chat: NotebookChat
    magics: HermesMagics
    #: (kind, name) pairs this extension registered.
    registered: list[tuple[str, str]]
    relay: InterruptRelay


_loaded: weakref.WeakKeyDictionary[Any, LoadedExtension] = weakref.WeakKeyDictionary()


def load_ipython_extension(shell: Any) -> LoadedExtension:
    """Register the magics and the ``Hermes`` settings with ``shell``; a second call returns the first load."""
    if shell in _loaded:
        return _loaded[shell]
    manager = shell.magics_manager
    free = {kind: [name for name in NAMES if name not in manager.magics[kind]] for kind in KINDS}
    if not free["cell"]:
        raise RuntimeError("both %%hermes and %%hermeslab are taken by other extensions; unload one of them first")
    settings = Hermes(parent=shell)
    chat = NotebookChat(settings)
    magics = HermesMagics(chat)
    registered: list[tuple[str, str]] = []
    for kind, function in (("cell", magics.cell), ("line", magics.line)):
        for name in free[kind]:
            manager.register_function(function, magic_kind=kind, magic_name=name)
            registered.append((kind, name))
    taken = [("%%" if kind == "cell" else "%") + name for kind in KINDS for name in NAMES if name not in free[kind]]
    shell.configurables.append(settings)
    relay = InterruptRelay(chat.interrupt_soon)
    relay.attach(getattr(shell, "kernel", None))  # only an ipykernel has the hooks; elsewhere Ctrl-C reaches the cell
    _loaded[shell] = LoadedExtension(settings, chat, magics, registered, relay)
    if taken:
        verb = "is" if len(taken) == 1 else "are"
        print(f"hermeslab: {', '.join(taken)} {verb} taken by another extension; "
              f"use %%hermeslab and %hermeslab here", file=sys.stderr)
    return _loaded[shell]


def unload_ipython_extension(shell: Any) -> None:
    """Remove the magics and settings, stop a running turn and release the runtime."""
    loaded = _loaded.pop(shell, None)
    if loaded is None:
        return
    manager = shell.magics_manager
    for kind, name in loaded.registered:
        manager.magics[kind].pop(name, None)
        if getattr(manager.user_magics, name, None) is not None:
            delattr(manager.user_magics, name)
    if loaded.settings in shell.configurables:
        shell.configurables.remove(loaded.settings)
    loaded.relay.detach()
    loaded.chat.close()


def current_chat(shell: Any = None) -> NotebookChat:
    """The chat of ``shell`` (default: the running IPython), to await, stop or inspect from code."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    loaded = _loaded.get(shell) if shell is not None else None
    if loaded is None:
        raise RuntimeError("the hermeslab extension is not loaded here; run %load_ext hermeslab first")
    return loaded.chat
