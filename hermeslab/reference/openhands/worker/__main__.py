"""The OpenHands reference worker: ``python -I <this directory>`` under an OpenHands virtualenv's Python.

Its one argument names the family to drive, ``sdk`` or ``legacy``. It
imports only the standard library, OpenHands, its sibling modules (their
names are chosen not to collide with OpenHands' own top-level modules) and the
shared request loop (``../../worker_loop``, standard library only), which
answers ``hello`` and ``replay`` requests until stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[2] / "worker_loop"))
from jsonl_worker_loop import claim_reply_stream, refuse_provider_keys, serve  # noqa: E402


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
    refuse_provider_keys("openhands worker")
    family = load_family(sys.argv[1] if len(sys.argv) > 1 else "")
    serve(replies, {
        "hello": lambda args: family.describe(),
        "replay": lambda args: [family.replay(session["messages"], args["condenser"], args["params"])
                                for session in args["sessions"]],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
