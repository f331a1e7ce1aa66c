"""Importing folders of mixed formats: detection, the account of every skip, and one recordings file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.cli import main
from hermeslab.eval.importers import ImportOptions, detect, format_named, import_paths, sample_of
from hermeslab.eval.recording import load_recordings
from hermeslab.recordings import validate_recording


def old_state_db(path: Path) -> Path:
    """A Hermes state database from before sessions were archived: no archive flags, one short session."""
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL, system_prompt TEXT)")
        con.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, "
                    "tool_call_id TEXT, tool_calls TEXT)")
        con.execute("INSERT INTO sessions VALUES ('old', 'cli', 1.0, 'Be brief.')")
        con.execute("INSERT INTO messages (session_id, role, content) VALUES ('old', 'user', 'hi'), "
                    "('old', 'assistant', 'hello')")
    return path


def _mixed_folder(root: Path) -> Path:
    folder = root / "logs"
    (folder / "nested").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    (folder / "chats.jsonl").write_text(json.dumps(chat) + "\n" + json.dumps({"id": "named", "messages": chat})
                                        + "\n{broken\n")
    old_state_db(folder / "nested" / "state.db")
    (folder / "notes.txt").write_text("just some notes\n")
    (folder / "other.json").write_text(json.dumps({"hello": "world"}))
    return folder


def test_a_mixed_folder_is_one_recordings_file_and_every_skip_is_listed(tmp_path, capsys):
    folder = _mixed_folder(tmp_path)
    out = tmp_path / "all.jsonl"
    assert main(["import", str(folder), "-o", str(out)]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert [r.id for r in load_recordings(out)] == ["chats/1", "named", "old"]
    assert f"took {folder / 'chats.jsonl'}: 2 recording(s) (openai)" in printed
    assert f"took {folder / 'nested' / 'state.db'}: 1 recording(s) (hermes-state)" in printed
    skipped = [line for line in printed if line.startswith("skipped ")]
    assert [line.split(": ")[0] for line in skipped] == [
        f"skipped {folder / 'chats.jsonl'}:3", f"skipped {folder / 'notes.txt'}", f"skipped {folder / 'other.json'}"]
    assert "broken JSON" in skipped[0]
    assert "not a format hermeslab imports (text that is not JSON" in skipped[1]
    assert "JSON document of objects with keys hello" in skipped[2]
    assert printed[-1] == f"imported 3 recording(s) from {folder} into {out}; 3 skipped"


def test_nothing_skipped_exits_zero(tmp_path, capsys):
    db = old_state_db(tmp_path / "state.db")
    out = tmp_path / "one.jsonl"
    assert main(["import", str(db), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"imported 1 recording(s) from {db} into {out}; 0 skipped"


def test_a_copied_conversation_and_a_missing_path_are_skips(tmp_path):
    chat = {"id": "same", "messages": [{"role": "user", "content": "hi"}]}
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(json.dumps(chat) + "\n")
    report = import_paths([tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "gone.jsonl"])
    assert [r.id for r in report.recordings] == ["same"]
    assert [str(s) for s in report.skipped] == [
        f"{tmp_path / 'b.jsonl'}: same: the same conversation was already taken from {tmp_path / 'a.jsonl'}",
        f"{tmp_path / 'gone.jsonl'}: no such file or folder"]


def test_another_conversation_under_a_taken_id_is_kept_under_a_numbered_id(tmp_path):
    sample = Path(__file__).parent / "fixtures" / "importers" / "mini-swe-agent" / "github_issue.traj.json"
    first, second = tmp_path / "run1" / "task.traj.json", tmp_path / "run2" / "task.traj.json"
    for path, tail in ((first, "one"), (second, "two")):
        path.parent.mkdir()
        path.write_text(json.dumps(json.loads(sample.read_text()) + [{"role": "assistant", "content": tail}]))
    report = import_paths([tmp_path])
    assert [r.id for r in report.recordings] == ["mini-swe-agent/task", "mini-swe-agent/task#2"]
    assert report.recordings[1].meta["id_also_in"] == str(first) and not report.skipped


def test_a_forced_format_reads_what_detection_would_not(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    assert detect(sample_of(path)).name == "openai"
    report = import_paths([path], source_format=format_named("hermes-state"))
    assert report.recordings == [] and "cannot read" in report.skipped[0].reason


def test_the_older_kind_first_form_still_works(tmp_path, capsys):
    db = old_state_db(tmp_path / "state.db")
    out = tmp_path / "one.jsonl"
    assert main(["import", "hermes-state", str(db), "--out", str(out)]) == 0
    assert [r.id for r in load_recordings(out)] == ["old"]


def test_a_lab_without_a_session_is_a_skip_that_says_what_to_give(tmp_path):
    lab = tmp_path / "lab.duckdb"
    lab.write_bytes(b"\x00" * 8 + b"DUCK" + b"\x00" * 100)
    report = import_paths([lab], options=ImportOptions())
    assert [s.reason for s in report.skipped] == [
        "a hermeslab lab holds many conversations: give --session ID to pick one"]


def test_an_unknown_forced_format_is_one_clear_line(tmp_path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    try:
        main(["import", str(tmp_path / "a.jsonl"), "--format", "nope", "-o", str(tmp_path / "o.jsonl")])
    except SystemExit as exc:
        assert str(exc).startswith("hermeslab: unknown format 'nope' (formats are: ")
    else:
        raise AssertionError("an unknown format was accepted")
    assert not (tmp_path / "o.jsonl").exists()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=300),
                 st.lists(st.text(max_size=40), max_size=6).map(lambda ls: "\n".join(ls).encode()),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                              lambda inner: st.lists(inner, max_size=4)
                              | st.dictionaries(st.sampled_from(["messages", "role", "content", "type", "id"]),
                                                inner, max_size=4),
                              max_leaves=12).map(lambda v: json.dumps(v).encode())))
def test_any_file_gives_valid_recordings_or_skips_never_an_exception(tmp_path, data):
    path = tmp_path / "input"
    path.write_bytes(data)
    report = import_paths([path])
    for recording in report.recordings:
        assert validate_recording(recording.to_dict()) == []
    assert all(skip.reason and "\n" not in skip.reason for skip in report.skipped)
    assert report.recordings or report.skipped


def test_the_folder_of_real_samples_is_one_valid_recordings_file_with_every_skip_listed(tmp_path, capsys):
    fixtures = Path(__file__).parent / "fixtures" / "importers"
    out = tmp_path / "samples.jsonl"
    assert main(["import", str(fixtures), "-o", str(out)]) == 1
    printed = capsys.readouterr().out.splitlines()
    formats = sorted(line.rsplit("(", 1)[1].rstrip(")") for line in printed if line.startswith("took "))
    assert formats == ["claude-code", "codex", "mini-swe-agent", "openhands", "openhands", "openhands",
                       "swe-agent", "swe-agent"]
    recordings = load_recordings(out)  # raises on any line the format refuses
    assert len(recordings) == 8 and len({r.id for r in recordings}) == 8
    skipped = sorted(Path(line.removeprefix("skipped ").split(": ")[0]).name
                     for line in printed if line.startswith("skipped "))
    assert skipped == ["SOURCE.md"] * 5 + ["agent-acompact-fffbd0.jsonl"]
    assert printed[-1] == f"imported 8 recording(s) from {fixtures} into {out}; 6 skipped"


def test_the_help_names_every_format_there_is():
    from hermeslab.cli import IMPORT_FORMATS
    from hermeslab.eval.importers import FORMATS

    assert sorted(IMPORT_FORMATS) == sorted(f.name for f in FORMATS)


def test_a_file_of_a_known_format_holding_no_conversation_is_a_skip(tmp_path, capsys):
    empty = old_state_db(tmp_path / "empty.db")
    with sqlite3.connect(empty) as con:
        con.execute("DELETE FROM messages")
        con.execute("DELETE FROM sessions")
    report = import_paths([empty])
    assert [str(s) for s in report.skipped] == [f"{empty}: no conversation in it (hermes-state)"]


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "run", "arguments": "{}"}}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=3), st.lists(st.booleans(), max_size=3)), max_size=8))
def test_unanswered_calls_go_and_everything_answered_stays(turns):
    """Each turn: the reply's text and, per call, whether a tool message answers it."""
    from hermeslab.eval.importers.transcript import without_unanswered_calls

    messages, answered_ids = [{"role": "user", "content": "go"}], []
    for number, (text, answers) in enumerate(turns):
        ids = [f"c{number}_{k}" for k in range(len(answers))]
        messages.append({"role": "assistant", "content": text, **({"tool_calls": [_call(i) for i in ids]} if ids else {})})
        messages += [{"role": "tool", "tool_call_id": i, "content": "ok"} for i, a in zip(ids, answers) if a]
        answered_ids += [i for i, a in zip(ids, answers) if a]
    kept, dropped = without_unanswered_calls(messages)
    calls = [c["id"] for m in kept for c in m.get("tool_calls", [])]
    assert calls == answered_ids and dropped == sum(not a for _, answers in turns for a in answers)
    assert [m for m in kept if m["role"] != "assistant"] == [m for m in messages if m["role"] != "assistant"]
    # a reply goes only when it had calls, none answered, and no text
    assert [m["content"] for m in kept if m["role"] == "assistant"] == \
        [text for text, answers in turns if not answers or any(answers) or text]
    assert without_unanswered_calls(kept) == (kept, 0)
