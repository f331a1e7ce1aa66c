"""Codex CLI rollouts: an excerpt of a real rollout, the older line shapes, and broken versions."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from hermeslab.eval.importers import detect, sample_of
from hermeslab.eval.importers.codex import FORMAT
from hermeslab.recordings import Recording
from tests.importer_props import broken_jsonl, read_all

SAMPLE = Path(__file__).parent / "fixtures" / "importers" / "codex" / "rollout-019e1625-excerpt.jsonl"
LINES = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
ITEMS = [line["payload"] for line in LINES if line["type"] == "response_item"]


def _write(tmp_path: Path, lines: list) -> Path:
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_real_rollout_is_its_response_items_with_the_instructions_first():
    assert detect(sample_of(SAMPLE)) is FORMAT
    (recording,) = read_all(FORMAT, SAMPLE)
    meta = LINES[0]["payload"]
    assert recording.id == f"codex/{meta['id']}" and recording.model == "gpt-5.5"
    assert recording.messages[0] == {"role": "system", "content": meta["base_instructions"]["text"]}
    assert recording.messages[1]["role"] == "system"  # the developer message
    calls = [c for m in recording.messages for c in m.get("tool_calls", [])]
    issued = [item for item in ITEMS if item["type"] in ("function_call", "custom_tool_call")]
    assert [c["id"] for c in calls] == [item["call_id"] for item in issued]
    assert [c["function"]["name"] for c in calls][-1] == "apply_patch"
    assert json.loads(calls[-1]["function"]["arguments"]) == {"input": issued[-1]["input"]}
    patched = next(m for m in recording.messages if m.get("tool_call_id") == issued[-1]["call_id"])
    assert patched["content"].startswith("Success. Updated the following files:")  # unwrapped from its JSON
    prompts = [m["content"] for m in recording.messages if m["role"] == "user"]
    assert prompts.count("show tools") == 1  # the item and the user_message event are one turn
    assert recording.meta["left_out"]["reasoning"] == sum(item["type"] == "reasoning" for item in ITEMS)


def test_a_prompt_kept_only_as_an_event_is_still_a_user_turn(tmp_path):
    lines = [line for line in LINES if not (line["type"] == "response_item" and line["payload"].get("role") == "user"
                                            and line["payload"]["content"][0]["text"] == "show tools")]
    (recording,) = read_all(FORMAT, _write(tmp_path, lines))
    (original,) = read_all(FORMAT, SAMPLE)
    assert recording.messages == original.messages


def test_a_compaction_is_left_out_and_its_place_kept(tmp_path):
    # The `compacted` line as Codex writes it (RolloutItem::Compacted: the summary and the history it replaced).
    cut = next(i for i, line in enumerate(LINES) if line["type"] == "event_msg"
               and line["payload"]["type"] == "task_complete") + 1
    compacted = {"timestamp": "2026-05-11T10:40:00.000Z", "type": "compacted",
                 "payload": {"message": "Summary of the work so far.", "replacement_history": []}}
    (recording,) = read_all(FORMAT, _write(tmp_path, LINES[:cut] + [compacted] + LINES[cut:]))
    (original,) = read_all(FORMAT, SAMPLE)
    assert recording.messages == original.messages
    (point,) = recording.meta["compression_points"]
    assert recording.messages[point["at_message"]] == {"role": "user",
                                                       "content": "let's update the defailt context compart to 90 "
                                                                  "in env var"}


def test_an_older_rollout_of_bare_items_is_read(tmp_path):
    header = {"id": "old-session", "timestamp": "2025-05-01T10:00:00Z", "instructions": "Be careful."}
    lines = [header, {"record_type": "state"}] + ITEMS[1:8]
    path = _write(tmp_path, lines)
    assert detect(sample_of(path)) is FORMAT
    (recording,) = read_all(FORMAT, path)
    assert recording.id == "codex/old-session" and recording.messages[0] == {"role": "system",
                                                                             "content": "Be careful."}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(broken_jsonl(LINES))
def test_a_broken_rollout_gives_a_whole_conversation_or_a_reason(tmp_path, data):
    path = tmp_path / "broken.jsonl"
    path.write_bytes(data)
    assert sum(isinstance(o, Recording) for o in read_all(FORMAT, path)) <= 1
