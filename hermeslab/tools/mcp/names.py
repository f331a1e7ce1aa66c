"""The registry names of MCP tools: ``<server>__<tool>``, valid for every model API.

The OpenAI tool-name pattern has no ``.`` and server names never contain
``__``, so the boundary between server and tool stays visible in the name the
model calls.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_NAME = 64


def prefixed_name(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """``<server>__<tool>`` within the 64 characters of ``[A-Za-z0-9_-]`` that model APIs accept.

    Characters outside that set become ``_``. A name that is too long, or
    already ``taken`` (two tool names that differ only in such characters),
    ends in ``-`` and a short hash of the original pair, so it stays stable
    across reconnects and distinct from its neighbours.
    """
    base = f"{server}__{_UNSAFE_NAME_CHARS.sub('_', tool) or 'tool'}"
    if len(base) <= _MAX_TOOL_NAME and base not in taken:
        return base
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
    for width in range(6, len(digest) + 1):
        suffix = f"-{digest[:width]}"
        name = base[:_MAX_TOOL_NAME - len(suffix)] + suffix
        if name not in taken:
            return name
    raise ValueError(f"no free tool name for {tool!r} of MCP server {server!r}")
