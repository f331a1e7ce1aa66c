"""Inspect AI logs of a lab, an A/B run and a probe exam, read back with inspect-ai's own reader."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inspect_ai.log import list_eval_logs, read_eval_log

from hermeslab.cli import DEMO_FILES, main
from hermeslab.eval.ab import gather_recordings, run_ab
from hermeslab.eval.exporters.inspect_ab import ab_logs
from hermeslab.eval.exporters.inspect_exam import exam_logs
from hermeslab.eval.exporters.inspect_files import write_logs
from hermeslab.eval.exporters.inspect_lab import lab_logs, read_conversations
from hermeslab.eval.exporters.inspect_log import Tokens, chat_messages, model_usage
from hermeslab.eval.importers import import_paths
from hermeslab.eval.probes.readers import PerfectReader
from hermeslab.eval.probes.run import run_exam
from hermeslab.eval.recording import write_recordings
from hermeslab.eval.stats import metric_columns
from hermeslab.policies.loading import load_config
from hermeslab.providers import OfflineModel
from hermeslab.recordings.lab import import_lab
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab

OFFLINE = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


def _conversation(root: Path, lab: Path, model: str, script: list[str]) -> None:
    """One logged conversation with the offline model answering under ``model``'s name; ``/compress`` compresses."""
    workspace = root / f"ws-{model}"
    for name, text in DEMO_FILES.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    config = load_config(None).with_overrides({"tools.workspace": str(workspace), "store.path": str(lab),
                                               "model.context_length": 8_000, "model.name": model})
    with Runtime(config, source="test") as runtime:
        runtime.agent.provider = OfflineModel()
        runtime.writer.durable_turns = False
        for text in script:
            if text == "/compress":
                assert runtime.agent.compress().changed
            else:
                runtime.agent.chat(text)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """Two conversations on one model (one compressed, so it spans two sessions), one on another."""
    root = tmp_path_factory.mktemp("lab")
    path = root / "lab.duckdb"
    _conversation(root, path, "hermeslab-offline",
                  ["list files", "read src/inventory.py", "read docs/CHANGELOG.md", "/compress",
                   'search for "TODO" in src'])
    _conversation(root, path, "hermeslab-offline", ["Who are you?"])
    _conversation(root, path, "other-model", ["list files"])
    return path


def _read_all(folder: Path) -> list:
    return [read_eval_log(info.name) for info in list_eval_logs(str(folder), descending=False)]


def _arguments(call) -> dict:
    return json.loads(call["function"]["arguments"])


def test_a_labs_conversations_are_samples_with_their_messages_one_log_per_model(lab, tmp_path):
    written = write_logs(lab_logs(read_conversations(lab), lab.name), tmp_path)
    logs = {log.eval.model: log for log in map(read_eval_log, map(str, written))}
    sessions = open_lab(lab).sessions()
    assert set(logs) == set(sessions["model"]) == {"hermeslab-offline", "other-model"}
    roots = sessions[sessions["reason"] != "compression"]
    for model, log in logs.items():
        assert log.status == "success" and log.eval.task == "hermeslab-lab" and log.eval.task_args == {"lab": lab.name}
        assert sorted(s.id for s in log.samples) == sorted(roots.loc[roots["model"] == model, "id"])
        for sample in log.samples:
            recorded = import_lab(lab, sample.id).messages
            assert [(m.role, m.text) for m in sample.messages] == [(m["role"], m["content"]) for m in recorded]
            for message, original in zip(sample.messages, recorded):
                calls = [(c.id, c.function, c.arguments) for c in (getattr(message, "tool_calls", None) or [])]
                assert calls == [(c["id"], c["function"]["name"], _arguments(c)) for c in original.get("tool_calls", [])]
                if message.role == "tool":
                    assert message.tool_call_id == original["tool_call_id"] and message.function
            assert sample.input == next(m["content"] for m in recorded if m["role"] == "user")
    compressed = next(s for s in logs["hermeslab-offline"].samples if s.metadata["compressions"])
    assert compressed.metadata["compressions"] == 1 and len(compressed.metadata["lineage"]) == 2
    assert any(m.role == "tool" for m in compressed.messages)


def test_model_usage_is_the_labs_api_calls_summed_per_model_and_purpose(lab, tmp_path):
    written = write_logs(lab_logs(read_conversations(lab), lab.name), tmp_path)
    calls = open_lab(lab).api_calls()
    for log in map(read_eval_log, map(str, written)):
        mine = calls[calls["model"] == log.eval.model]
        usage = log.stats.model_usage[log.eval.model]
        assert usage.input_tokens + (usage.input_tokens_cache_read or 0) == mine["prompt_tokens"].sum() > 0
        assert usage.output_tokens == mine["completion_tokens"].sum() > 0
        assert usage.total_tokens == mine["prompt_tokens"].sum() + mine["completion_tokens"].sum()
        for sample in log.samples:
            lineage = sample.metadata["lineage"]
            own = mine[mine["session_id"].isin(lineage)]
            assert sample.model_usage[log.eval.model].output_tokens == own["completion_tokens"].sum()
            assert {purpose: usage.output_tokens for purpose, usage in sample.role_usage.items()} == \
                own.groupby("purpose")["completion_tokens"].sum().to_dict()
            assert sample.metadata["calls"] == len(own)
    compressed = next(s for s in read_eval_log(str(written[0])).samples if s.metadata["compressions"])
    assert set(compressed.role_usage) == {"turn", "summary"}


@given(st.integers(0, 10**7), st.integers(0, 10**6), st.integers(0, 10**7), st.integers(0, 10**6),
       st.integers(0, 10**5))
def test_usage_splits_a_reported_prompt_as_inspects_openai_provider_does(prompt, completion, read, write, reasoning):
    usage = model_usage(Tokens(prompt, completion, read, write, reasoning))
    cached = (usage.input_tokens_cache_read or 0) + (usage.input_tokens_cache_write or 0)
    assert usage.input_tokens + (cached if prompt >= read + write else 0) == prompt
    assert usage.total_tokens == prompt + completion and usage.output_tokens == completion
    assert (usage.reasoning_tokens or 0) == reasoning


def test_arguments_that_are_not_a_json_object_are_kept_as_a_parse_error():
    (message,) = chat_messages([{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "ls -la"}}]}])
    (call,) = message.tool_calls
    assert call.arguments == {} and call.parse_error == "arguments are not a JSON object: ls -la"


def test_a_developer_message_is_the_system_prompt_and_an_unknown_role_is_named():
    (message,) = chat_messages([{"role": "developer", "content": "Be brief."}])
    assert message.role == "system" and message.text == "Be brief."
    with pytest.raises(ValueError, match="role 'critic' has no Inspect counterpart"):
        chat_messages([{"role": "critic", "content": "no"}])


def test_export_command_writes_the_logs_and_import_reads_the_conversations_back(lab, tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    assert main(["export", "--format", "inspect", "--lab", str(lab), "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("exported ") == 2 and "2 conversation(s) on hermeslab-offline" in printed
    report = import_paths([folder])
    assert not report.skipped and len(report.recordings) == 3
    for recording in report.recordings:
        original = import_lab(lab, recording.meta["sample_id"]).messages
        assert [(m["role"], m["content"]) for m in recording.messages] == [(m["role"], m["content"]) for m in original]
        assert [[_arguments(c) for c in m.get("tool_calls", [])] for m in recording.messages] == \
            [[_arguments(c) for c in m.get("tool_calls", [])] for m in original]


def test_export_command_takes_chosen_sessions_and_refuses_bad_input_writing_nothing(lab, tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    other = open_lab(lab).sessions().query("model == 'other-model'")["id"].iloc[0]
    assert main(["export", "--format", "inspect", "--lab", str(lab), "--out", str(folder), other]) == 0
    (log,) = _read_all(folder)
    assert [s.id for s in log.samples] == [other] and log.eval.model == "other-model"
    for argv, says in [(["--out", str(tmp_path / "missing")], "no folder"),
                       (["--out", str(folder), "nope"], "no session 'nope'"),
                       ([], "needs --out DIR")]:
        with pytest.raises(SystemExit, match=says):
            main(["export", "--format", "inspect", "--lab", str(lab), *argv])
    assert [p.name for p in folder.iterdir()] == [Path(log.location).name]
    with pytest.raises(SystemExit, match="takes one SESSION, got 0"):
        main(["export", "--lab", str(lab)])


def test_a_failed_write_leaves_no_file_behind(lab, tmp_path, monkeypatch):
    import inspect_ai.log

    logs = lab_logs(read_conversations(lab), lab.name)
    real = inspect_ai.log.write_eval_log
    written = []

    def fail_on_second(log, location, format):
        if written:
            raise OSError("disk full")
        written.append(location)
        return real(log, location, format=format)

    monkeypatch.setattr(inspect_ai.log, "write_eval_log", fail_on_second)
    with pytest.raises(OSError, match="disk full"):
        write_logs(logs, tmp_path)
    assert written and list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- an A/B run and a probe exam


@pytest.fixture(scope="module")
def ab_run():
    configs = {"w9000": "seed,model.context_length=9000", "w8000": "seed,model.context_length=8000"}
    frame = run_ab([OFFLINE], configs, executor="serial", progress=False, limit=3)
    return frame, {name: load_config(spec) for name, spec in configs.items()}


def test_an_ab_run_is_one_log_per_config_its_metrics_the_scores(ab_run, tmp_path):
    frame, configs = ab_run
    recordings = {r.id: r for r in gather_recordings([OFFLINE], limit=3)[0]}
    logs = [read_eval_log(str(p)) for p in write_logs(ab_logs(frame, configs, recordings=recordings), tmp_path)]
    assert [log.eval.solver for log in logs] == ["w9000", "w8000"]
    metrics = metric_columns(frame)
    for log in logs:
        name = log.eval.solver
        rows = frame[frame["config"] == name]
        assert log.eval.task == "hermeslab-ab" and log.eval.model == configs[name].model.name
        assert log.eval.run_id == frame.attrs["run_id"] and log.eval.metadata["config"]["name"] == name
        assert log.eval.metadata["deviations_from_preset"] == frame.attrs["deviations_from_preset"][name]
        by_id = {row["session_id"]: row for row in rows.to_dict("records")}
        assert sorted(s.id for s in log.samples) == sorted(by_id)
        for sample in log.samples:
            row = by_id[sample.id]
            assert sample.error is None and sorted(sample.scores) == sorted(metrics)
            for metric in metrics:
                value = sample.scores[metric].value
                assert (math.isnan(value) and math.isnan(row[metric])) or value == row[metric], metric
            assert sample.metadata["token_unit"] == row["token_unit"]
            assert [m.text for m in sample.messages] == [m["content"] for m in recordings[sample.id].messages]
        means = {score.name: score.metrics["mean"].value for score in log.results.scores if score.metrics}
        assert means["prompt_tokens"] == pytest.approx(rows["prompt_tokens"].mean())


def test_a_failed_cell_is_a_sample_with_its_error(ab_run):
    frame, configs = ab_run
    broken = frame.copy()
    broken.loc[broken.index[0], ["status", "error"]] = ["error", "ValueError: no reply"]
    (first, _) = ab_logs(broken, configs)
    assert first.samples[0].error.message == "ValueError: no reply" and not first.samples[0].scores
    assert first.results.completed_samples == len(first.samples) - 1
    with pytest.raises(ValueError, match="no Config given for the A/B config"):
        ab_logs(frame, {"w9000": configs["w9000"]})


def test_ab_command_writes_its_logs(tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    main(["ab", str(OFFLINE), "--config", "seed", "--config", "seed,model.context_length=8000", "--executor",
          "serial", "--limit", "2", "--resamples", "99", "--inspect-log", str(folder)])
    assert capsys.readouterr().out.count("Inspect log of ") == 2
    assert sorted(len(log.samples) for log in _read_all(folder)) == [2, 2]
    with pytest.raises(SystemExit, match="--inspect-log: no folder"):
        main(["ab", str(OFFLINE), "--config", "seed", "--config", "hermes-0.19", "--inspect-log",
              str(tmp_path / "missing")])


def test_a_probe_exam_is_one_log_per_config_window_and_arm(tmp_path):
    recordings = gather_recordings([OFFLINE])[0][:8:3]
    frame = run_exam(recordings, ["seed"], windows=[8_000], answerer=PerfectReader(window=6_000), progress=False)
    logs = [read_eval_log(str(p)) for p in write_logs(exam_logs(frame), tmp_path)]
    assert sorted(log.eval.task_args["arm"] for log in logs) == ["ceiling", "compacted", "floor"]
    for log in logs:
        rows = frame[frame["arm"] == log.eval.task_args["arm"]]
        assert log.eval.task == "hermeslab-exam" and log.eval.model == "perfect-reader-1"
        assert log.eval.model_roles["grader"].model == "match-1" and len(log.samples) == len(rows)
        by_id = {f"{row['recording_id']}/{row['compaction']}/{row['probe_id']}": row for row in rows.to_dict("records")}
        assert sorted(s.id for s in log.samples) == sorted(by_id)
        for sample in log.samples:
            row, score = by_id[sample.id], sample.scores["probe"]
            assert sample.input == row["question"] and sample.metadata["probe_type"] == row["probe_type"]
            if row["fittable"]:
                assert score.value == row["score"] and score.answer == row["answer"]
                assert [m.text for m in sample.messages] == [row["question"], row["answer"]]
            else:
                assert math.isnan(score.value) and score.reason == "unfittable"
    assert not frame["fittable"].all() and frame["fittable"].any()


def test_exam_command_writes_its_logs(tmp_path, capsys):
    recordings = tmp_path / "two.jsonl"
    write_recordings(recordings, gather_recordings([OFFLINE])[0][:2])
    folder = tmp_path / "logs"
    folder.mkdir()
    main(["exam", str(recordings), "--config", "seed", "--quiet", "--resamples", "99", "--inspect-log", str(folder)])
    assert capsys.readouterr().out.count("Inspect log of seed") == 3
    assert sorted(log.eval.task_args["arm"] for log in _read_all(folder)) == ["ceiling", "compacted", "floor"]


def test_without_inspect_ai_the_commands_say_which_extra_before_any_work(lab, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    for argv in (["export", "--format", "inspect", "--lab", str(lab), "--out", str(tmp_path)],
                 ["ab", str(OFFLINE), "--config", "seed", "--config", "hermes-0.19", "--inspect-log", str(tmp_path)]):
        with pytest.raises(SystemExit, match=r"needs the inspect-ai package: pip install 'hermeslab\[inspect\]'$"):
            main(argv)
    assert list(tmp_path.iterdir()) == []
