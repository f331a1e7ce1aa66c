"""benchmarks/real_server_check.py against the local server answering as real servers do.

The script is what a researcher runs against llama.cpp or vLLM; here it runs
against the personalities that model them, so a check that cannot pass (or
cannot fail) is found before anyone points it at a real endpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hermeslab.providers import LocalServer, OfflineModel

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_server_check.py"
CHECKS = ["ab", "chat", "compression", "oversized_message", "server_overflow", "stream", "tools"]


def run_check(url: str, *extra: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, str(SCRIPT), url, "--model", "hermeslab-offline", "--out", "-", *extra],
                          capture_output=True, text=True, timeout=600)
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("personality", ["llama-cpp-python", "vllm"])
def test_every_check_passes_against_a_server_that_enforces_its_window(personality):
    server = LocalServer(OfflineModel(), personality=personality, context_window=8_192)
    try:
        code, report = run_check(server.start(), "--context-length", "8192")
    finally:
        server.stop()
    assert report["failed"] == [], json.dumps(report["checks"], indent=1)[:3000]
    assert code == 0 and report["passed"] == CHECKS
    assert "overflow" in report["checks"]["server_overflow"]["compressions"]
    assert report["load_before"] and report["process_cpu_seconds"] > 0


def test_a_server_that_never_refuses_fails_the_overflow_check_and_says_so():
    """With no window of its own the server never overflows, so the check must not pass by accident."""
    server = LocalServer(OfflineModel())
    try:
        code, report = run_check(server.start(), "--only", "server_overflow", "--only", "chat")
    finally:
        server.stop()
    assert code == 1 and report["failed"] == ["server_overflow"] and report["passed"] == ["chat"]
