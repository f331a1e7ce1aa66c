"""The request loop of a reference worker: JSON lines in, one JSON line out per request.

Each worker runs as ``python -I <its folder>`` under another project's Python,
where hermeslab is not installed, so this module uses the standard library
only and the workers load it by adding its folder to their import path. One
request per line on stdin, ``{"id", "op", "args"}``; one reply per line,
``{"id", "ok": true, "result"}`` or ``{"id", "ok": false, "error",
"traceback"}``. A bad request is answered with an error and the loop reads
on; it ends when stdin closes.
"""

from __future__ import annotations

import io
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO


def claim_reply_stream() -> TextIO:
    """Keep the real stdout for replies and send everything else written there to stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(reply_fd, "wb"), encoding="utf-8", write_through=True)


def refuse_provider_keys(worker: str) -> None:
    """Refuse to start where a provider key could reach the other project's model client."""
    keys = sorted(name for name in os.environ if name.endswith("_API_KEY"))
    if keys:
        raise SystemExit(f"{worker}: remove provider keys from the environment first: {', '.join(keys)}")


def serve(replies: TextIO, handlers: dict[str, Callable[[dict], Any]]) -> None:
    """Answer each request on stdin with ``handlers[op](args)`` until stdin closes; every failure is answered."""
    expected = " or ".join(handlers)
    for line in io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"):
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op, args = request.get("op"), request.get("args") or {}
            handler = handlers.get(op) if isinstance(op, str) else None
            if handler is None:
                raise ValueError(f"unknown op {op!r}; expected {expected}")
            reply = {"id": request_id, "ok": True, "result": handler(args)}
        except Exception as exc:  # noqa: BLE001 - every failure is answered, never fatal
            reply = {"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
