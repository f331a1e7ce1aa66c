"""The zoo reference worker: ``python -I <this directory> AGENT`` under that agent's virtualenv's Python.

``AGENT`` names a sibling module ``<AGENT>_steps`` that imports the agent's
own code and offers ``describe()`` and ``replay(messages, params)``. Only the
standard library, the agent's package, these siblings and the shared request
loop (``../../worker_loop``, standard library only) are imported; the loop
answers ``hello`` and ``replay`` requests until stdin closes.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2] / "worker_loop"))
from jsonl_worker_loop import claim_reply_stream, refuse_provider_keys, serve  # noqa: E402


def main() -> int:
    replies = claim_reply_stream()
    refuse_provider_keys("zoo worker")
    agent = sys.argv[1] if len(sys.argv) > 1 else ""
    if not re.fullmatch(r"[a-z_]+", agent):
        raise SystemExit(f"zoo worker: the first argument must name an agent, got {agent!r}")
    steps = importlib.import_module(f"{agent}_steps")
    serve(replies, {
        "hello": lambda args: steps.describe(),
        "replay": lambda args: [steps.replay(session["messages"], args["params"]) for session in args["sessions"]],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
