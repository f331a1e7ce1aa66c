"""benchmarks/real_server_check.py against the local server answering as real servers do.

The script is what a researcher runs against llama.cpp or vLLM; here it runs
against the personalities that model them, so a check that cannot pass (or
cannot fail) is found before anyone points it at a real endpoint.
"""

from __future__ import annotations

import json
import socket
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


def closed_port() -> int:
    """A loopback port nothing listens on (bound once to learn a free one, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_ab_check_fails_against_a_closed_port():
    """Nothing listens: every summary falls back, so the A/B check must fail rather than pass on replays alone."""
    code, report = run_check(f"http://127.0.0.1:{closed_port()}/v1", "--only", "ab")
    ab = report["checks"]["ab"]
    assert code == 1 and report["failed"] == ["ab"], ab
    assert ab["cells_failed"] == ab["cells"] > 0 and ab["summaries"] == 0
    assert report["server"] is None


def test_the_ab_check_reaches_a_one_slot_llama_server_one_request_at_a_time():
    """The check's summaries are asked of the server, counted there (``/slots``), and never two at once."""
    server = LocalServer(OfflineModel(), personality="llama-server", context_window=8_192)
    try:
        code, report = run_check(server.start(), "--only", "ab", "--server-flags", "-np 1")
    finally:
        server.stop()
    ab = report["checks"]["ab"]
    assert code == 0 and report["passed"] == ["ab"], ab
    assert ab["summaries"] > 0 and ab["server_tasks_served"] > 0
    assert server.max_in_flight == 1
    # Said up front and beside the result: the summary calls expected, and the settings changed from the preset.
    assert ab["expected"]["summary_calls"] > 0 and ab["expected"]["seconds"] is None  # no earlier check timed it
    assert ab["deviations_from_preset"]["compression.summary_max_tokens"]["used"] == 128
    assert ab["deviations_from_preset"]["model.context_length"] == {"preset": 8192, "used": 4096}
    assert report["server"]["total_slots"] == 1 and report["server_flags"] == "-np 1"
    assert report["server"]["model_file"] == "hermeslab-offline"  # the model's file name, never where it lives
