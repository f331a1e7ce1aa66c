"""Replays whose summariser fell back: counted, failed by default or kept with a note, and the commands say why."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from hermeslab.cli import main
from hermeslab.context.types import SummaryOutcome, SummaryRequest
from hermeslab.core.config import Config
from hermeslab.policies.loading import apply_preset
from hermeslab.eval.ab import ReplayCell, failure_line, run_ab
from hermeslab.eval.checked import NotedRow, SummaryFallbackError, checked_row, summary_problem
from hermeslab.eval.metrics import measure
from hermeslab.eval.replay import replay
from hermeslab.eval.results import ResultsFile, read_results
from hermeslab.providers import LocalServer, OfflineModel
from hermeslab.recordings import Recording


def reply(text: str, call_id: str, command: str) -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def long_recording(sid: str = "s0", parts: int = 12) -> Recording:
    """Long tool results: with twelve, the seed preset compresses (and summarises) twice under a 3,000-token window."""
    messages: list[dict] = [{"role": "system", "content": "You fix bugs."},
                            {"role": "user", "content": "Read every part and report."}]
    for i in range(parts):
        messages += [reply(f"Reading part {i}.", f"c{i}", f"cat part{i}.txt"),
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"part {i}: " + "data " * 300}]
    messages.append({"role": "assistant", "content": "All parts read."})
    return Recording(id=sid, messages=messages, model="gpt-4.1")


def config(**overrides) -> Config:
    return apply_preset(Config(), "seed").with_overrides({"model.context_length": 3_000, **overrides})


def closed_url() -> str:
    """An endpoint on the loopback interface that refuses connections: a port just released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def write_configs(folder: Path, url: str) -> list[str]:
    """``--config`` options for an extractive baseline and an LLM summariser at ``url``, named by file stem."""
    (folder / "extractive.yaml").write_text("model:\n  context_length: 3000\n", encoding="utf-8")
    (folder / "llm.yaml").write_text(f"model:\n  context_length: 3000\n  base_url: {url}\n"
                                     "compression:\n  summariser: llm\n", encoding="utf-8")
    return ["--config", str(folder / "extractive.yaml"), "--config", str(folder / "llm.yaml")]


def sessions_file(folder: Path, *recordings: Recording) -> Path:
    path = folder / "sessions.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recordings), encoding="utf-8")
    return path


class EverySecondFails:
    """A summariser whose every second call is answered by a fallback, as the LLM summariser's would be."""

    def __init__(self) -> None:
        self.calls = 0

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        self.calls += 1
        if self.calls % 2:
            return SummaryOutcome(body="The parts were read.")
        return SummaryOutcome(body="Parts (extractive).", fallback_used=True, error=f"call {self.calls}: timeout")


class NeverAnswers:
    """A summariser without a fallback whose endpoint always fails: no summary at all."""

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        return SummaryOutcome(body="", error="server_error: 502 bad gateway")


def noted_badly(recording: Recording, config: Config) -> NotedRow:
    return NotedRow({"messages": len(recording.messages)}, note=5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the commands


def test_ab_fails_a_cell_whose_llm_summariser_was_never_reached_and_says_why(tmp_path, capsys):
    url = closed_url()
    source = sessions_file(tmp_path, long_recording())
    out = tmp_path / "ab.duckdb"
    argv = ["ab", str(source), *write_configs(tmp_path, url), "--executor", "serial", "--resamples", "99",
            "--out", str(out)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "1 sessions x 2 configs, 1 failed cell(s)" in captured.out
    exits = [line for line in captured.err.splitlines() if line.startswith("hermeslab ab: exit 1: ")]
    assert len(exits) == 1
    assert exits[0].startswith("hermeslab ab: exit 1: 1 of 2 cell(s) failed (1 SummaryFallbackError); the first, "
                               "s0 under llm: SummaryFallbackError: the configured summariser was never reached")
    assert url in exits[0] and "--allow-summary-fallback" in exits[0]
    stored = read_results(out).set_index("config")
    assert stored.loc["llm", "status"] == "error" and stored.loc["extractive", "status"] == "ok"


def test_ab_with_the_option_keeps_the_cell_flagged_and_the_table_counts_the_fallbacks(tmp_path, capsys):
    url = closed_url()
    source = sessions_file(tmp_path, long_recording())
    out = tmp_path / "ab.duckdb"
    argv = ["ab", str(source), *write_configs(tmp_path, url), "--executor", "serial", "--resamples", "99",
            "--out", str(out)]
    assert main([*argv, "--allow-summary-fallback"]) == 0
    captured = capsys.readouterr()
    assert "0 failed cell(s)" in captured.out and "hermeslab ab: exit" not in captured.err
    assert "warning: s0 under llm kept, flagged: the configured summariser was never reached (" in captured.err
    row = next(line.split() for line in captured.out.splitlines() if line.startswith("summary_fallbacks "))
    mean_a, mean_b = float(row[3]), float(row[4])
    assert mean_a == 0 and mean_b > 0

    stored = read_results(out).set_index("config")
    assert stored.loc["llm", "status"] == "ok" and stored.loc["llm", "summary_fallbacks"] > 0
    assert stored.loc["llm", "summary_fallbacks"] == stored.loc["llm", "summary_calls"]
    assert url in stored.loc["llm", "note"] and pd.isna(stored.loc["extractive", "note"])
    assert stored.loc["extractive", "summary_fallbacks"] == 0

    # the kept row is never reused by a run that fails such cells: it replays, and fails
    assert main(argv) == 1
    runs = ResultsFile(out).runs()
    assert list(runs["computed"]) == [2, 2] and list(runs["failed"]) == [0, 1]


def test_replay_fails_such_a_session_unless_told_to_keep_it(tmp_path, capsys):
    url = closed_url()
    source = sessions_file(tmp_path, long_recording("r0"))
    spec = f"seed,model.context_length=3000,compression.summariser=llm,model.base_url={url}"
    assert main(["replay", str(source), "--config", spec]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    exits = [line for line in captured.err.splitlines() if line.startswith("hermeslab replay: exit 1: ")]
    assert len(exits) == 1 and "1 problem(s); the first: session 'r0': the configured summariser was never" in exits[0]

    assert main(["replay", str(source), "--config", spec, "--allow-summary-fallback"]) == 0
    captured = capsys.readouterr()
    line = json.loads(captured.out)
    assert line["summary_fallbacks"] == line["summary_calls"] > 0 and url in line["note"]
    assert "warning: session 'r0' kept, flagged: the configured summariser was never reached" in captured.err


# ---------------------------------------------------------------- the check itself


def test_a_reachable_llm_summariser_leaves_no_note():
    server = LocalServer(OfflineModel())
    url = server.start()
    try:
        row = ReplayCell()(long_recording(), config(**{"compression.summariser": "llm", "model.base_url": url}))
    finally:
        server.stop()
    assert isinstance(row, NotedRow) and row.note is None
    assert row["summary_calls"] > 0 and row["summary_fallbacks"] == row["summary_failures"] == 0


def test_a_partial_fallback_is_named_with_its_share_and_first_error():
    run = replay(long_recording(parts=30), config(), summariser=EverySecondFails())
    total = len(run.summaries)
    assert total >= 2
    fell = total // 2
    assert measure(run)["summary_fallbacks"] == fell and measure(run)["summary_failures"] == 0
    assert summary_problem(run) == (f"the configured summariser was not reached for {fell} of {total} summaries "
                                    f"({fell} written by the fallback summariser); first error: call 2: timeout")
    with pytest.raises(SummaryFallbackError, match="--allow-summary-fallback"):
        checked_row(run, config())
    kept = checked_row(run, config(), allow_summary_fallback=True)
    assert kept.note == summary_problem(run) and kept["summary_fallbacks"] == fell


def test_summaries_nobody_wrote_are_counted_apart():
    run = replay(long_recording(), config(), summariser=NeverAnswers())
    row = measure(run)
    assert row["summary_failures"] == len(run.summaries) > 0 and row["summary_fallbacks"] == 0
    assert summary_problem(run) == (f"the configured summariser was never reached ({len(run.summaries)} not written "
                                    "at all); first error: server_error: 502 bad gateway")


def test_a_run_with_every_summary_written_has_no_problem():
    from hermeslab.eval.replay_compression import FixedSummariser

    run = replay(long_recording(), config(), summariser=FixedSummariser())
    assert run.summaries and summary_problem(run) is None
    assert checked_row(run, config()).note is None


def test_keeping_fallbacks_is_part_of_the_cell_identity():
    assert ReplayCell().identity == "hermeslab.eval.ab.ReplayCell(summariser=config)"
    assert ReplayCell(allow_summary_fallback=True).identity.endswith(", summary_fallback=kept)")
    with pytest.raises(TypeError, match="allow_summary_fallback must be True or False"):
        ReplayCell(allow_summary_fallback="yes")


def test_a_note_that_is_not_text_fails_the_cell():
    frame = run_ab([long_recording()], {"seed": "seed"}, cell=noted_badly, executor="serial", progress=False)
    assert frame.loc[0, "status"] == "error" and "note must be a non-empty string" in frame.loc[0, "error"]


def test_a_results_file_from_before_notes_still_loads(tmp_path):
    path = tmp_path / "ab.duckdb"
    cell = ReplayCell(summariser=None, allow_summary_fallback=True)
    configs = {"seed": config(), "tight": config(**{"model.context_length": 2_500})}
    run_ab([long_recording()], configs, cell=cell, out=path, executor="serial", progress=False)
    with duckdb.connect(str(path)) as con:  # the schema as written before the column existed
        con.execute("ALTER TABLE results DROP COLUMN note")
    frame = run_ab([long_recording(), long_recording("s1")], configs, cell=cell, out=path, executor="serial",
                   progress=False)
    assert frame["note"].isna().all() and (frame["status"] == "ok").all()
    assert list(ResultsFile(path).runs()["reused"]) == [0, 2]


def test_the_failure_line_counts_kinds_and_quotes_the_first():
    frame = pd.DataFrame({"session_id": ["a", "b", "c", "d"], "config": ["x", "x", "y", "y"],
                          "status": ["error", "ok", "error", "error"],
                          "error": ["SummaryFallbackError: never reached", None, "RuntimeError: boom",
                                    "SummaryFallbackError: never reached"]})
    frame.attrs["problems"] = ["bad line"]
    assert failure_line(frame) == ("3 of 4 cell(s) failed (2 SummaryFallbackError, 1 RuntimeError); the first, a under "
                                   "x: SummaryFallbackError: never reached; 1 recording(s) or line(s) skipped")
    finished = frame.assign(status="ok", error=None)
    finished.attrs["problems"] = ["bad line"]
    assert failure_line(finished) == "1 recording(s) or line(s) skipped"
    finished.attrs["problems"] = []
    assert failure_line(finished) is None
