"""One test per fault kind: the agent, the real `openai` client, the fault server, and the DuckDB log.

Each recoverable fault hits a tool-call reply and a text reply of a short
session; every turn must still end with the fault-free answer. Faults that
cannot be recovered end their turn with a specific message after a single
call. In every case the log holds every message the agent committed, and no
assistant message that is not a complete answer of the fault-free run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hermeslab.core.events import MessageAdded
from hermeslab.eval.fault_matrix import RunReport, run_sessions, same_answer
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.providers.faults import FAULT_KINDS, FaultSchedule
from hermeslab.store import open as open_lab

SESSION = (("read notes.md", 'write "Ship 2.4 on Friday." to plan.txt', "Who are you?"),)
#: Without faults, calls 0 and 2 ask for tools and 1, 3 and 4 answer in text; a retried call shifts the
#: later ones by one, so index 3 is the second tool call after one repaired fault at index 0.
AT = {"bad_tool_json": (0, 3), "surrogates": (1, 4)}
PERMANENT = {"auth": ("HTTP 401", "check model.api_key"),
             "billing": ("HTTP 403", "out of credit or over its spending limit"),
             "model_not_found": ("HTTP 404", "does not serve this model")}
RECOVERABLE = [kind for kind in FAULT_KINDS if kind not in PERMANENT]
TIMEOUT = 0.5


def run(tmp_path: Path, schedule: FaultSchedule | None, **options) -> RunReport:
    lab = tmp_path / "lab.duckdb" if schedule is not None else None
    return run_sessions(schedule, tmp_path / "ws", sessions=SESSION, lab_path=lab, client_timeout=TIMEOUT, **options)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> RunReport:
    report = run(tmp_path_factory.mktemp("baseline"), None)
    assert [turn.status for turn in report.turns] == ["completed"] * 3
    return report


def schedule(kind: str) -> FaultSchedule:
    options = {"delay": 2 * TIMEOUT} if kind == "slow" else {}
    return FaultSchedule.single(kind, at=AT.get(kind, (0, 3)), **options)


def assert_log_is_complete_and_clean(lab_path: Path, report: RunReport, baseline: RunReport) -> None:
    lab = open_lab(lab_path)
    rows = lab.sql("SELECT id, role, content FROM messages")
    stored = dict(zip(rows["id"], rows["content"]))
    for event in report.events:
        if isinstance(event, MessageAdded):
            assert event.message_id in stored, f"message {event.message_id} was committed but is not in the log"
            assert (stored[event.message_id] or "") == (event.message.get("content") or "")
    answers = {(e.message.get("content") or "").replace("\ufffd", "") for e in baseline.events
               if isinstance(e, MessageAdded) and e.message["role"] == "assistant"}
    for content in rows[rows["role"] == "assistant"]["content"]:
        assert (content or "").replace("\ufffd", "") in answers, f"half-written assistant message: {content!r}"
    assert len(lab.recoveries()) == len(report.recoveries)
    assert len(lab.turns()) == len(report.turns)


@pytest.mark.parametrize("kind", RECOVERABLE)
def test_a_recoverable_fault_leaves_every_answer_as_without_it(tmp_path, baseline, kind):
    report = run(tmp_path, schedule(kind))
    assert [turn.status for turn in report.turns] == ["completed"] * 3, [t.error for t in report.turns]
    for turn, expected in zip(report.turns, baseline.turns):
        assert same_answer(turn.text, expected.text), (turn.text, expected.text)
    assert [i.applied for i in report.injected] == [True, True]
    assert report.recoveries and report.attempts <= baseline.attempts + 6
    assert not [e for e in report.recoveries if e.outcome.startswith(("failed", "turn", "gave"))]
    if kind == "surrogates":
        assert all("\ud83d" not in turn.text for turn in report.turns) and "\ufffd" in report.turns[2].text
    assert_log_is_complete_and_clean(tmp_path / "lab.duckdb", report, baseline)


@pytest.mark.parametrize("kind", PERMANENT)
def test_a_permanent_fault_ends_its_turn_clearly_after_one_call(tmp_path, baseline, kind):
    report = run(tmp_path, FaultSchedule.single(kind, at=(0,)))
    first, *rest = report.turns
    assert first.status == "failed" and all(part in first.error for part in PERMANENT[kind])
    assert [c.attempt for c in report.calls if c.turn == 1] == [1]
    assert [turn.status for turn in rest] == ["completed"] * 2
    assert [turn.text for turn in rest] == [turn.text for turn in baseline.turns[1:]]
    assert report.recoveries[0].action == "give_up"
    assert_log_is_complete_and_clean(tmp_path / "lab.duckdb", report, baseline)


@pytest.mark.parametrize("kind", PERMANENT)
def test_a_permanent_fault_is_recovered_by_the_fallback_provider(tmp_path, baseline, kind):
    report = run(tmp_path, FaultSchedule.single(kind, at=(0, 3)), fallback=True)
    assert [turn.text for turn in report.turns] == [turn.text for turn in baseline.turns]
    assert [e.action for e in report.recoveries] == ["fallback", "fallback"]
    assert_log_is_complete_and_clean(tmp_path / "lab.duckdb", report, baseline)


def test_an_injected_401_is_recovered_by_the_credential_refresh(tmp_path, baseline):
    fresh = []

    def refresh(provider):
        fresh.append(OpenAICompatProvider(provider.base_url, "renewed-key", provider.model, timeout=TIMEOUT))
        return fresh[-1]

    report = run(tmp_path, FaultSchedule.single("auth", at=(0,)), refresh=refresh)
    for provider in fresh:
        provider.close()
    assert [turn.text for turn in report.turns] == [turn.text for turn in baseline.turns]
    assert [(e.action, e.outcome) for e in report.recoveries] == [("refresh_credentials", "recovered")]


def test_a_real_401_from_a_server_that_checks_keys_is_refreshed_once(tmp_path):
    from hermeslab.agent import Agent

    with LocalServer(OfflineModel(), api_key="right-key") as server:
        stale = OpenAICompatProvider(server.base_url, "stale-key", "hermeslab-offline", timeout=10)
        keys = []

        def refresh(provider):
            keys.append("right-key")
            return OpenAICompatProvider(server.base_url, "right-key", "hermeslab-offline", timeout=10)

        agent = Agent(stale, refresh_credentials=refresh, sleep=lambda s: None)
        result = agent.chat("Who are you?")
        stale.close()
        agent.provider.close()
    assert result.status == "completed" and "offline model" in result.text and keys == ["right-key"]
    assert server.calls == 1  # the refused request never reached the model
