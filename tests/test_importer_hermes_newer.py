"""Hermes state.db files of releases after 0.19, built with the columns those releases write.

No release after 0.19 is installable here (PyPI stops at 0.19.0), so these
files are written by hand after hermes-agent's own code at commit 04c18865:
system prompts kept once in ``system_prompts`` by hash, a rotation whose child
holds the handoff and then clones of the parent's concurrent tail
(``publish_compression_child``), a reset child marked ``_reset_from``, rows
archived in place, and a background-review turn some builds persisted.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.eval.importers import import_paths
from hermeslab.eval.importers.hermes_state import import_hermes_state, without_review_harness
from hermeslab.recordings import validate_recording

PROMPT = "You are Hermes, a newer release."


def call(call_id: str, path: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "read_file",
                                                           "arguments": json.dumps({"path": path})}}


def exchange(i: int) -> list[dict]:
    return [{"role": "user", "content": f"read part {i}"},
            {"role": "assistant", "content": "", "tool_calls": [call(f"c{i}", f"part{i}.txt")]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"part {i} says {i * 7}"},
            {"role": "assistant", "content": f"Part {i} read."}]


CONVERSATION = [m for i in range(6) for m in exchange(i)]
REVIEW = [{"role": "user", "content": "Review the conversation above and update the skill library."},
          {"role": "assistant", "content": "", "tool_calls": [call("rv1", "skills.md")]},
          {"role": "tool", "tool_call_id": "rv1", "content": "no skills"}]
SUMMARY = {"role": "user", "content": "[CONTEXT COMPACTION] Parts 0 to 2 were read; their numbers are 0, 7, 14."}


def _db(path: Path) -> Path:
    with sqlite3.connect(path) as con:
        con.executescript("""
            CREATE TABLE system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
            CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, model TEXT, model_config TEXT,
                system_prompt TEXT, system_prompt_hash TEXT, parent_session_id TEXT, started_at REAL NOT NULL,
                ended_at REAL, end_reason TEXT, title TEXT, session_key TEXT, input_tokens INTEGER,
                output_tokens INTEGER);
            CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT,
                tool_call_id TEXT, tool_calls TEXT, active INTEGER NOT NULL DEFAULT 1,
                compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT);
        """)
        con.execute("INSERT INTO system_prompts VALUES ('h1', ?)", (PROMPT,))
        sessions = [("r1", None, 1.0, "compression"), ("r2", "r1", 2.0, None),
                    ("z1", "r2", 3.0, None)]
        for sid, parent, started, reason in sessions:
            config = json.dumps({"_reset_from": "r2"}) if sid == "z1" else None
            con.execute("INSERT INTO sessions (id, source, model, model_config, system_prompt_hash, "
                        "parent_session_id, started_at, end_reason, session_key) VALUES (?, 'cli', 'm', ?, ?, ?, ?, "
                        "?, 'k')", (sid, config, "h1" if sid == "r1" else None, parent, started, reason))

        def add(sid: str, messages: list[dict], active: int = 1, compacted: int = 0) -> None:
            for m in messages:
                con.execute("INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, active, "
                            "compacted) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (sid, m["role"], m["content"], m.get("tool_call_id"),
                             json.dumps(m["tool_calls"]) if "tool_calls" in m else None, active, compacted))

        add("r1", CONVERSATION[:8] + REVIEW + CONVERSATION[8:12])
        # The child: the handoff (summary, then the kept recent exchange), then clones of r1's tail.
        add("r2", [SUMMARY] + CONVERSATION[8:12] + CONVERSATION[10:12])
        # An in-place compaction of r2 later: its rows so far are archived, the compacted list is active.
        add("r2", CONVERSATION[12:20], active=0, compacted=1)
        add("r2", [SUMMARY, *CONVERSATION[16:20]])
        add("r2", CONVERSATION[20:])
        add("z1", exchange(9))
    return path


def test_a_newer_lineage_is_its_original_transcript(tmp_path):
    db = _db(tmp_path / "state.db")
    recordings = {r.id: r for r in import_hermes_state(db)}
    assert sorted(recordings) == ["r1", "z1"]
    conversation = recordings["r1"]
    assert conversation.messages == [{"role": "system", "content": PROMPT}] + CONVERSATION
    assert conversation.meta["lineage"] == ["r1", "r2"]
    assert conversation.meta["left_out"]["review_harness"] == len(REVIEW)
    assert conversation.meta["compressions"] == 2 and validate_recording(conversation.to_dict()) == []
    assert recordings["z1"].meta["lineage"] == ["z1"]


def test_the_cli_path_takes_the_newer_file_by_detection(tmp_path):
    report = import_paths([_db(tmp_path / "state.db")])
    assert [r.id for r in report.recordings] == ["r1", "z1"] and not report.skipped


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["prompt", "review", "reply", "call", "tool"]), max_size=12))
def test_dropping_review_turns_never_leaves_a_call_or_result_alone(shape):
    messages, open_calls = [], []
    for number, kind in enumerate(shape):
        if kind == "prompt":
            messages.append({"role": "user", "content": f"question {number}"})
        elif kind == "review":
            messages.append({"role": "user", "content": REVIEW[0]["content"]})
        elif kind == "reply":
            messages.append({"role": "assistant", "content": f"answer {number}"})
        elif kind == "call":
            messages.append({"role": "assistant", "content": "", "tool_calls": [call(f"k{number}", "x")]})
            open_calls.append(f"k{number}")
        elif open_calls:
            messages.append({"role": "tool", "tool_call_id": open_calls.pop(0), "content": "ok"})
    kept, dropped = without_review_harness(messages)
    assert len(kept) + dropped == len(messages)
    assert not any(m["content"].startswith("Review the conversation above") for m in kept)
    issued = {c["id"] for m in kept for c in m.get("tool_calls", [])}
    answered = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    before = {c["id"] for m in messages for c in m.get("tool_calls", [])}
    assert answered <= issued and (before - {m["tool_call_id"] for m in messages if m["role"] == "tool"}) >= (
        issued - answered)


def test_a_session_stopped_while_a_tool_ran_is_taken_without_the_unanswered_call(tmp_path):
    """Real state.db files end this way when the user stops a turn mid-tool: the call's result was never logged."""
    db = _db(tmp_path / "state.db")
    with sqlite3.connect(db) as con:
        con.execute("INSERT INTO messages (session_id, role, content, tool_calls) VALUES ('z1', 'assistant', "
                    "'Reading the last part.', ?)", (json.dumps([call("late", "part10.txt")]),))
    report = import_paths([db])
    assert not report.skipped
    stopped = {r.id: r for r in report.recordings}["z1"]
    assert stopped.messages[-1] == {"role": "assistant", "content": "Reading the last part."}
    assert stopped.meta["left_out"]["unanswered_calls"] == 1 and validate_recording(stopped.to_dict()) == []
