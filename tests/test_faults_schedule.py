"""Fault schedules: exact indices, seeded rates, validation, files, and `hermeslab serve --faults`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import openai
import pytest

from hermeslab.providers.faults import FAULT_KINDS, FaultRule, FaultSchedule


def test_exact_indices_win_and_other_calls_are_untouched():
    schedule = FaultSchedule.from_dict({"faults": [{"kind": "rate_limit", "at": [0, 3], "retry_after": 2},
                                                   {"kind": "auth", "at": [3, 5]}]})
    picked = {i: rule.kind for i in range(8) if (rule := schedule.fault_for(i)) is not None}
    assert picked == {0: "rate_limit", 3: "rate_limit", 5: "auth"}
    assert schedule.fault_for(0).retry_after == 2.0


def test_rates_are_seeded_per_call_index_and_close_to_the_asked_share():
    schedule = FaultSchedule.from_dict({"seed": 11, "faults": [{"kind": "server_error", "rate": 0.2},
                                                                {"kind": "empty", "rate": 0.1}]})
    picks = [schedule.fault_for(i) for i in range(4000)]
    share = {kind: sum(1 for p in picks if p is not None and p.kind == kind) / 4000
             for kind in ("server_error", "empty")}
    assert abs(share["server_error"] - 0.2) < 0.025 and abs(share["empty"] - 0.1) < 0.02
    again = [schedule.fault_for(i) for i in reversed(range(4000))][::-1]
    assert again == picks
    hit = [{i for i in range(200) if FaultSchedule.single("auth", rate=0.2, seed=seed).fault_for(i)} for seed in (1, 2)]
    assert hit[0] != hit[1]


def test_single_builds_a_one_kind_schedule():
    schedule = FaultSchedule.single("slow", at=(1,), delay=0.5)
    assert schedule.fault_for(1) == FaultRule("slow", at=frozenset({1}), delay=0.5)
    assert schedule.fault_for(0) is None


@pytest.mark.parametrize("data, message", [
    ({"faults": [{"kind": "teapot", "at": [0]}]}, "unknown fault kind 'teapot'"),
    ({"faults": [{"kind": "empty", "rate": 1.5}]}, "rate must be between 0 and 1"),
    ({"faults": [{"kind": "empty", "rate": 0.7}, {"kind": "auth", "rate": 0.5}]}, "rates add up to 1.200"),
    ({"faults": [{"kind": "empty", "retry_after": 3, "at": [0]}]}, "option 'retry_after' does not apply"),
    ({"faults": [{"kind": "server_error", "available": 5, "at": [0]}]}, "option 'available' does not apply"),
    ({"faults": [{"kind": "output_cap_openai", "available": 0, "at": [0]}]}, "window and available >= 1"),
    ({"faults": [{"kind": "empty", "at": 3}]}, "'at' must be a list of call indices"),
    ({"faults": [{"kind": "empty", "at": [-1]}]}, "'at' must list call indices"),
    ({"faults": [{"kind": "empty"}]}, "give call indices"),
    ({"faults": [{"at": [1]}]}, "expected a mapping with a 'kind'"),
    ({"faults": [], "speed": 2}, "unknown key 'speed'"),
    ({"seed": "x", "faults": []}, "'seed' must be an integer"),
    ({"faults": {"kind": "empty"}}, "'faults' must be a list"),
    ([1, 2], "a fault schedule is a mapping"),
])
def test_bad_schedules_are_refused_with_the_reason(data, message):
    with pytest.raises(ValueError, match=message):
        FaultSchedule.from_dict(data)


def test_schedules_load_from_yaml_and_json_and_errors_name_the_file(tmp_path):
    (tmp_path / "f.yaml").write_text("seed: 3\nfaults:\n  - {kind: overflow_vllm, at: [2], window: 4096}\n")
    (tmp_path / "f.json").write_text(json.dumps({"faults": [{"kind": "stream_cut", "rate": 0.5}]}))
    assert FaultSchedule.from_file(tmp_path / "f.yaml").fault_for(2).window == 4096
    assert FaultSchedule.from_file(tmp_path / "f.json").rules[0].rate == 0.5
    (tmp_path / "bad.yaml").write_text("faults: [{kind: nope, at: [0]}]\n")
    with pytest.raises(ValueError, match=r"bad.yaml: faults\[0\]: unknown fault kind 'nope'"):
        FaultSchedule.from_file(tmp_path / "bad.yaml")
    with pytest.raises(ValueError, match="missing.yaml: cannot read"):
        FaultSchedule.from_file(tmp_path / "missing.yaml")


def test_every_kind_is_documented():
    assert len(FAULT_KINDS) == 29 and all(text for text in FAULT_KINDS.values())


def _serve(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "hermeslab.cli", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_the_serve_command_injects_the_faults_of_a_file(tmp_path):
    (tmp_path / "faults.yaml").write_text("faults:\n  - {kind: rate_limit, at: [0], retry_after: 3}\n")
    process = _serve(["--faults", str(tmp_path / "faults.yaml")])
    try:
        line = process.stdout.readline()
        assert "with the faults of" in line, process.stderr.read() if process.poll() is not None else line
        url = line.split(" served at ")[1].split(" ")[0]
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=10)
        with pytest.raises(openai.RateLimitError) as excinfo:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert excinfo.value.response.headers["retry-after"] == "3"
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Who are you?"}])
        assert "offline model" in answer.choices[0].message.content
        client.close()
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()
        process.stderr.close()


def test_the_serve_command_refuses_a_bad_fault_file(tmp_path):
    (tmp_path / "faults.yaml").write_text("faults:\n  - {kind: rate_limit, rate: 2}\n")
    process = _serve(["--faults", str(tmp_path / "faults.yaml")])
    started = time.monotonic()
    _, err = process.communicate(timeout=30)
    assert process.returncode != 0 and time.monotonic() - started < 30
    assert "faults.yaml: faults[0]: fault rate_limit: rate must be between 0 and 1" in err
