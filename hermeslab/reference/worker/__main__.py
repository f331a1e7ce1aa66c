"""The reference worker's entry point: ``python -I <this directory>`` under the Hermes virtualenv's Python.

Before Hermes is imported, the real stdout is kept for replies and everything
else written there goes to stderr, so stdout carries replies only; then the
worker refuses to start where a user config or a provider key could reach
Hermes, builds the engine and serves requests until stdin closes.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO

from reference_engine import ReferenceEngine
from request_protocol import build_handlers, serve


def claim_reply_stream() -> TextIO:
    """Keep the real stdout for replies and send everything else written there to stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(reply_fd, "wb"), encoding="utf-8", write_through=True)


def require_isolation() -> None:
    """Refuse to start where a user config or a provider key could reach Hermes."""
    if not os.environ.get("HERMES_HOME"):
        raise SystemExit("reference worker: set HERMES_HOME to an empty directory before starting the worker")
    keys = sorted(name for name in os.environ if name.endswith("_API_KEY"))
    if keys:
        raise SystemExit(f"reference worker: remove provider keys from the environment first: {', '.join(keys)}")


def main() -> int:
    replies = claim_reply_stream()
    require_isolation()
    handlers = build_handlers(ReferenceEngine())
    requests = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    serve(requests, replies, handlers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
