"""Every model call hermeslab makes is a row of the lab, and the lab's totals are the sums of those rows.

Run against the local server answering as llama.cpp's ``llama-server`` with one
slot: turns, the LLM summariser's calls, the background memory review and a
probe exam all reach the same server, and a turn that opens with a compression rotating the
session keeps its user text and start time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hermeslab.core.config import Config
from hermeslab.eval.ab import gather_recordings
from hermeslab.eval.probes.readers import EndpointAnswerer
from hermeslab.eval.probes.run import run_exam
from hermeslab.providers import LocalServer, OfflineModel
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab

SHIPPED = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"
FILLER = "The quick brown fox jumps over the lazy dog while the lab records every token. "


@pytest.fixture(scope="module")
def lab_of_a_long_chat(tmp_path_factory):
    """A chat that compresses in preflight, with a memory review, logged; and the server it talked to."""
    folder = tmp_path_factory.mktemp("every-call")
    server = LocalServer(OfflineModel(), personality="llama-server", context_window=4_096)
    url = server.start()
    config = Config().with_overrides({
        "model.name": "hermeslab-offline", "model.base_url": url, "model.api_key": "none",
        "model.context_length": 4_096, "model.max_tokens": 64, "compression.summariser": "llm",
        "compression.min_threshold_tokens": 1_000, "store.path": str(folder / "lab.duckdb"),
        "memory.path": str(folder), "memory.nudge_interval": 2, "skills.enabled": False,
        "tools.workspace": str(folder)})
    try:
        with Runtime(config, source="test") as runtime:
            texts = []
            for index in range(6):
                text = f"Note {index}: {FILLER * 12}Reply with one word."
                texts.append(text)
                runtime.agent.chat(text)
                if runtime.memory is not None:
                    runtime.memory.wait(60)
        answerer = EndpointAnswerer(url, "hermeslab-offline", max_tokens=16)
        try:  # the probe exam asks the same server, its rows in the same lab
            run_exam(gather_recordings([SHIPPED], limit=1)[0], ["seed"], windows=[4_000], answerer=answerer,
                     lab=config.store.path, progress=False, probe_types=["recall"], arms=["compacted"])
        finally:
            answerer.close()
    finally:
        server.stop()
    return open_lab(config.store.path), server, texts


def test_every_call_kind_is_a_row(lab_of_a_long_chat):
    lab, server, _ = lab_of_a_long_chat
    calls = lab.api_calls()
    assert {"turn", "summary", "review", "exam"} <= set(calls["purpose"])
    assert len(calls) == server.calls  # the server served exactly the calls the lab holds
    answered = calls[calls["error_class"].isna()]
    assert answered["usage_source"].notna().all() and (answered["prompt_tokens"] > 0).all()
    # The configured name and the name the server answered with, apart.
    assert set(calls["model"]) == {"hermeslab-offline"} and answered["server_model"].notna().all()


def test_session_totals_equal_the_sum_of_their_rows(lab_of_a_long_chat):
    lab, _, _ = lab_of_a_long_chat
    sums = lab.sql("""
        SELECT s.id, s.all_api_call_count, s.all_input_tokens, s.all_output_tokens,
               s.api_call_count, s.input_tokens, s.output_tokens,
               count(a.session_id) AS calls, coalesce(sum(a.prompt_tokens), 0) AS prompt,
               coalesce(sum(a.completion_tokens), 0) AS completion,
               count(a.session_id) FILTER (WHERE a.purpose = 'turn') AS turn_calls,
               coalesce(sum(a.prompt_tokens) FILTER (WHERE a.purpose = 'turn'), 0) AS turn_prompt,
               coalesce(sum(a.completion_tokens) FILTER (WHERE a.purpose = 'turn'), 0) AS turn_completion
        FROM sessions AS s LEFT JOIN api_calls AS a ON a.session_id = s.id GROUP BY ALL""")
    assert len(sums) > 1  # the chat rotated into child sessions
    for row in sums.itertuples():
        assert (row.all_api_call_count, row.all_input_tokens, row.all_output_tokens) == (
            row.calls, row.prompt, row.completion)
        assert (row.api_call_count, row.input_tokens, row.output_tokens) == (
            row.turn_calls, row.turn_prompt, row.turn_completion)
    assert sums["all_input_tokens"].sum() > sums["input_tokens"].sum()  # summaries and reviews count in all_


def test_a_turn_that_opens_with_a_rotation_keeps_its_user_text_and_start(lab_of_a_long_chat):
    lab, _, texts = lab_of_a_long_chat
    rotations = lab.sql("SELECT session_id, turn, trace_id FROM compressions "
                        "WHERE trigger = 'preflight' AND mode = 'rotation'")
    assert len(rotations), "the chat never opened a turn with a rotation"
    for rotation in rotations.itertuples():  # the turn ends, and has its row, in a session the rotation began
        rows = lab.sql("SELECT session_id, user_text, started_at, ended_at FROM turns WHERE trace_id = ?",
                       [rotation.trace_id])
        assert len(rows) == 1 and rows["session_id"].iloc[0] != rotation.session_id, rotation
        assert rows["user_text"].iloc[0] == texts[rotation.turn - 1]
        assert rows["started_at"].iloc[0] <= rows["ended_at"].iloc[0]
    assert lab.turns()["user_text"].notna().all() and lab.turns()["started_at"].notna().all()


def test_the_one_slot_server_never_had_two_requests_at_once(lab_of_a_long_chat):
    _, server, _ = lab_of_a_long_chat
    assert server.max_in_flight == 1
