"""The recovery matrix harness, and the notebook that plots it (run under nbval)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermeslab.core.events import ApiCallFinished
from hermeslab.eval.fault_matrix import RunReport, TurnOutcome, compare, run_matrix, same_answer
from hermeslab.providers.faults import Injection

ROOT = Path(__file__).resolve().parents[1]


def report(texts, statuses, *, calls=(), slept=0.0, injected=()) -> RunReport:
    """``calls`` holds each turn's API calls, in turn order."""
    calls = list(calls) or [[] for _ in texts]
    turns = [TurnOutcome(0, i, "q", text, status, calls=len(made),
                         tokens=sum(call.prompt_tokens or 0 for call in made))
             for i, (text, status, made) in enumerate(zip(texts, statuses, calls))]
    return RunReport(turns=turns, events=[call for made in calls for call in made], injected=list(injected),
                     slept_s=slept, client_timeout=2.0)


def call(error: str | None = None, prompt: int = 0) -> ApiCallFinished:
    return ApiCallFinished(session_id="s", call_index=0, attempt=1, error_class=error, prompt_tokens=prompt or None)


def test_a_cell_compares_a_run_with_its_baseline():
    baseline = report(["a", "b", "c"], ["completed"] * 3, calls=[[call(prompt=10)]] * 3)
    run = report(["a", "wrong", "The model call failed"], ["completed", "completed", "failed"],
                 calls=[[call("timeout"), call("timeout"), call(prompt=10)], [call(prompt=10)],
                        [call("server_error")]],
                 slept=5.0, injected=[Injection(0, "slow", True), Injection(1, "slow", True),
                                      Injection(4, "slow", False)])
    cell = compare("slow", 0.2, run, baseline, fallback=False)
    assert (cell.turns, cell.faults, cell.completed, cell.correct) == (3, 2, 2 / 3, 1 / 3)
    # Recovery's price is counted on the completed turns; the failed turn's call is counted apart, not as a saving.
    assert (cell.extra_calls, cell.calls_ratio, cell.extra_tokens, cell.failed_turn_calls) == (2, 2.0, 0, 1)
    assert cell.extra_latency_s == 5.0 + 2 * 2.0
    assert cell.failures == {"failed": 1}
    with pytest.raises(ValueError, match="the run has 1 turns and the baseline 3"):
        compare("slow", 0.2, report(["a"], ["completed"]), baseline, fallback=False)


def test_answers_compare_without_the_replacement_characters_of_repaired_text():
    assert same_answer("done \ufffd", "done ") and not same_answer("done!", "done")


def test_a_small_matrix_end_to_end(tmp_path):
    sessions = (("Who are you?", "list files"),)
    baseline, cells = run_matrix(["server_error", "auth"], [0.5], workspace=tmp_path / "ws", sessions=sessions)
    assert baseline.attempts == 3 and baseline.latency_s == 0.0
    assert sum(turn.calls for turn in baseline.turns) == baseline.attempts
    cell, auth = cells
    assert cell.kind == "server_error" and cell.faults >= 1 and cell.extra_calls == cell.faults
    assert cell.extra_latency_s >= 2.0 * cell.faults and cell.correct == 1.0 and cell.failed_turn_calls == 0
    # A 401 ends its turn after one call: that call is counted as spent on a failed turn, not as calls saved.
    assert auth.completed < 1.0 and auth.extra_calls == 0 and auth.failed_turn_calls >= auth.faults >= 1
    with pytest.raises(ValueError, match="unknown fault kind 'gremlins'"):
        run_matrix(["gremlins"], [0.1], workspace=tmp_path / "ws")


@pytest.mark.slow
def test_the_recovery_notebook_runs_under_nbval():
    env = {**os.environ, "MPLBACKEND": "Agg"}
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         "notebooks/05_recovery_paths.ipynb"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-2000:]
    assert "5 passed" in process.stdout
