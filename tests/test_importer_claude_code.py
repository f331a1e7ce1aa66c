"""Claude Code session logs: a real session with a compaction, its compaction agent's log, and broken versions."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from hermeslab.eval.importers import Skip, detect, import_paths, sample_of
from hermeslab.eval.importers.claude_code import FORMAT
from hermeslab.recordings import Recording
from tests.importer_props import broken_jsonl, read_all

FIXTURES = Path(__file__).parent / "fixtures" / "importers" / "claude-code"
SESSION = FIXTURES / "258c7280-excerpt.jsonl"
ROWS = [json.loads(line) for line in SESSION.read_text(encoding="utf-8").splitlines()]
SESSION_ID = "258c7280-ae70-4798-800f-63464d01a85d"


def _blocks(kind: str) -> list[dict]:
    return [block for row in ROWS if isinstance(row.get("message", {}).get("content"), list)
            for block in row["message"]["content"] if block.get("type") == kind]


def test_the_real_session_is_what_the_user_the_model_and_the_tools_said():
    assert detect(sample_of(SESSION)) is FORMAT
    (recording,) = read_all(FORMAT, SESSION)
    assert recording.id == f"claude-code/{SESSION_ID}" and recording.model.startswith("claude-")
    messages = recording.messages
    first_prompt = next(row for row in ROWS if row["type"] == "user")["message"]["content"]
    assert messages[0] == {"role": "user", "content": first_prompt}
    calls = [call for m in messages for call in m.get("tool_calls", [])]
    assert [c["id"] for c in calls] == [block["id"] for block in _blocks("tool_use")]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [b["input"] for b in _blocks("tool_use")]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [
        block["tool_use_id"] for block in _blocks("tool_result")]
    texts = [block["text"] for block in _blocks("text")]
    assert "\n".join(m["content"] for m in messages if m["role"] == "assistant" and m["content"]) == "\n".join(texts)


def test_the_compaction_is_left_out_and_its_place_kept():
    (recording,) = read_all(FORMAT, SESSION)
    assert not any("continued from a previous conversation" in m["content"] for m in recording.messages)
    (point,) = recording.meta["compression_points"]
    boundary = next(row for row in ROWS if row.get("subtype") == "compact_boundary")
    assert point == {"at_message": point["at_message"], "trigger": "auto",
                     "tokens_before": boundary["compactMetadata"]["preTokens"]}
    before = recording.messages[point["at_message"] - 1]
    assert before["role"] == "tool"  # the excerpt's first part ends with a tool result
    left_out = recording.meta["left_out"]
    assert left_out["compaction_summaries"] == 1 and left_out["thinking"] == len(_blocks("thinking")) == 2
    assert recording.meta["broken_links"] == 1 and recording.meta["versions"] == ["2.1.39"]


def test_the_compaction_agents_log_is_skipped_with_the_reason():
    path = FIXTURES / "agent-acompact-fffbd0.jsonl"
    assert detect(sample_of(path)) is FORMAT
    assert read_all(FORMAT, path) == [
        Skip(str(path), "Claude Code's compaction call (agent acompact-fffbd0), not a conversation of its own")]


def test_an_abandoned_branch_is_left_out(tmp_path):
    prompt_index = next(i for i, row in enumerate(ROWS) if row["type"] == "user")
    prompt = ROWS[prompt_index]
    abandoned = [dict(prompt, uuid="abandoned-prompt", message={"role": "user", "content": "delete everything"}),
                 {**next(row for row in ROWS if row["type"] == "assistant"), "uuid": "abandoned-reply",
                  "parentUuid": "abandoned-prompt",
                  "message": {"id": "msg_abandoned", "role": "assistant", "model": "claude-x",
                              "content": [{"type": "text", "text": "Deleting."}]}}]
    rows = ROWS[:prompt_index] + abandoned + ROWS[prompt_index:]
    path = tmp_path / "rewound.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (recording,) = read_all(FORMAT, path)
    (original,) = read_all(FORMAT, SESSION)
    assert recording.messages == original.messages and recording.meta["left_out"]["other_branches"] == 2


def test_a_projects_folder_gives_the_session_and_lists_the_compaction_agent(tmp_path):
    project = tmp_path / "-home-user-project"
    (project / SESSION_ID / "subagents").mkdir(parents=True)
    (project / f"{SESSION_ID}.jsonl").write_text(SESSION.read_text())
    (project / SESSION_ID / "subagents" / "agent-acompact-fffbd0.jsonl").write_text(
        (FIXTURES / "agent-acompact-fffbd0.jsonl").read_text())
    report = import_paths([tmp_path])
    assert [r.id for r in report.recordings] == [f"claude-code/{SESSION_ID}"]
    assert [s.reason.split(" (")[0] for s in report.skipped] == ["Claude Code's compaction call"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(broken_jsonl(ROWS))
def test_a_broken_log_gives_a_whole_conversation_or_a_reason(tmp_path, data):
    path = tmp_path / "broken.jsonl"
    path.write_bytes(data)
    outcomes = read_all(FORMAT, path)
    assert sum(isinstance(o, Recording) for o in outcomes) <= 1
