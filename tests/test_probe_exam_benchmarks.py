"""The probe exam's two benchmark scripts on tiny inputs: the perfect-reader run over recordings, and the run
against a server (here the local offline server answering as llama-server does, so no real server is needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hermeslab.providers import LocalServer, OfflineModel

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"


def last_json(*argv: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, *argv, "--out", "-"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_perfect_reader_benchmark_checks_its_controls_and_its_cache(tmp_path):
    code, report = last_json(str(ROOT / "benchmarks" / "probe_exam.py"), "--datasets", str(tmp_path),
                             "--limit", "3", "--windows", "6000", "--resamples", "100")
    assert code == 0
    assert report["ceiling"] == 1.0 and report["floor"] == 0.0
    assert report["second_run_cache_hit_share"] == 1.0 and report["second_run"]["calls_made"] == 0
    assert report["probes"] > 0 and report["sessions"] >= 1 and report["problem"] is None
    assert report["answerer"].startswith("perfect-reader") and report["judge"] and report["token_unit"]
    assert set(report["paired_ci"]["6000"]) >= {"overall"}
    assert report["load_before"] and report["process_cpu_seconds"] > 0


@pytest.mark.slow
def test_the_real_model_benchmark_reports_usable_answers_pace_and_the_servers_cache():
    server = LocalServer(OfflineModel(), personality="llama-server", context_window=8_192)
    try:
        code, report = last_json(str(ROOT / "benchmarks" / "exam_real_model.py"), server.start(), "--limit", "1",
                                 "--config", "seed", "--window", "6000", "--server-flags", "-c 8192")
    finally:
        server.stop()
    assert code == 0, report
    assert report["props"]["context_length"] == 8_192 and report["flags"] == "-c 8192"
    assert report["answerer_window"] == int(8_192 * 0.8)
    assert report["model"] == "hermeslab-offline" and report["answerer"].startswith("endpoint:hermeslab-offline")
    assert 0 <= report["usable_answer_share"] <= 1 and report["probes_per_second"] > 0
    assert report["prompt_tokens_sent"] >= report["prompt_tokens_evaluated"] > 0
    assert report["shared_context_calls"] > 0 and report["server_cached_prompt_share"] is not None
    assert report["calls_made"] > 0 and report["questions"] >= report["asked"]
