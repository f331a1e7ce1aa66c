"""mini-swe-agent trajectories: a real run from mini-swe-agent's own tests, and broken versions of it."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from hermeslab.eval.importers import detect, import_paths, sample_of
from hermeslab.eval.importers.minisweagent import FORMAT
from hermeslab.recordings import Recording
from tests.importer_props import broken_json, read_all

SAMPLE = Path(__file__).parent / "fixtures" / "importers" / "mini-swe-agent" / "github_issue.traj.json"
RAW = json.loads(SAMPLE.read_text(encoding="utf-8"))


def test_the_real_trajectory_is_its_whole_conversation():
    assert detect(sample_of(SAMPLE)) is FORMAT
    (recording,) = read_all(FORMAT, SAMPLE)
    assert recording.id == "mini-swe-agent/github_issue"
    assert recording.messages == [{"role": m["role"], "content": m["content"]} for m in RAW]
    assert recording.messages[0]["role"] == "system" and recording.messages[-1]["content"].startswith("diff --git")


def test_the_v2_object_shape_keeps_tool_calls_and_leaves_the_exit_record_out(tmp_path):
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    document = {
        "info": {"mini_version": "2.4.6", "model_stats": {"instance_cost": 0.5, "api_calls": 1},
                 "config": {"model": {"model_name": "anthropic/claude-sonnet-4-5"}}},
        "messages": RAW[:2] + [
            {"role": "assistant", "content": None, "tool_calls": [call], "extra": {"cost": 0.5}},
            {"role": "tool", "tool_call_id": "call_1", "content": "<returncode>0</returncode>", "extra": {}},
            {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted", "submission": ""}}],
        "trajectory_format": "mini-swe-agent-1.1"}
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(document))
    assert detect(sample_of(path)) is FORMAT
    (recording,) = read_all(FORMAT, path)
    assert recording.messages[2:] == [{"role": "assistant", "content": "", "tool_calls": [call]},
                                      {"role": "tool", "tool_call_id": "call_1", "content": "<returncode>0</returncode>"}]
    assert recording.model == "anthropic/claude-sonnet-4-5"
    assert recording.meta["exit_status"] == "Submitted" and recording.meta["api_calls"] == 1


def test_a_folder_of_runs_names_each_by_its_file(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.traj.json").write_text(SAMPLE.read_text())
    report = import_paths([tmp_path])
    assert [r.id for r in report.recordings] == ["mini-swe-agent/a", "mini-swe-agent/b"] and not report.skipped


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(broken_json(RAW))
def test_a_broken_trajectory_is_taken_whole_or_skipped_with_a_reason(tmp_path, broken):
    path = tmp_path / "broken.traj.json"
    path.write_text(json.dumps(broken))
    outcomes = read_all(FORMAT, path)
    assert len(outcomes) == 1
    if isinstance(outcomes[0], Recording):
        assert all(isinstance(m, dict) for m in broken)
