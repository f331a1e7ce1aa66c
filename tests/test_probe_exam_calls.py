"""The probe exam's model calls are rows of the lab's api_calls, in a session of the exam's own."""

from __future__ import annotations

from pathlib import Path

from hermeslab.eval.ab import gather_recordings
from hermeslab.eval.probes.judge import EndpointJudge
from hermeslab.eval.probes.readers import EndpointAnswerer
from hermeslab.eval.probes.run import run_exam
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.store import open as open_lab

SHARED = sorted((Path(__file__).resolve().parents[2] / "shared" / "datasets").glob("*.jsonl"))


def exam(url: str, lab: Path):
    recordings = gather_recordings([SHARED[0]], limit=1)[0]
    answerer = EndpointAnswerer(url, "hermeslab-offline", window=32_000, max_tokens=16)
    judge_provider = OpenAICompatProvider(url, None, "hermeslab-offline")
    try:
        return run_exam(recordings, ["seed"], windows=[8_000], answerer=answerer, progress=False, lab=lab,
                        judge=EndpointJudge(judge_provider, "hermeslab-offline"), probe_types=["recall"],
                        arms=["compacted"])
    finally:
        answerer.close()
        judge_provider.close()


def test_every_exam_call_is_a_row_and_the_exam_session_totals_are_their_sums(tmp_path):
    lab_path = tmp_path / "lab.duckdb"
    with LocalServer(OfflineModel(), personality="llama-server") as server:
        first = exam(server.base_url, lab_path)
        assert server.calls > 0 and first.attrs["calls_made"] > 0
        # The answers come from the lab; the offline model cannot judge, so its failed judgements are asked again.
        second = exam(server.base_url, lab_path)
        assert second.attrs["calls_made"] == 0 and second["error"].str.startswith("judge:").all()
        served = server.calls
    lab = open_lab(lab_path)
    calls = lab.api_calls()
    assert len(calls) == served and set(calls["purpose"]) == {"exam"}
    assert set(calls["session_id"]) == {first.attrs["exam_session"], second.attrs["exam_session"]}
    answered = calls[calls["error_class"].isna()]
    assert len(answered) == len(calls) and (calls["prompt_tokens"] > 0).all()
    assert set(calls["usage_source"]) == {"reported"} and calls["server_model"].notna().all()
    sessions = lab.sessions().set_index("id")
    for session_id, rows in calls.groupby("session_id"):
        session = sessions.loc[session_id]
        assert session["source"] == "probe_exam" and session["end_reason"] == "exam_finished"
        assert (session["all_api_call_count"], session["all_input_tokens"], session["all_output_tokens"]) == (
            len(rows), rows["prompt_tokens"].sum(), rows["completion_tokens"].sum())
        assert session["api_call_count"] == 0  # no user turn: the turn-only totals stay empty


def test_an_exam_without_a_lab_logs_nothing_and_leaves_its_callers_as_they_were():
    with LocalServer(OfflineModel(), personality="llama-server") as server:
        answerer = EndpointAnswerer(server.base_url, "hermeslab-offline", max_tokens=16)
        try:
            frame = run_exam(gather_recordings([SHARED[0]], limit=1)[0], ["seed"], windows=[8_000],
                             answerer=answerer, progress=False, probe_types=["recall"], arms=["compacted"])
        finally:
            answerer.close()
    assert answerer.on_call is None and frame.attrs["exam_session"] is None
