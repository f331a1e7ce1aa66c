"""SWE-agent trajectories: two real ones from SWE-agent's repository, and broken versions of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from hermeslab.eval.importers import detect, sample_of
from hermeslab.eval.importers.sweagent import FORMAT
from tests.importer_props import broken_json, read_all

FIXTURES = Path(__file__).parent / "fixtures" / "importers" / "swe-agent"
OLD = FIXTURES / "sweagenttestrepo-1c2844.traj"
NEW = FIXTURES / "marshmallow-1867-excerpt.traj"


@pytest.mark.parametrize("path", [OLD, NEW], ids=["repr-lists", "json-lists"])
def test_a_real_trajectory_is_its_history_with_every_call_answered(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert detect(sample_of(path)) is FORMAT
    (recording,) = read_all(FORMAT, path)
    assert [m["role"] for m in recording.messages] == [m["role"] for m in raw["history"]]
    assert [m["content"] for m in recording.messages] == [m["content"] for m in raw["history"]]
    calls = [c for m in recording.messages for c in m.get("tool_calls", [])]
    answers = [m["tool_call_id"] for m in recording.messages if m["role"] == "tool"]
    assert [c["id"] for c in calls] == answers and len(calls) == (len(raw["history"]) - 2) // 2
    assert recording.meta["exit_status"] == "submitted"


def test_the_old_files_repr_lists_give_the_calls_the_model_made():
    (recording,) = read_all(FORMAT, OLD)
    first = recording.messages[2]["tool_calls"][0]
    assert first["function"] == {"name": "find_file", "arguments": '{"file_name":"missing_colon.py"}'}
    assert recording.messages[3]["tool_call_id"] == first["id"]
    assert recording.meta["api_calls"] == 5 and recording.meta["tokens_sent"] == 7141


def test_the_model_comes_from_the_replay_config():
    (recording,) = read_all(FORMAT, NEW)
    assert recording.model == "gpt-4o" and recording.id == "swe-agent/marshmallow-1867-excerpt"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(broken_json(json.loads(NEW.read_text(encoding="utf-8"))))
def test_a_broken_trajectory_is_taken_whole_or_skipped_with_a_reason(tmp_path, broken):
    path = tmp_path / "broken.traj"
    path.write_text(json.dumps(broken))
    assert len(read_all(FORMAT, path)) == 1
