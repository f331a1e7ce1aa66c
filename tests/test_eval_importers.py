"""Importers: OpenAI chat JSONL, hermeslab's lab (against the agent's own turns), Hermes state.db (real Hermes code)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from hermeslab.cli import DEMO_FILES, DEMO_SCRIPT, main
from hermeslab.eval.importers import hermes_chains, import_hermes_state, import_openai_jsonl
from hermeslab.eval.recording import load_recordings, read_recordings
from hermeslab.providers import OfflineModel
from hermeslab.recordings import validate_recording
from hermeslab.recordings.lab import builtin_tool_schemas, import_lab, lab_chain
from hermeslab.reference.client import WORKER_DIR
from hermeslab.reference.venv import venv_python
from hermeslab.policies.loading import load_config
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab
from test_importers_gather import old_state_db
from tests.shared_data import hermes_venv

# ---------------------------------------------------------------- OpenAI chat JSONL


def _jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_openai_lines_become_recordings(tmp_path):
    fine_tuning = {"messages": [
        {"role": "system", "content": "You answer weather questions."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in"}, {"type": "text", "text": "Oslo?"}]},
        {"role": "assistant", "content": None, "tool_calls": [{k: v for k, v in CALL.items() if k != "type"}],
         "weight": 1},
        {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
        {"role": "assistant", "content": "Rain.", "refusal": None, "audio": None, "function_call": None,
         "annotations": [], "tool_calls": None},
    ], "tools": TOOLS, "parallel_tool_calls": False}
    bare = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    named = {"id": "conversation-7", "model": "gpt-4o", "messages": bare}
    path = _jsonl(tmp_path / "chats.jsonl", [fine_tuning, bare, named])
    recordings = import_openai_jsonl(path)
    first, second, third = list(recordings)
    assert recordings.problems == []
    assert [r.id for r in (first, second, third)] == ["chats/1", "chats/2", "conversation-7"]
    assert first.messages == [
        {"role": "system", "content": "You answer weather questions."},
        {"role": "user", "content": "Weather in\nOslo?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
        {"role": "assistant", "content": "Rain."},
    ]
    assert first.tools == TOOLS and first.meta == {"importer": "openai", "line": 1}
    assert second.messages == bare and second.tools is None and third.model == "gpt-4o"
    assert first.source == str(path)


def test_openai_lines_that_cannot_be_imported_are_reported_with_their_line(tmp_path):
    good = [{"role": "user", "content": "hi"}]
    path = _jsonl(tmp_path / "mixed.jsonl", [
        good, {"prompt": "hi", "completion": "hello"}, '"just text"', "{oops", good,
        {"messages": [{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": "", "tool_calls": [CALL]}]},
        {"messages": [{"role": "function", "name": "f", "content": "1"}]},
    ])
    recordings = import_openai_jsonl(path)
    assert [r.id for r in recordings] == ["mixed/1", "mixed/5"]
    assert [str(p).removeprefix(f"{path}:") for p in recordings.problems] == [
        "2: no 'messages' in this line (keys: completion, prompt)",
        "3: expected an object with 'messages' or a list of messages, got string",
        "4: broken JSON: Expecting property name enclosed in double quotes at column 2",
        "6: message 1: tool call 'call_1' is never answered by a tool message",
        "7: message 0: unknown role 'function' (roles are: system, user, assistant, tool)",
    ]


def test_cli_import_openai_writes_the_good_lines_and_lists_the_bad_ones(tmp_path, capsys):
    path = _jsonl(tmp_path / "in.jsonl", [[{"role": "user", "content": "hi"}], "{"])
    out = tmp_path / "out.jsonl"
    assert main(["import", "openai", str(path), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert f"imported 1 recording(s) from {path} into {out}; 1 skipped" in printed
    assert f"{path}:2: broken JSON" in printed
    assert [r.id for r in load_recordings(out)] == ["in/1"]


# ---------------------------------------------------------------- hermeslab's lab


#: The demo's requests, with compressions forced at two points (automatic ones may come on top).
SCRIPT = DEMO_SCRIPT[:4] + ["/compress"] + DEMO_SCRIPT[4:8] + ["/compress"] + DEMO_SCRIPT[8:] + DEMO_SCRIPT[:4]
TURNS = len(SCRIPT) - 2


def _chat(tmp_path: Path, name: str, *, in_place: bool) -> dict:
    """A logged conversation with the offline model at a small window, and every message its turns added."""
    workspace = tmp_path / f"{name}-ws"
    for file_name, text in DEMO_FILES.items():
        (workspace / file_name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / file_name).write_text(text, encoding="utf-8")
    lab = tmp_path / f"{name}.duckdb"
    config = load_config(None).with_overrides({
        "tools.workspace": str(workspace), "tools.terminal.enabled": True, "store.path": str(lab),
        "model.context_length": 8_000, "compression.in_place": in_place})
    with Runtime(config, source="test") as runtime:
        runtime.agent.provider = OfflineModel()  # same replies as over HTTP, faster
        runtime.writer.durable_turns = False
        added = [dict(runtime.agent.messages[0])]
        first = runtime.agent.session.id
        for text in SCRIPT:
            if text == "/compress":
                assert runtime.agent.compress().changed
            else:
                added += runtime.agent.chat(text).messages
        tip = runtime.agent.session.id
        branch = None
        if not in_place:
            branch = runtime.agent.branch()
            runtime.agent.chat("list files")
        tools = runtime.agent.tools.schemas()
    return {"lab": lab, "first": first, "tip": tip, "branch": branch, "added": added, "tools": tools,
            "config": config}


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    return _chat(tmp_path_factory.mktemp("lab"), "rotated", in_place=False)


@pytest.fixture(scope="module")
def in_place(tmp_path_factory):
    return _chat(tmp_path_factory.mktemp("lab"), "in_place", in_place=True)


def test_a_rotated_conversation_imports_as_every_message_its_turns_added(rotated):
    lab = open_lab(rotated["lab"])
    chain = lab.lineage(rotated["tip"])
    assert len(chain) >= 3 and chain[0] == rotated["first"]
    recording = import_lab(rotated["lab"], rotated["tip"], tools=rotated["tools"])
    assert recording.messages == rotated["added"]
    assert validate_recording(recording.to_dict()) == []
    assert recording.id == rotated["first"] and recording.meta["lineage"] == chain
    assert recording.tools == rotated["tools"] and recording.model == "hermeslab-offline"
    points = recording.meta["compression_points"]
    logged = lab.compressions()
    logged = logged[logged["session_id"].isin(chain) & (logged["mode"] != "none")]
    assert recording.meta["compressions"] == len(points) == len(logged) == len(chain) - 1
    assert [p["new_session_id"] for p in points] == chain[1:]
    for middle in chain:
        assert import_lab(rotated["lab"], middle).messages == rotated["added"]


def test_an_in_place_conversation_imports_as_every_message_its_turns_added(in_place):
    recording = import_lab(in_place["lab"], in_place["tip"])
    assert recording.messages == in_place["added"]
    assert recording.meta["lineage"] == [in_place["first"]] == [in_place["tip"]]
    points = recording.meta["compression_points"]
    assert len(points) >= 2 and {p["mode"] for p in points} == {"in_place"}
    assert validate_recording(recording.to_dict()) == []


@pytest.mark.parametrize("which", ["rotated", "in_place"])
def test_each_point_keeps_the_context_the_model_saw_after_it(which, request):
    chat = request.getfixturevalue(which)
    recording = import_lab(chat["lab"], chat["tip"])
    lab = open_lab(chat["lab"])
    latest = recording.meta["compression_points"][-1]
    assert latest["context"] + recording.messages[latest["at_message"]:] == lab.history(chat["tip"])
    for point in recording.meta["compression_points"]:
        assert point["context"][0]["role"] == "system"
        assert any("HANDOFF SUMMARY" in m["content"] for m in point["context"])
        assert 0 < point["at_message"] < len(recording.messages)
        assert point["tokens_after"] < point["tokens_before"]


def test_a_branch_is_a_conversation_of_its_own(rotated):
    recording = import_lab(rotated["lab"], rotated["branch"])
    assert recording.meta["lineage"][0] == rotated["branch"]  # it may have compressed on its own since
    assert rotated["tip"] not in recording.meta["lineage"]
    assert recording.messages[-4]["content"] == "list files"
    assert validate_recording(recording.to_dict()) == []


def test_lab_chains_survive_cycles_and_missing_parents():
    def session(parent, started, reason="compression"):
        return {"parent_session_id": parent, "started_at": started, "reason": reason}

    sessions = {"a": session("c", 1), "b": session("a", 2), "c": session("b", 3),
                "x": session(None, 4, "new"), "y": session("x", 5), "z": session("gone", 6),
                "w": session("y", 7, "branch")}
    assert lab_chain(sessions, "b") == ["a", "b", "c"]
    assert lab_chain(sessions, "x") == lab_chain(sessions, "y") == ["x", "y"]
    assert lab_chain(sessions, "z") == ["z"] and lab_chain(sessions, "w") == ["w"]


def test_an_unknown_lab_session_is_a_clear_error(rotated):
    with pytest.raises(ValueError, match="no session 'nope' in the lab"):
        import_lab(rotated["lab"], "nope")
    with pytest.raises(ValueError, match="session_id must be a non-empty string"):
        import_lab(rotated["lab"], "")


def test_export_then_import_gives_the_same_messages(rotated, tmp_path, capsys):
    out = tmp_path / "export.jsonl"
    assert main(["export", rotated["tip"], "--lab", str(rotated["lab"]), "--out", str(out)]) == 0
    assert f"exported {rotated['first']} ({len(rotated['added'])} messages" in capsys.readouterr().out
    (exported,) = load_recordings(out)
    assert exported.messages == rotated["added"]
    names = {t["function"]["name"] for t in exported.tools}
    assert names == {"read_file", "write_file", "list_dir", "search_files", "todo", "terminal"}
    (reimported,) = list(import_openai_jsonl(out))
    assert reimported.messages == rotated["added"] and reimported.tools == exported.tools
    assert main(["export", rotated["tip"], "--lab", str(rotated["lab"]), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("# Who are you?\n") and "Tool call `read_file`" in markdown
    assert markdown.count("## user") == TURNS


def test_builtin_schemas_add_the_terminal_only_when_the_session_used_it(rotated):
    config = load_config(None)
    assert config.tools.terminal.enabled is False
    plain = {t["function"]["name"] for t in builtin_tool_schemas(config, [{"role": "user", "content": "hi"}])}
    used = {t["function"]["name"] for t in builtin_tool_schemas(config, rotated["added"])}
    assert used - plain == {"terminal"}


def test_cli_import_lab_needs_a_session_and_writes_one_recording(rotated, tmp_path, capsys):
    with pytest.raises(SystemExit, match="import lab needs --session ID"):
        main(["import", "lab", str(rotated["lab"])])
    out = tmp_path / "lab.jsonl"
    assert main(["import", "lab", str(rotated["lab"]), "--session", rotated["first"], "--out", str(out)]) == 0
    assert "imported 1 recording(s)" in capsys.readouterr().out
    assert load_recordings(out)[0].messages == rotated["added"]
    with pytest.raises(SystemExit, match="no session 'nope'"):
        main(["export", "nope", "--lab", str(rotated["lab"])])


# ---------------------------------------------------------------- Hermes state.db, written by Hermes's own code

# Runs under the Hermes venv's Python. Each operation is a call Hermes's agent
# makes on its SessionDB; a compaction runs Hermes's own ContextCompressor (with
# the reference worker's stand-in summary), its todo snapshot and its user-turn
# guarantee, then stores the result the way compress_context does in each mode.
DRIVER = r'''
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from hermes_state import SessionDB
from reference_engine import ReferenceEngine
from tools.todo_tool import TodoStore
from agent.conversation_compression import _ensure_compressed_has_user_turn

def stored(message):
    return {k: message[k] for k in ("role", "content", "tool_calls", "tool_call_id") if message.get(k) is not None}

plan = json.load(sys.stdin)
db = SessionDB(db_path=Path(plan["db"]))
engine = None
for op in plan["ops"]:
    sid = op.get("session")
    if op["op"] == "create":
        db.create_session(sid, op.get("source", "cli"), model="hermes-test-model", model_config=op.get("model_config"),
                          system_prompt=op.get("system_prompt"), parent_session_id=op.get("parent"))
        if op.get("title"):
            db.set_session_title(sid, op["title"])
    elif op["op"] == "append":
        for message in op["messages"]:
            db.append_message(sid, **stored(message))
    elif op["op"] == "end":
        db.end_session(sid, op["reason"])
    elif op["op"] == "rewind":
        rows = [r for r in db.get_messages(sid) if r["role"] == "user" and r["content"] == op["content"]]
        db.rewind_to_message(sid, rows[-1]["id"])
    elif op["op"] == "link":
        db._conn.execute("UPDATE sessions SET parent_session_id = ? WHERE id = ?", (op["parent"], sid))
        db._conn.commit()
    elif op["op"] == "compact":
        engine = engine or ReferenceEngine()
        live = [stored(m) for m in db.get_messages_as_conversation(sid)] + op.get("unflushed", [])
        compressed = engine.new_compressor(op["context_length"]).compress([dict(m) for m in live])
        compressed = [{k: v for k, v in m.items() if not k.startswith("_")} for m in compressed]
        if op.get("todos"):
            todos = TodoStore()
            todos.write(op["todos"])
            compressed.append({"role": "user", "content": todos.format_for_injection()})
        _ensure_compressed_has_user_turn(live, compressed)
        if op["mode"] == "in_place":
            db.archive_and_compact(sid, compressed)
        else:
            for message in op.get("unflushed", []):
                db.append_message(sid, **stored(message))
            db.end_session(sid, "compression")
            db.create_session(op["child"], "cli", model="hermes-test-model", parent_session_id=sid)
            db.replace_messages(op["child"], compressed)
db.close()
'''


def exchange(i: int, lines: int = 150) -> list[dict]:
    call_id = f"call_{i}"
    return [
        {"role": "user", "content": f"step {i}: read part {i}"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read_file",
                                                             "arguments": json.dumps({"path": f"part{i}.txt"})}}]},
        {"role": "tool", "tool_call_id": call_id, "content": f"line {i} of the file\n" * lines},
        {"role": "assistant", "content": f"Part {i} has been read."},
    ]


CONVERSATION = [m for i in range(16) for m in exchange(i)]
#: A short genuine repeat in the middle of a conversation (not next to any compaction).
REPEAT = [{"role": "user", "content": "continue"}, {"role": "assistant", "content": "Continuing."}]
IN_PLACE = CONVERSATION[:20] + REPEAT + CONVERSATION[20:24] + REPEAT + CONVERSATION[24:]
#: Where the in-place conversation is compacted the second time: before step 14's user message.
SECOND_CUT = IN_PLACE.index({"role": "user", "content": "step 14: read part 14"})
TODO = [{"id": "1", "content": "finish reading", "status": "in_progress"}]
#: Content parts, which Hermes stores JSON-encoded and the format wants as text.
PICTURE = [{"role": "user", "content": [{"type": "text", "text": "What is in"}, {"type": "text", "text": "this picture?"},
                                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
           {"role": "assistant", "content": "A cat."}]


def _hermes_plan() -> list[dict]:
    rotated, ip, cut = CONVERSATION, IN_PLACE, SECOND_CUT
    return [
        # in place (Hermes's default): two compactions, each with the current turn not yet flushed
        {"op": "create", "session": "ip1", "system_prompt": "You are Hermes.", "title": "in place"},
        {"op": "append", "session": "ip1", "messages": ip[:44]},
        {"op": "compact", "session": "ip1", "mode": "in_place", "context_length": 8000, "unflushed": ip[44:45],
         "todos": TODO},
        {"op": "append", "session": "ip1", "messages": ip[45:cut]},
        {"op": "compact", "session": "ip1", "mode": "in_place", "context_length": 8000,
         "unflushed": ip[cut:cut + 3]},
        {"op": "append", "session": "ip1", "messages": ip[cut + 3:]},
        # rotation: a chain of three sessions, the last with a rewound exchange
        {"op": "create", "session": "r1", "system_prompt": "You are Hermes, rotating."},
        {"op": "append", "session": "r1", "messages": rotated[:40]},
        {"op": "compact", "session": "r1", "mode": "rotation", "child": "r2", "context_length": 8000,
         "unflushed": rotated[40:41]},
        {"op": "append", "session": "r2", "messages": rotated[41:52]},
        {"op": "compact", "session": "r2", "mode": "rotation", "child": "r3", "context_length": 8000,
         "unflushed": rotated[52:55], "todos": TODO},
        {"op": "append", "session": "r3", "messages": rotated[55:60] + [
            {"role": "user", "content": "delete everything"}, {"role": "assistant", "content": "Deleting."}]},
        {"op": "rewind", "session": "r3", "content": "delete everything"},
        {"op": "append", "session": "r3", "messages": rotated[60:]},
        # a branch of the rotated conversation's tip: a conversation of its own
        {"op": "create", "session": "b1", "parent": "r3", "model_config": {"_branched_from": "r3"}},
        {"op": "append", "session": "b1", "messages": exchange(99, 3) + PICTURE},
        # two sessions whose compression links form a loop
        {"op": "create", "session": "c1"},
        {"op": "append", "session": "c1", "messages": exchange(50, 3)},
        {"op": "end", "session": "c1", "reason": "compression"},
        {"op": "create", "session": "c2", "parent": "c1"},
        {"op": "append", "session": "c2", "messages": exchange(51, 3)},
        {"op": "end", "session": "c2", "reason": "compression"},
        {"op": "link", "session": "c1", "parent": "c2"},
    ]


@pytest.fixture(scope="module")
def hermes_db(tmp_path_factory) -> Path:
    python = venv_python(hermes_venv())
    home = tmp_path_factory.mktemp("hermes-home")
    (home / "driver.py").write_text(DRIVER, encoding="utf-8")
    db = home / "state.db"
    env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    env["HERMES_HOME"] = str(home)
    result = subprocess.run([str(python), "-I", str(home / "driver.py"), str(WORKER_DIR)],
                            input=json.dumps({"db": str(db), "ops": _hermes_plan()}), capture_output=True,
                            text=True, env=env, cwd=home, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return db


@pytest.fixture(scope="module")
def hermes_recordings(hermes_db):
    return {r.id: r for r in import_hermes_state(hermes_db)}


def test_hermes_state_has_one_recording_per_conversation(hermes_recordings):
    assert sorted(hermes_recordings) == ["b1", "c1", "ip1", "r1"]
    assert hermes_recordings["r1"].meta["lineage"] == ["r1", "r2", "r3"]
    assert hermes_recordings["b1"].meta["lineage"] == ["b1"]
    assert hermes_recordings["c1"].meta["lineage"] == ["c1", "c2"]
    for recording in hermes_recordings.values():
        assert validate_recording(recording.to_dict()) == []


def test_hermes_in_place_compactions_leave_the_original_transcript(hermes_recordings, hermes_db):
    recording = hermes_recordings["ip1"]
    assert recording.messages == [{"role": "system", "content": "You are Hermes."}] + IN_PLACE
    assert recording.meta["shape"] == "in_place" and recording.meta["title"] == "in place"
    assert recording.meta["compression_points"] == [{"at_message": 45, "mode": "in_place"},
                                                    {"at_message": SECOND_CUT + 1, "mode": "in_place"}]
    left_out = recording.meta["left_out"]
    assert (left_out["summaries"], left_out["compaction_notes"], left_out["rewound"]) == (2, 1, 0)
    with sqlite3.connect(hermes_db) as con:
        archived, rows = con.execute("SELECT sum(compacted), count(*) FROM messages WHERE session_id = 'ip1'").fetchone()
    assert archived > 0 and left_out["copies"] == rows - len(IN_PLACE) - 3


def test_hermes_rotations_are_followed_and_rewound_rows_left_out(hermes_recordings):
    recording = hermes_recordings["r1"]
    assert recording.messages == [{"role": "system", "content": "You are Hermes, rotating."}] + CONVERSATION
    assert recording.meta["shape"] == "rotation" and recording.meta["end_reason"] is None
    assert recording.meta["compression_points"] == [{"at_message": 42, "mode": "rotation"},
                                                    {"at_message": 56, "mode": "rotation"}]
    assert recording.meta["left_out"]["rewound"] == 2
    assert recording.model == "hermes-test-model"


def test_a_hermes_branch_is_its_own_conversation_with_parts_joined_into_text(hermes_recordings):
    recording = hermes_recordings["b1"]
    assert recording.messages == exchange(99, 3) + [{"role": "user", "content": "What is in\nthis picture?"},
                                                    {"role": "assistant", "content": "A cat."}]
    assert recording.meta["shape"] == "none" and recording.meta["compressions"] == 0


def test_an_older_state_db_without_archive_flags_still_imports(tmp_path):
    (recording,) = import_hermes_state(old_state_db(tmp_path / "state.db"))
    assert recording.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": "hello"}]
    assert recording.meta["title"] is None and recording.model is None


def test_one_hermes_conversation_can_be_picked_by_any_of_its_sessions(hermes_db, hermes_recordings):
    (picked,) = import_hermes_state(hermes_db, session_id="r2")
    assert picked.to_dict() == hermes_recordings["r1"].to_dict()
    with pytest.raises(ValueError, match="no session 'nope' in"):
        import_hermes_state(hermes_db, session_id="nope")


def test_hermes_chains_place_every_session_once_even_in_a_loop():
    def session(parent, started, end_reason="compression", **extra):
        return {"parent_session_id": parent, "started_at": started, "end_reason": end_reason,
                "model_config": None, "source": "cli", **extra}

    sessions = {"a": session("c", 1.0), "b": session("a", 2.0), "c": session("b", 3.0),
                "d": session("c", 4.0, None, model_config='{"_delegate_from": "c"}'),
                "e": session("c", 5.0, None, source="tool"), "f": session("gone", 6.0)}
    assert hermes_chains(sessions) == [["a", "b", "c"], ["d"], ["e"], ["f"]]


def test_cli_import_hermes_state(hermes_db, tmp_path, capsys):
    out = tmp_path / "hermes.jsonl"
    assert main(["import", "hermes-state", str(hermes_db), "--out", str(out)]) == 0
    assert f"imported 4 recording(s) from {hermes_db} into {out}; 0 skipped" in capsys.readouterr().out
    assert [r.id for r in read_recordings(out)] == ["ip1", "r1", "b1", "c1"]


def test_files_that_are_not_hermes_state_databases_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Hermes state database at"):
        import_hermes_state(tmp_path / "state.db")
    (tmp_path / "notes.txt").write_text("not a database " * 100)
    with pytest.raises(ValueError, match="cannot read .*notes.txt as a Hermes state database"):
        import_hermes_state(tmp_path / "notes.txt")
    with sqlite3.connect(tmp_path / "other.db") as con:
        con.execute("CREATE TABLE things (id INTEGER)")
    with pytest.raises(ValueError, match="is not a Hermes state database: it has no 'sessions' and 'messages'"):
        import_hermes_state(tmp_path / "other.db")
