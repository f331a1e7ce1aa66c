"""OpenHands events: real trajectories from OpenHands' tests, the same events as a folder or an evaluation file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from hermeslab.eval.importers import detect, import_paths, sample_of
from hermeslab.eval.importers.openhands import FORMAT
from hermeslab.recordings import Recording
from tests.importer_props import broken_json, read_all

FIXTURES = Path(__file__).parent / "fixtures" / "importers" / "openhands"
NAMES = ["wrong_initial_state", "basic_interactions", "basic_gui_mode"]


def _events(name: str) -> list[dict]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _call_id(event: dict) -> str | None:
    return (event.get("tool_call_metadata") or {}).get("tool_call_id")


@pytest.mark.parametrize("name", NAMES)
def test_a_real_trajectory_is_what_the_user_the_model_and_the_tools_said(name):
    events = _events(name)
    path = FIXTURES / f"{name}.json"
    assert detect(sample_of(path)) is FORMAT
    (recording,) = read_all(FORMAT, path)
    assert recording.id == f"openhands/{name}" and recording.model.startswith(("claude-", "gpt-"))
    prompts = [e["args"]["content"] for e in events if e.get("action") == "message" and e["source"] == "user"]
    assert [m["content"] for m in recording.messages if m["role"] == "user"] == prompts
    observed = [e for e in events if "observation" in e and _call_id(e)]
    assert [m["tool_call_id"] for m in recording.messages if m["role"] == "tool"] == [_call_id(e) for e in observed]
    assert [m["content"] for m in recording.messages if m["role"] == "tool"] == [e["content"] for e in observed]
    finishes = sum(e.get("action") == "finish" for e in events)
    assert recording.meta["left_out"]["unanswered_calls"] == finishes


def test_a_bare_finish_keeps_what_it_said_to_the_user():
    (recording,) = read_all(FORMAT, FIXTURES / "basic_interactions.json")
    assert recording.messages[-1] == {"role": "assistant", "content": "All done! What's next on the agenda?"}


def test_an_events_folder_is_one_conversation(tmp_path):
    events_dir = tmp_path / "sessions" / "abc123" / "events"
    events_dir.mkdir(parents=True)
    for event in _events("wrong_initial_state"):
        (events_dir / f"{event['id']}.json").write_text(json.dumps(event))
    report = import_paths([tmp_path])
    (recording,) = report.recordings
    (original,) = read_all(FORMAT, FIXTURES / "wrong_initial_state.json")
    assert recording.id == "openhands/abc123" and recording.messages == original.messages
    assert report.taken[0].path == str(events_dir) and not report.skipped


def test_an_evaluation_output_gives_one_conversation_a_line_in_either_history_shape(tmp_path):
    events = _events("wrong_initial_state")
    null = {"source": "agent", "observation": "null", "content": "", "extras": {}}
    assert [e.get("action") for e in events][1::2] == ["read", "run", "read", "finish"]
    pairs = [[events[0], null]] + [[events[i], events[i + 1]] for i in (1, 3, 5)] + [[events[7], null]]
    lines = [{"instance_id": "repo__1", "history": events, "metadata": {"llm_config": {"model": "m1"}}},
             {"instance_id": "repo__2", "history": pairs}]
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert detect(sample_of(path)) is FORMAT
    first, second = read_all(FORMAT, path)
    assert (first.id, first.model, second.id) == ("openhands/repo__1", "m1", "openhands/repo__2")
    assert first.messages == second.messages


def test_a_condensation_is_left_out_and_its_place_kept(tmp_path):
    events = _events("basic_gui_mode")
    cut = next(i for i, e in enumerate(events) if e.get("action") == "edit")
    # Shapes of OpenHands' CondensationAction and AgentCondensationObservation (openhands/events).
    condensation = [{"id": 100, "source": "agent", "action": "condensation", "message": "Summary: files created",
                     "args": {"forgotten_event_ids": [7, 8], "summary": "files created", "summary_offset": 1}},
                    {"id": 101, "source": "agent", "observation": "condense", "content": "files created",
                     "extras": {}}]
    path = tmp_path / "condensed.json"
    path.write_text(json.dumps(events[:cut] + condensation + events[cut:]))
    (recording,) = read_all(FORMAT, path)
    (original,) = read_all(FORMAT, FIXTURES / "basic_gui_mode.json")
    assert recording.messages == original.messages
    assert recording.meta["compression_points"] == [{"at_message": 3, "event": 100}]
    assert recording.meta["left_out"]["condensation_summaries"] == 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(broken_json(_events("wrong_initial_state")))
def test_a_broken_trajectory_is_taken_whole_or_skipped_with_a_reason(tmp_path, broken):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    assert sum(isinstance(o, Recording) for o in read_all(FORMAT, path)) <= 1
