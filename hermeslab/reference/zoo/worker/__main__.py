"""The zoo reference worker: ``python -I <this directory> AGENT`` under that agent's virtualenv's Python.

``AGENT`` names a sibling module ``<AGENT>_steps`` that imports the agent's
own code and offers ``describe()`` and ``replay(messages, params)``. Only the
standard library, the agent's package and these siblings are imported. The
real stdout carries replies; anything else written there goes to stderr. One
JSON request per line on stdin, ``{"id", "op", "args"}``; one reply per line,
``{"id", "ok": true, "result"}`` or ``{"id", "ok": false, "error",
"traceback"}``. A bad request is answered with an error and the worker reads
on; it stops when stdin closes.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import sys
import traceback
from typing import TextIO


def claim_reply_stream() -> TextIO:
    """Keep the real stdout for replies and send everything else written there to stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(reply_fd, "wb"), encoding="utf-8", write_through=True)


def main() -> int:
    replies = claim_reply_stream()
    keys = sorted(name for name in os.environ if name.endswith("_API_KEY"))
    if keys:
        raise SystemExit(f"zoo worker: remove provider keys from the environment first: {', '.join(keys)}")
    agent = sys.argv[1] if len(sys.argv) > 1 else ""
    if not re.fullmatch(r"[a-z_]+", agent):
        raise SystemExit(f"zoo worker: the first argument must name an agent, got {agent!r}")
    steps = importlib.import_module(f"{agent}_steps")
    for line in io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"):
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op, args = request.get("op"), request.get("args") or {}
            if op == "hello":
                result = steps.describe()
            elif op == "replay":
                result = [steps.replay(session["messages"], args["params"]) for session in args["sessions"]]
            else:
                raise ValueError(f"unknown op {op!r}; expected hello or replay")
            reply = {"id": request_id, "ok": True, "result": result}
        except Exception as exc:  # noqa: BLE001 - every failure is answered, never fatal
            reply = {"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
