"""The probe exam runner: controls with the perfect reader, the lab cache, resuming a killed exam, NaN never 0."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import cache
from pathlib import Path

import duckdb
import pytest

from hermeslab.core.provider import ProviderError
from hermeslab.eval.ab import gather_recordings
from hermeslab.eval.probes.bank import BANK_TYPES
from hermeslab.eval.probes.readers import PerfectReader, SilentReader
from hermeslab.eval.probes.run import COLUMNS, run_exam

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"
SHARED = sorted((ROOT.parent / "shared" / "datasets").glob("*.jsonl"))


@cache
def sample() -> tuple:
    """Every third shipped recording and the first two of every shared file (the benchmark takes them all)."""
    recordings, _ = gather_recordings([SHIPPED])
    chosen = list(recordings[::3])
    for path in SHARED:
        chosen += gather_recordings([path], limit=2)[0]
    return tuple(chosen)


@cache
def perfect_exam():
    return run_exam(list(sample()), ["seed", "hermes-0.19"], windows=[8_000, 16_000], answerer=PerfectReader(),
                    progress=False)


def test_the_perfect_reader_scores_one_at_the_ceiling_and_zero_at_the_floor():
    frame = perfect_exam()
    assert list(frame.columns) == list(COLUMNS)
    scored = frame[frame["fittable"]]
    assert len(scored) == len(frame) and frame["error"].isna().all()
    by_arm = scored.groupby("arm")["score"].agg(["min", "max"])
    assert by_arm.loc["ceiling"].tolist() == [1.0, 1.0]
    assert by_arm.loc["floor"].tolist() == [0.0, 0.0]
    assert set(frame["probe_type"]) == set(BANK_TYPES)
    ceiling = frame[frame["arm"] == "ceiling"]
    assert (ceiling["answer"] == ceiling["gold"]).all() and (ceiling["source_start"] < ceiling["source_end"]).all()
    assert set(frame["window"]) == {8_000, 16_000} and set(frame["config"]) == {"seed", "hermes-0.19"}
    assert 0.0 < scored.loc[scored["arm"] == "compacted", "score"].mean() < 1.0
    assert (frame["retained_tokens"] > 0).all() and (frame["removed_tokens"] > 0).all()
    attrs = frame.attrs
    assert attrs["answerer"] == "perfect-reader-1" and attrs["judge"] == "match-1"
    assert attrs["probes"] * 3 == len(frame) and attrs["sessions"] > 5
    assert attrs["calls_made"] + attrs["cache_hits"] == len(frame)
    assert frame["token_unit"].str.startswith("tiktoken").all()


def test_a_rerun_answers_everything_from_the_lab(tmp_path):
    lab = tmp_path / "lab.duckdb"
    recordings = list(sample()[-4:])
    first = run_exam(recordings, {"seed": "seed"}, windows=[8_000], answerer=PerfectReader(), lab=lab,
                     progress=False)
    again = run_exam(recordings, {"seed": "seed"}, windows=[8_000], answerer=PerfectReader(), lab=lab,
                     progress=True)
    assert len(first) > 0 and first["cached"].mean() < 1.0
    assert again.attrs["calls_made"] == 0 and again["cached"].all()
    assert again.attrs["bank_hash"] == first.attrs["bank_hash"]
    assert again["points"].tolist() == first["points"].tolist()


def test_a_context_beyond_the_window_is_unfittable_and_scores_nan():
    recordings = list(sample()[-4:])
    narrow = run_exam(recordings, ["seed"], windows=[8_000], answerer=PerfectReader(window=3_000), progress=False)
    unfit = narrow[~narrow["fittable"]]
    assert len(unfit) and unfit["points"].isna().all() and unfit["answer"].isna().all()
    assert (narrow.loc[narrow["arm"] == "floor", "fittable"]).all()
    nothing = run_exam(recordings, ["seed"], windows=[8_000], answerer=SilentReader(window=5), progress=False)
    assert len(nothing) and nothing["points"].isna().all() and nothing["score"].isna().all()
    assert nothing.attrs["calls_made"] == 0


class Failing:
    name = "failing-1"
    window = None

    def __init__(self):
        self.calls = 0

    def answer(self, messages, tools, question):
        self.calls += 1
        raise ProviderError("the server went away", status=503)


def test_a_failed_call_scores_nan_with_its_error_and_is_asked_again(tmp_path):
    lab = tmp_path / "lab.duckdb"
    recordings = list(sample()[-2:])
    failing = Failing()
    frame = run_exam(recordings, ["seed"], windows=[8_000], answerer=failing, lab=lab, progress=False)
    assert len(frame) and frame["points"].isna().all()
    assert frame["error"].str.contains("server went away").all()
    before = failing.calls
    run_exam(recordings, ["seed"], windows=[8_000], answerer=failing, lab=lab, progress=False)
    assert failing.calls == 2 * before


def test_bad_arguments_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="question writer"):
        run_exam([], ["seed"], windows=[8_000], answerer=PerfectReader(), probe_types=["model_written"])
    with pytest.raises(ValueError, match="windows"):
        run_exam([], ["seed"], windows=[0], answerer=PerfectReader())
    with pytest.raises(TypeError, match="answerer"):
        run_exam([], ["seed"], windows=[8_000], answerer=object())


#: A subprocess that runs an exam with a reader counting its calls (one line each) and answering slowly.
KILLED_EXAM = textwrap.dedent("""
    import sys, time
    from hermeslab.eval.ab import gather_recordings
    from hermeslab.eval.probes.readers import PerfectReader
    from hermeslab.eval.probes.run import run_exam

    class Counting(PerfectReader):
        cheap = False

        def __init__(self, log, pause):
            super().__init__()
            self.name, self.log, self.pause = "counting-reader", log, pause

        def answer(self, messages, tools, question, *, probe):
            with open(self.log, "a") as handle:
                handle.write(probe.probe_id + "\\n")
            time.sleep(self.pause)
            return super().answer(messages, tools, question, probe=probe)

    def exam(log, lab, pause, source):
        recordings = gather_recordings([source], limit=3)[0]
        return run_exam(recordings, ["seed"], windows=[8_000], answerer=Counting(log, pause), lab=lab,
                        progress=False)

    if __name__ == "__main__":
        exam(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4])
""")


def test_a_killed_exam_resumes_making_only_the_missing_calls(tmp_path):
    script, log, lab = tmp_path / "exam.py", tmp_path / "calls.log", tmp_path / "lab.duckdb"
    script.write_text(KILLED_EXAM)
    source = str(SHIPPED)
    process = subprocess.Popen([sys.executable, str(script), str(log), str(lab), "0.05", source], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if log.exists() and len(log.read_text().splitlines()) >= 10:
                break
            time.sleep(0.02)
        assert process.poll() is None, "the exam ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    made_before = len(log.read_text().splitlines())
    with duckdb.connect(str(lab), read_only=True) as con:
        stored = con.execute("SELECT count(*) FROM exam_cache WHERE kind = 'answer'").fetchone()[0]
    assert made_before - 1 <= stored <= made_before  # at most the answer in flight was lost

    spec = importlib.util.spec_from_file_location("killed_exam", script)
    killed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(killed)
    fresh = killed.exam(str(tmp_path / "fresh.log"), None, 0.0, source).attrs["calls_made"]
    frame = killed.exam(str(log), str(lab), 0.0, source)
    made_after = len(log.read_text().splitlines()) - made_before
    assert made_after == frame.attrs["calls_made"] == fresh - stored
    assert made_before + made_after in (fresh, fresh + 1)
    assert frame["cached"].sum() >= stored and frame["points"].notna().all()
    again = killed.exam(str(log), str(lab), 0.0, source)
    assert again.attrs["calls_made"] == 0 and again["cached"].all()


# ---------------------------------------------------------------- model-written questions


class Writer:
    """Writes one question about the region; with ``refuse`` it turns structured output away as some servers do."""

    name = "writer"

    def __init__(self, reply: str, refuse: bool = False):
        self.reply, self.refuse, self.requests = reply, refuse, []

    def complete(self, request):
        from hermeslab.core.provider import ChatResponse

        self.requests.append(request)
        if self.refuse and "response_format" in request.extra:
            raise ProviderError("'response_format' is not supported by this server", status=400)
        return ChatResponse(message={"role": "assistant", "content": self.reply})

    def stream(self, request):
        yield self.complete(request)


def written_compaction():
    from hermeslab.eval.probes.context import EffectiveCompaction

    before = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Ship order_4711 today."},
              {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks."}]
    return EffectiveCompaction(index=0, call=0, records=(0,), before=before, compacted=[before[0], before[3]],
                               uncompacted=before, removed=(1, 2), retained_tokens=1, removed_tokens=1,
                               ceiling_tokens=1)


@pytest.mark.parametrize("refuse", [False, True])
def test_written_questions_ask_for_structured_output_and_fall_back_once(tmp_path, refuse):
    from hermeslab.eval.probes.cache import ExamStore
    from hermeslab.eval.probes.written import QuestionWriter, written_probes
    from hermeslab.providers.server import LocalServer

    reply = '{"questions": [{"question": "Which order ships today?", "answer": "Order_4711"}]}'
    provider = Writer(reply, refuse)
    store = ExamStore(tmp_path / "lab.duckdb")
    with LocalServer(provider) as server:
        writer = QuestionWriter(server.base_url, "tiny", per_compaction=2)
        try:
            first = written_probes("rec", written_compaction(), writer, store)
            again = written_probes("rec", written_compaction(), writer, store)
        finally:
            writer.close()
    assert [p.gold for p in first.probes] == ["Order_4711"] and first.called and not again.called
    probe = first.probes[0]
    assert probe.probe_type == "model_written" and probe.source_message == 1 and probe.source_span == (5, 15)
    structured = [r for r in provider.requests if "response_format" in r.extra]
    assert len(structured) == 1 and writer.structured is not refuse
    assert len(provider.requests) == 1 + refuse


def test_a_prose_reply_gives_no_probes_and_says_why(tmp_path):
    from hermeslab.eval.probes.cache import ExamStore
    from hermeslab.eval.probes.written import QuestionWriter, written_probes
    from hermeslab.providers.server import LocalServer

    with LocalServer(Writer("Here are some questions you could ask about the order...")) as server:
        writer = QuestionWriter(server.base_url, "tiny")
        try:
            written = written_probes("rec", written_compaction(), writer, ExamStore(None))
        finally:
            writer.close()
    assert written.probes == [] and "not JSON" in written.problem


def test_the_exam_asks_model_written_probes_beside_the_bank(tmp_path):
    from hermeslab.eval.probes.written import QuestionWriter
    from hermeslab.providers.server import LocalServer

    reply = '{"questions": [{"question": "What did the user ask for first?", "answer": "unknowable detail"}]}'
    recordings = list(sample()[-2:])
    with LocalServer(Writer(reply)) as server:
        writer = QuestionWriter(server.base_url, "tiny")
        try:
            frame = run_exam(recordings, ["seed"], windows=[8_000], answerer=PerfectReader(), progress=False,
                             lab=tmp_path / "lab.duckdb", question_writer=writer,
                             probe_types=["recall", "model_written"])
        finally:
            writer.close()
    assert set(frame["probe_type"]) == {"recall", "model_written"}
    written = frame[frame["probe_type"] == "model_written"]
    assert (written["points"] == 0).all() and frame.attrs["questions_written"] > 0
    assert frame.attrs["written_problems"] == []
