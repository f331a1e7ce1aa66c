"""SWE-agent's own history processor stepped over a recording, before each recorded assistant reply.

The messages arrive as ``{"key", "role", "content"}``, a tool result already
rendered as the user message SWE-agent's environment would send. The
distribution's package ``__init__`` imports the whole agent (docker, gym,
datasets), which its virtualenv leaves out because one of its declared
dependencies is not on the package index; the history processors need none of
it, so their module is loaded from the installed file by path. Before each
assistant reply the processor runs on the history so far, afresh, as SWE-agent
does before each query; an entry it hands back as a new object is one it
elided, recorded with the first number of its new text (the line count).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from typing import Any

DISTRIBUTION = "sweagent"
MODULE_FILE = "sweagent/agent/history_processors.py"
_MODULE: Any = None


def _processors() -> Any:
    global _MODULE
    if _MODULE is None:
        path = importlib.metadata.distribution(DISTRIBUTION).locate_file(MODULE_FILE)
        spec = importlib.util.spec_from_file_location("sweagent_history_processors", path)
        _MODULE = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_MODULE)
    return _MODULE


def describe() -> dict:
    return {"agent": DISTRIBUTION, "version": importlib.metadata.version(DISTRIBUTION)}


def _processor(n: int) -> Any:
    """The processor SWE-agent's config names: the class for n = 2 or 5, else ``LastNObservations(n)``."""
    registry = _processors().HistoryProcessor
    named = {2: "Last2Observations", 5: "Last5Observations"}.get(n)
    return registry.get(named) if named else registry.get("LastNObservations", n=n)


def replay(messages: list[dict], params: dict) -> list[dict]:
    processor = _processor(params["keep_last"])
    history = [{"role": m["role"], "content": m["content"]} for m in messages]
    steps, previous = [], []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        view = history[:index]
        elided = []
        for position, (old, new) in enumerate(zip(view, processor(view))):
            if old is not new:
                number = re.search(r"\d+", str(new.get("content", "")))
                elided.append([messages[position]["key"], int(number.group()) if number else -1])
        steps.append({"at": index, "compacted": elided != previous, "elided": elided})
        previous = elided
    return steps
