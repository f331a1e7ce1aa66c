"""Recorded sessions: validation with exact locations, streaming reads that survive bad lines, writing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hermeslab.eval.recording import load_recordings, read_recordings, write_recordings
from hermeslab.recordings import Recording, RecordingError, RecordingProblem, recording_line, validate_recording
from tests.shared_data import dataset


def call(call_id: str, name: str = "read_file", arguments: str = '{"path": "a.txt"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def good() -> dict:
    return {
        "id": "demo/1", "source": "tests", "license": "MIT", "model": "m",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c2", "list_dir", "{}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "hello"},
            {"role": "tool", "tool_call_id": "c2", "content": "a.txt"},
            {"role": "assistant", "content": "It says hello."},
        ],
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}},
                  {"type": "function", "function": {"name": "list_dir", "parameters": {}}}],
        "meta": {"turns": 1},
    }


def where(problems: list[RecordingProblem]) -> list[tuple[int | None, str]]:
    return [(p.message_index, p.reason) for p in problems]


def test_a_good_recording_has_no_problems_and_round_trips():
    assert validate_recording(good()) == []
    recording = Recording.from_dict(good())
    assert recording.to_dict() == good()
    assert validate_recording({"id": "x", "messages": [{"role": "user", "content": "hi"}]}) == []


def _edit(path: tuple, value) -> dict:
    data = good()
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize(("data", "expected"), [
    (_edit(("messages", 1, "role"), "bot"), [(1, "unknown role 'bot' (roles are: system, user, assistant, tool)")]),
    (_edit(("messages", 1), "read a.txt"), [(1, "a message must be a JSON object, got string")]),
    (_edit(("messages", 5, "content"), None), [(5, "content must be a string, got null")]),
    (_edit(("messages", 1, "content"), [{"type": "text", "text": "hi"}]), [(1, "content must be a string, got list")]),
    (_edit(("messages", 5, "content"), KeyError),
     [(5, "missing 'content' (use \"\" for an assistant turn that only calls tools)")]),
    (_edit(("messages", 1, "tool_call_id"), "c1"), [(1, "unexpected key 'tool_call_id' in a user message")]),
    (_edit(("messages", 3, "tool_call_id"), "c9"),
     [(3, "tool result 'c9' answers no earlier tool call"), (2, "tool call 'c1' is never answered by a tool message")]),
    (_edit(("messages", 4, "tool_call_id"), "c1"),
     [(4, "tool result 'c1' answers a call already answered by message 3"),
      (2, "tool call 'c2' is never answered by a tool message")]),
    (_edit(("messages", 4), {"role": "assistant", "content": "done"}),
     [(2, "tool call 'c2' is never answered by a tool message")]),
    (_edit(("messages", 2, "tool_calls"), [call("c1"), call("c1")]),
     [(2, "tool call id 'c1' was already used by message 2"),
      (4, "tool result 'c2' answers no earlier tool call")]),
    (_edit(("messages", 2, "tool_calls", 0, "function", "arguments"), {"path": "a.txt"}),
     [(2, "tool call 0 arguments must be a JSON string, got object")]),
    (_edit(("messages", 2, "tool_calls", 0, "function", "arguments"), '{"path": '),
     [(2, "tool call 0 arguments are not valid JSON (Expecting value at position 9)")]),
    (_edit(("messages", 2, "tool_calls", 1, "function", "arguments"), "[1, 2]"),
     [(2, "tool call 1 arguments must encode a JSON object, got list")]),
    (_edit(("messages", 2, "tool_calls", 1, "type"), "code"),
     [(2, "tool call 1 must have type 'function', got 'code'")]),
    (_edit(("messages", 2, "tool_calls", 1, "function", "name"), ""), [(2, "tool call 1 has no function name")]),
    (_edit(("messages", 3, "tool_call_id"), ""),
     [(3, "tool message needs a non-empty string tool_call_id"),
      (2, "tool call 'c1' is never answered by a tool message")]),
    (_edit(("messages", 5, "tool_calls"), []), [(5, "tool_calls is empty (leave the key out when there are no calls)")]),
    (_edit(("messages", 1, "tool_calls"), [call("c7")]), [(1, "unexpected key 'tool_calls' in a user message")]),
])
def test_each_broken_message_is_named_by_index_and_reason(data, expected):
    problems = validate_recording(data)
    assert where(problems) == expected
    assert all(p.recording_id == "demo/1" for p in problems)


@pytest.mark.parametrize(("data", "expected"), [
    ([], ["a recording must be a JSON object, got list"]),
    (_edit(("id",), KeyError), ["missing field 'id'"]),
    (_edit(("id",), 7), ["field 'id' must be a non-empty string, got number"]),
    (_edit(("messages",), KeyError), ["missing field 'messages'"]),
    (_edit(("messages",), {"role": "user"}), ["field 'messages' must be a list, got object"]),
    (_edit(("messages",), []), ["field 'messages' is empty"]),
    (_edit(("model",), 4), ["field 'model' must be a string or null, got number"]),
    (_edit(("meta",), []), ["field 'meta' must be an object, got list"]),
    (_edit(("transcript",), []), [("unknown field 'transcript' (fields are: id, source, license, model, messages, "
                                   "tools, meta)")]),
    (_edit(("tools",), {"read_file": {}}), ["field 'tools' must be a list of tool schemas or null, got object"]),
    (_edit(("tools", 1), {"name": "list_dir"}), ['tools[1] must be {"type": "function", "function": {...}}']),
    (_edit(("tools", 1, "function", "name"), "read_file"), ["tools[1] repeats the tool name 'read_file'"]),
])
def test_field_problems_carry_no_message_index(data, expected):
    problems = validate_recording(data)
    assert [p.reason for p in problems] == expected
    assert all(p.message_index is None for p in problems)


def test_a_problem_prints_as_file_line_message_and_reason():
    assert str(RecordingProblem("unknown role 'bot'", "x.jsonl", 3, 7, "a")) == "x.jsonl:3: message 7: unknown role 'bot'"
    assert str(RecordingProblem("broken JSON", "x.jsonl", 3)) == "x.jsonl:3: broken JSON"
    assert str(RecordingProblem("field 'messages' is empty", recording_id="a")) == \
        "recording 'a': field 'messages' is empty"


def _write_lines(path: Path, lines: list) -> Path:
    with path.open("wb") as out:
        for line in lines:
            out.write(line if isinstance(line, bytes) else (line if isinstance(line, str) else json.dumps(line)).encode())
            out.write(b"\n")
    return path


def test_bad_lines_are_reported_at_file_line_and_index_while_the_rest_loads(tmp_path):
    second = good() | {"id": "demo/2"}
    bad_role = copy.deepcopy(good()) | {"id": "demo/3"}
    bad_role["messages"][3]["role"] = "function"
    orphan = copy.deepcopy(good()) | {"id": "demo/4"}
    orphan["messages"][4]["tool_call_id"] = "nope"
    path = _write_lines(tmp_path / "mixed.jsonl", [
        good(), '{"id": "broken", "messages": [', second, "", bad_role, b'{"id": "\xff"}', orphan, good(), "[1, 2]",
    ])
    recordings = read_recordings(path)
    loaded = list(recordings)
    assert [r.id for r in loaded] == ["demo/1", "demo/2"]
    assert isinstance(loaded[0], Recording) and loaded[0].messages == good()["messages"]
    name = str(path)
    assert [str(p) for p in recordings.problems] == [
        f"{name}:2: broken JSON: Expecting value at column 31",
        f"{name}:5: message 3: unknown role 'function' (roles are: system, user, assistant, tool)",
        f"{name}:5: message 2: tool call 'c1' is never answered by a tool message",
        f"{name}:6: not valid UTF-8 (byte 8)",
        f"{name}:7: message 4: tool result 'nope' answers no earlier tool call",
        f"{name}:7: message 2: tool call 'c2' is never answered by a tool message",
        f"{name}:8: duplicate id 'demo/1' (first used on line 1)",
        f"{name}:9: a recording must be a JSON object, got list",
    ]
    assert (recordings.lines, recordings.loaded) == (9, 2)
    assert [(p.line, p.message_index, p.recording_id) for p in recordings.problems][1] == (5, 3, "demo/3")


def test_reading_is_lazy_and_a_second_pass_starts_over(tmp_path):
    path = _write_lines(tmp_path / "two.jsonl", [good(), "{", good() | {"id": "demo/2"}])
    recordings = read_recordings(path)
    stream = iter(recordings)
    assert next(stream).id == "demo/1" and recordings.lines == 1
    assert [r.id for r in stream] == ["demo/2"]
    assert len(recordings.problems) == 1
    assert [r.id for r in recordings] == ["demo/1", "demo/2"] and len(recordings.problems) == 1


def test_load_recordings_refuses_a_file_with_problems(tmp_path):
    path = _write_lines(tmp_path / "bad.jsonl", [good(), "not json"])
    with pytest.raises(RecordingError, match=r"1 problem\(s\) in recordings:\n  .*bad.jsonl:2: broken JSON") as info:
        load_recordings(path)
    assert [p.line for p in info.value.problems] == [2]
    assert [r.id for r in load_recordings(_write_lines(tmp_path / "ok.jsonl", [good()]))] == ["demo/1"]


def test_missing_paths_and_directories_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no recordings file at"):
        read_recordings(tmp_path / "nope.jsonl")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        read_recordings(tmp_path)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        write_recordings(tmp_path, [Recording.from_dict(good())])


def test_write_then_read_gives_the_same_recordings(tmp_path):
    first = Recording.from_dict(good())
    second = Recording(id="unicode/é", messages=[{"role": "user", "content": "héllo ✓"}])
    path = tmp_path / "out" / "sessions.jsonl"
    assert write_recordings(path, [first, second]) == 2
    assert [r.to_dict() for r in load_recordings(path)] == [first.to_dict(), second.to_dict()]
    assert "héllo ✓" in path.read_text(encoding="utf-8")
    assert recording_line(second) == path.read_text(encoding="utf-8").splitlines()[1]


def test_an_invalid_recording_leaves_the_old_file_alone(tmp_path):
    path = tmp_path / "sessions.jsonl"
    write_recordings(path, [Recording.from_dict(good())])
    before = path.read_bytes()
    broken = Recording(id="broken", messages=[{"role": "user", "content": None}])
    with pytest.raises(RecordingError, match="recording 'broken': message 0: content must be a string, got null"):
        write_recordings(path, [Recording.from_dict(good()), broken])
    with pytest.raises(RecordingError, match="duplicate id 'demo/1'"):
        write_recordings(path, [Recording.from_dict(good()), Recording.from_dict(good())])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["sessions.jsonl"]


def test_with_a_problems_list_invalid_recordings_are_left_out(tmp_path):
    problems: list[RecordingProblem] = []
    broken = Recording(id="broken", messages=[{"role": "robot", "content": ""}])
    count = write_recordings(tmp_path / "s.jsonl", [broken, Recording.from_dict(good()), Recording.from_dict(good())],
                             problems=problems)
    assert count == 1
    assert [str(p) for p in problems] == [
        "recording 'broken': message 0: unknown role 'robot' (roles are: system, user, assistant, tool)",
        "recording 'demo/1': duplicate id 'demo/1'"]


@pytest.mark.parametrize("name", ["tau_bench_airline_gpt4o.jsonl", "tau2_bench_gpt41.jsonl",
                                  "mini_swe_agent_gemini3pro_swebv.jsonl"])
def test_the_shared_recordings_load_without_a_single_problem(name):
    recordings = read_recordings(dataset(name))
    count = sum(1 for _ in recordings)
    assert recordings.problems == []
    assert count == recordings.lines == {"tau_bench_airline_gpt4o.jsonl": 200, "tau2_bench_gpt41.jsonl": 200,
                                         "mini_swe_agent_gemini3pro_swebv.jsonl": 250}[name]
