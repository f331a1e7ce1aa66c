"""The OpenHands reference worker: ``python -I <this directory>`` under an OpenHands virtualenv's Python.

Its one argument names the family to drive, ``sdk`` or ``legacy``. It
imports only the standard library, OpenHands and its sibling modules (their
names are chosen not to collide with OpenHands' own top-level modules). The
real stdout is kept for replies and anything else written there goes to
stderr. One JSON request per line on stdin, ``{"id", "op", "args"}``; one
reply per line, ``{"id", "ok": true, "result"}`` or ``{"id", "ok": false,
"error", "traceback"}``. A bad request is answered with an error and the
worker reads on; it stops when stdin closes.
"""

from __future__ import annotations

import io
import json
import os
import sys
import traceback
from typing import Any, TextIO


def claim_reply_stream() -> TextIO:
    """Keep the real stdout for replies and send everything else written there to stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(reply_fd, "wb"), encoding="utf-8", write_through=True)


def require_isolation() -> None:
    """Refuse to start where a provider key could reach OpenHands' model client."""
    keys = sorted(name for name in os.environ if name.endswith("_API_KEY"))
    if keys:
        raise SystemExit(f"openhands worker: remove provider keys from the environment first: {', '.join(keys)}")


def load_family(name: str) -> Any:
    """The stepping module for OpenHands family ``name``: ``sdk`` or ``legacy`` (openhands-ai 0.62)."""
    if name == "sdk":
        import oh_sdk_steps

        return oh_sdk_steps
    if name == "legacy":
        import oh_legacy_steps

        return oh_legacy_steps
    raise SystemExit(f"openhands worker: the first argument must be sdk or legacy, got {name!r}")


def main() -> int:
    replies = claim_reply_stream()
    require_isolation()
    family = load_family(sys.argv[1] if len(sys.argv) > 1 else "")
    for line in io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"):
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op, args = request.get("op"), request.get("args") or {}
            if op == "hello":
                result = family.describe()
            elif op == "replay":
                result = [family.replay(session["messages"], args["condenser"], args["params"])
                          for session in args["sessions"]]
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
