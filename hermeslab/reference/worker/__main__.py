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
from pathlib import Path

from reference_engine import ReferenceEngine
from request_protocol import build_handlers, serve

sys.path.append(str(Path(__file__).resolve().parents[1] / "worker_loop"))
from jsonl_worker_loop import claim_reply_stream, refuse_provider_keys  # noqa: E402


def require_isolation() -> None:
    """Refuse to start where a user config or a provider key could reach Hermes."""
    if not os.environ.get("HERMES_HOME"):
        raise SystemExit("reference worker: set HERMES_HOME to an empty directory before starting the worker")
    refuse_provider_keys("reference worker")


def main() -> int:
    replies = claim_reply_stream()
    require_isolation()
    handlers = build_handlers(ReferenceEngine())
    requests = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    serve(requests, replies, handlers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
