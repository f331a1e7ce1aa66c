"""Replaying recordings through the real agent loop: shapes, fidelity, deviations, the lab and the CLI."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from shared_data import dataset

from hermeslab.cli import main
from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config
from hermeslab.core.events import ApiCallFinished, EventBus, MessageAdded, SessionStarted, ToolCallFinished
from hermeslab.eval.metrics import measure
from hermeslab.recordings import Recording, RecordingError
from hermeslab.eval.replay import replay
from hermeslab.eval.replay_plan import plan_replay
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.providers import LocalServer, OfflineModel
from hermeslab.store import open as open_lab

MINI_SWE = "mini_swe_agent_gemini3pro_swebv.jsonl"
TAU2 = "tau2_bench_gpt41.jsonl"
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a shell command.",
                                           "parameters": {"type": "object",
                                                          "properties": {"command": {"type": "string"}}}}}]


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def reply(text: str, *calls: tuple[str, str]) -> dict:
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": call_id, "type": "function",
                                  "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
                                 for call_id, command in calls]
    return message


def result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def recording(*messages: dict, tools: list[dict] | None = TOOLS) -> Recording:
    return Recording(id="hand-made", messages=[{"role": "system", "content": "You fix bugs."}, *messages],
                     tools=tools, model="gpt-4.1")


def seed(**overrides) -> Config:
    return apply_preset(Config(), "seed").with_overrides({"compression.summariser": "extractive", **overrides})


def history_of(events: list) -> list[dict]:
    """Every message that entered the history, once and in order (a new session announces its history again)."""
    first = {id(e.message): e.message for e in reversed(events) if isinstance(e, MessageAdded)}
    return [first[key] for key in dict.fromkeys(id(e.message) for e in events if isinstance(e, MessageAdded))]


def replies_of(events: list) -> list[dict]:
    """The replies the loop added: each assistant message right after a model call answered."""
    return [event.message for previous, event in itertools.pairwise(events)
            if isinstance(event, MessageAdded) and isinstance(previous, ApiCallFinished) and previous.error_class is None]


def collect(bus: EventBus) -> list:
    events: list = []
    bus.subscribe(events.append)
    return events


def shared_sessions(name: str, count: int) -> list[Recording]:
    with dataset(name).open(encoding="utf-8") as handle:
        return [Recording.from_dict(json.loads(next(handle))) for _ in range(count)]


# ---------------------------------------------------------------- the recording's shape


def test_a_plain_session_is_one_turn_and_every_call_is_replayed_as_recorded():
    rec = recording(user("Fix the parser."), reply("Looking.", ("c1", "cat parser.py")), result("c1", "def parse(): ..."),
                    reply("Fixed: parse() now handles empty input."))
    run = replay(rec, seed())
    assert [call.reply_index for call in run.calls] == [0, 1]
    assert [call.messages for call in run.calls] == [rec.messages[:2], rec.messages[:4]]
    assert run.statuses == ["completed"]
    assert set(run.deviations.values()) == {0}


def test_a_fast_replay_reads_recorded_arguments_from_the_plan_and_makes_the_same_calls(monkeypatch):
    rec = recording(user("Fix the parser."), reply("Looking.", ("c1", "cat parser.py"), ("c2", "ls")),
                    result("c1", "def parse(): ..."), result("c2", "parser.py"), reply("Fixed."))
    full = replay(rec, seed())

    def refuse(message):
        raise AssertionError("a recorded reply's arguments were parsed again")

    monkeypatch.setattr("hermeslab.agent.read_tool_arguments", refuse)
    fast = replay(rec, seed(), fast=True)
    assert [call.messages for call in fast.calls] == [call.messages for call in full.calls]
    assert fast.deviations == full.deviations and fast.statuses == ["completed"]


def test_a_recording_given_new_messages_is_planned_again():
    rec = recording(user("Fix the parser."), reply("Looking.", ("c1", "cat parser.py")), result("c1", "def parse(): ..."),
                    reply("Fixed."))
    assert len(replay(rec, seed()).calls) == 2
    rec.messages = rec.messages[:-1] + [reply("Still looking.", ("c2", "ls")),
                                        result("c2", "parser.py"), reply("Fixed.")]
    assert len(replay(rec, seed()).calls) == 3
    rec.messages.append(user("Thanks."))
    assert replay(rec, seed()).deviations["unsent_messages"] == 1


def test_an_assistant_that_speaks_first_gets_a_turn_without_a_user_message():
    rec = recording(reply("Hi! How can I help you today?"), user("Cancel order 17."), reply("Done, order 17 is cancelled."),
                    user("Thanks!"))
    run = replay(rec, seed())
    assert run.calls[0].messages == rec.messages[:1]
    assert run.calls[1].messages == rec.messages[:3]
    assert run.deviations["turns_without_user"] == 1
    assert run.deviations["unsent_messages"] == 1  # the closing "Thanks!" has no call after it
    assert run.deviations["missed_calls"] == run.deviations["extra_calls"] == 0


def test_user_messages_with_no_call_between_them_are_sent_together():
    rec = recording(user("The build fails."), user("It is the lint step."), reply("I will check the lint config."))
    run = replay(rec, seed())
    assert run.calls[0].messages == rec.messages[:3]
    assert run.deviations["queued_user_messages"] == 1


def test_a_reply_after_a_reply_is_a_turn_without_a_user_message():
    rec = recording(user("Summarise the log."), reply("It has 3 errors."), reply("The first one is a timeout."))
    run = replay(rec, seed())
    assert [call.messages for call in run.calls] == [rec.messages[:2], rec.messages[:3]]
    assert run.deviations["turns_without_user"] == 1


def test_tool_results_followed_by_a_user_message_stop_the_loop_before_it_calls_again():
    rec = recording(user("Run the tests."), reply("", ("c1", "pytest")), result("c1", "2 failed"),
                    user("Stop, fix only the first one."), reply("Fixing the first failure."),
                    reply("", ("c2", "git diff")), result("c2", "diff --git a/x b/x"))
    run = replay(rec, seed())
    assert run.statuses == ["interrupted", "completed", "interrupted"]
    assert [call.messages for call in run.calls[1:]] == [rec.messages[:5], rec.messages[:6]]
    assert run.deviations["stopped_after_tools"] == 2
    assert run.deviations["missed_calls"] == run.deviations["extra_calls"] == 0


def test_a_turn_longer_than_the_iteration_cap_still_runs_every_recorded_call():
    steps = []
    for i in range(40):
        steps += [reply(f"Step {i}.", (f"c{i}", f"ls dir{i}")), result(f"c{i}", f"file{i}.py")]
    rec = recording(user("Explore the repository."), *steps, reply("Explored."))
    config = seed(**{"agent.max_iterations": 30})
    run = replay(rec, config)
    assert len(run.calls) == 41 and run.deviations["missed_calls"] == 0
    assert run.config_hash == config.digest()  # the raised cap does not change the tag


def test_the_plan_names_each_turn_its_replies_and_where_the_loop_must_stop():
    plan = plan_replay(recording(reply("Hi!"), user("a"), user("b"), reply("", ("c1", "ls")), result("c1", "x"),
                                 reply("done"), user("bye")).messages)
    assert [(t.users, t.first_reply, t.replies, t.stop_after) for t in plan.turns] == [
        ((), 0, 1, None), (("a", "b"), 1, 2, None)]
    assert plan.results == {"c1": "x"} and plan.unsent == 1 and plan.longest_turn == 2


# ---------------------------------------------------------------- deviations are counted, not absorbed


def test_an_empty_recorded_reply_makes_the_loop_ask_again_and_the_extra_call_is_counted():
    rec = recording(user("Anything?"), reply(""), user("Hello?"), reply("Yes, here."))
    run = replay(rec, seed())
    assert run.deviations["extra_calls"] >= 1
    assert run.statuses[0] == "failed" and run.statuses[1] == "completed"
    assert measure(run)["deviations"] >= 1


def test_a_call_the_recording_has_no_result_for_is_a_tool_mismatch():
    rec = recording(user("List files."), reply("", ("c1", "ls")), result("c1", "a.py"), reply("One file."))
    rec.messages[2]["tool_calls"][0]["function"]["name"] = "not a valid tool name"
    run = replay(rec, seed())
    assert run.deviations["tool_mismatches"] == 1


def test_a_window_too_small_for_the_recording_fails_turns_and_counts_the_missed_calls():
    rec = recording(user("Read the file."), reply("", ("c1", "cat big.txt")), result("c1", "word " * 4_000),
                    reply("It is long."))
    run = replay(rec, seed(**{"model.context_length": 1_000, "compression.fit_on_overflow": False}))
    assert run.statuses == ["failed"] and run.refused_calls >= 1
    assert run.deviations["missed_calls"] == 1


def test_under_seed_a_result_larger_than_the_window_is_cut_to_fit_and_the_turn_completes():
    rec = recording(user("Read the file."), reply("", ("c1", "cat big.txt")), result("c1", "word " * 4_000),
                    reply("It is long."))
    run = replay(rec, seed(**{"model.context_length": 1_000}))
    assert run.statuses == ["completed"] and run.refused_calls == 0 and run.deviations["missed_calls"] == 0
    fit = next(c for c in run.compressions if c.strategy == "fit_window")
    cut = fit.after[-1]["content"]
    assert "characters cut to fit the context window" in cut and cut.startswith("word word")


# ---------------------------------------------------------------- bad input


def test_a_recording_that_cannot_be_replayed_is_refused_with_every_problem_named():
    rec = recording(user("hi"), result("c9", "orphan"))
    with pytest.raises(RecordingError, match="answers no earlier tool call"):
        replay(rec, seed())
    with pytest.raises(RecordingError, match="messages"):
        replay({"id": "x", "messages": "not a list"}, seed())


@pytest.mark.parametrize("kwargs, error, match", [
    ({"run_id": ""}, ValueError, "run_id"),
    ({"summariser": object()}, TypeError, "summarise"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        replay(recording(user("hi"), reply("hello")), seed(), **kwargs)


def test_a_config_must_be_a_config():
    with pytest.raises(TypeError, match="Config"):
        replay(recording(user("hi"), reply("hello")), {"model": {}})


def test_a_dict_in_the_recorded_format_is_accepted():
    data = recording(user("hi"), reply("hello")).to_dict()
    assert len(replay(data, seed()).calls) == 1


# ---------------------------------------------------------------- events, summaries and the lab


def test_every_event_carries_the_run_id_and_sessions_the_config_hash_and_source():
    bus = EventBus()
    events = collect(bus)
    config = seed()
    run = replay(recording(user("hi"), reply("hello")), config, bus=bus, run_id="run-42")
    assert events and {event.run_id for event in events} == {"run-42"}
    started = [e for e in events if isinstance(e, SessionStarted)]
    assert [(s.source, s.config_hash) for s in started] == [("replay", config.digest())]
    assert run.session_ids == [started[0].session_id]


def test_without_a_store_nothing_touches_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    replay(recording(user("hi"), reply("hello")), seed())
    assert list(tmp_path.iterdir()) == []


def test_with_a_store_rows_are_written_as_for_a_live_run_and_tagged_with_the_run_id(tmp_path):
    rec = recording(user("Fix the parser."), reply("", ("c1", "cat parser.py")), result("c1", "def parse(): ..."),
                    reply("Fixed."))
    config = seed()
    lab_path = tmp_path / "lab.duckdb"
    run = replay(rec, config, run_id="ab-1", store=lab_path)
    lab = open_lab(lab_path)
    sessions = lab.sessions(run_id="ab-1")
    assert list(sessions["source"]) == ["replay"] and list(sessions["config_hash"]) == [config.digest()]
    assert lab.sessions(run_id="other").empty
    session_id = sessions["id"].iloc[0]
    assert int(sessions["api_call_count"].iloc[0]) == len(run.calls) == 2
    assert list(lab.history(session_id)) == rec.messages
    assert set(lab.messages(session_id)["run_id"]) == {"ab-1"}
    assert set(lab.tool_calls(session_id)["result"]) == {"def parse(): ..."}


def test_the_summariser_comes_from_the_config_and_an_llm_one_talks_to_its_endpoint():
    steps = []
    for i in range(12):
        steps += [reply(f"Reading part {i}.", (f"c{i}", f"cat part{i}.txt")), result(f"c{i}", f"part {i}: " + "data " * 300)]
    rec = recording(user("Read every part and report."), *steps, reply("All parts read."))
    window = {"model.context_length": 3_000}
    offline = replay(rec, seed(**window))
    assert offline.summaries and offline.deviations["missed_calls"] == 0
    server = LocalServer(OfflineModel())
    url = server.start()
    try:
        config = seed(**window).with_overrides({"compression.summariser": "llm", "model.base_url": url})
        run = replay(rec, config)
    finally:
        server.stop()
    assert run.summaries and server.calls >= len(run.summaries)
    assert [call.reply_index for call in run.calls] == list(range(13))


def test_a_given_summariser_is_used_and_counted():
    steps = []
    for i in range(12):
        steps += [reply(f"Part {i}.", (f"c{i}", f"cat p{i}")), result(f"c{i}", "data " * 300)]
    rec = recording(user("Read all parts."), *steps, reply("Done."))
    run = replay(rec, seed(**{"model.context_length": 3_000}), summariser=FixedSummariser("Parts were read."))
    assert run.summaries and all(s.output_tokens > 0 for s in run.summaries)
    assert any("Parts were read." in m.get("content", "") for call in run.calls for m in call.messages)


def test_rerunning_a_replay_gives_identical_metrics():
    steps = []
    for i in range(10):
        steps += [reply(f"Part {i}: id_{i}00.", (f"c{i}", f"cat p{i}")), result(f"c{i}", f"id_{i}00 " + "x " * 400)]
    rec = recording(user("Read all parts."), *steps, reply("Done: id_100, id_500."))
    config = seed(**{"model.context_length": 3_000})
    first, second = measure(replay(rec, config)), measure(replay(rec, config))
    assert first.keys() == second.keys()
    assert all(first[k] == second[k] or (math.isnan(first[k]) and math.isnan(second[k])) for k in first)


# ---------------------------------------------------------------- real recordings


def test_a_shared_recording_replays_with_its_own_replies_tool_results_and_contexts():
    for rec in (*shared_sessions(TAU2, 2), *shared_sessions(MINI_SWE, 1)):
        bus = EventBus()
        events = collect(bus)
        run = replay(rec, seed(**{"model.context_length": 200_000}), bus=bus)
        recorded = [i for i, m in enumerate(rec.messages) if m["role"] == "assistant"]
        assert [call.messages for call in run.calls] == [rec.messages[:i] for i in recorded]
        replayed = max(i for i, m in enumerate(rec.messages) if m["role"] != "user") + 1
        assert history_of(events) == rec.messages[:replayed]
        assert measure(run)["deviations"] == 0 and run.compressions == []


def test_compression_changes_the_context_of_a_shared_recording_but_never_its_replies():
    rec = shared_sessions(MINI_SWE, 1)[0]
    bus = EventBus()
    events = collect(bus)
    run = replay(rec, seed(**{"model.context_length": 8_000}), bus=bus)
    assert replies_of(events) == [m for m in rec.messages if m["role"] == "assistant"]
    results = [(e.tool_call_id, e.result) for e in events if isinstance(e, ToolCallFinished)]
    assert results == [(m["tool_call_id"], m["content"]) for m in rec.messages if m["role"] == "tool"]
    positions = [i for i, m in enumerate(rec.messages) if m["role"] == "assistant"]
    assert any(call.messages != rec.messages[:i] for call, i in zip(run.calls, positions, strict=True))
    metrics = measure(run)
    assert metrics["compressions"] > 0 and metrics["deviations"] == 0
    assert metrics["peak_prompt_tokens"] <= 8_000


# ---------------------------------------------------------------- the command line


def test_the_cli_prints_one_metrics_line_per_session_and_names_bad_lines(tmp_path, capsys):
    good = recording(user("hi"), reply("hello")).to_dict()
    path = tmp_path / "sessions.jsonl"
    lines = [json.dumps({**good, "id": "s1"}), "{not json", json.dumps({**good, "id": "s2"}),
             json.dumps({"id": "s3", "messages": []})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["replay", str(path)]) == 1
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["session"] for row in rows] == ["s1", "s2"]
    assert rows[0]["api_calls"] == 1 and rows[0]["task_survival"] is None
    assert f"{path}:2: broken JSON" in err and f"{path}:4:" in err


def test_the_cli_selects_sessions_limits_them_and_writes_the_lab(tmp_path, capsys):
    good = recording(user("hi"), reply("hello")).to_dict()
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(json.dumps({**good, "id": f"s{i}"}) for i in range(4)) + "\n", encoding="utf-8")
    lab_path = tmp_path / "lab.duckdb"
    assert main(["replay", str(path), "--session", "s1", "s3", "--store", str(lab_path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["session"] for row in rows] == ["s1", "s3"]
    assert len(open_lab(lab_path).sessions(run_id=rows[0]["run_id"])) == 2
    assert main(["replay", str(path), "--limit", "1"]) == 0
    assert [json.loads(line)["session"] for line in capsys.readouterr().out.splitlines()] == ["s0"]
    assert main(["replay", str(path), "--session", "nope"]) == 1
    assert "no session 'nope'" in capsys.readouterr().err


def test_the_cli_refuses_a_missing_file(tmp_path):
    with pytest.raises(SystemExit, match="no recordings file"):
        main(["replay", str(Path(tmp_path) / "missing.jsonl")])


def test_the_turn_entry_point_takes_a_list_of_texts():
    from hermeslab.agent import Agent

    with pytest.raises(TypeError, match="list of user texts"):
        Agent(OfflineModel()).run_turn("hello")
