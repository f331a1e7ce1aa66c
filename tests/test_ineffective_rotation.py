"""A compression that saves too little to be worth a new session is not applied by rotation."""

from __future__ import annotations

from hermeslab.agent import Agent
from hermeslab.context.compactor import Compactor
from hermeslab.context.types import SummaryOutcome, SummaryRequest
from hermeslab.core.config import Config
from hermeslab.core.events import CompressionEvent, EventBus, SessionStarted
from hermeslab.core.messages import text_of

from scripted_provider import ScriptedProvider

LONG = "The inventory report lists widget_{i} with 1{i}7 units in bin B-{i}. " * 12


class Wordy:
    """Writes back almost all of what it is asked to summarise: the summary is barely smaller than its span."""

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        text = " ".join(text_of(message) for message in request.span)
        return SummaryOutcome(body=text[: int(len(text) * 0.9)])


def chat(tmp_path, **overrides):
    config = Config().with_overrides({"tools.workspace": str(tmp_path), "model.context_length": 3000,
                                      **overrides})
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    agent = Agent(ScriptedProvider([{"content": LONG.format(i=i)} for i in range(14)]), config=config, bus=bus,
                  compactor=Compactor(config, Wordy()), sleep=lambda s: None)
    first = agent.session.id
    for i in range(14):
        agent.chat(f"Tell me about widget_{i}, please.")
    return agent, first, [e for e in events if isinstance(e, CompressionEvent)], events


def test_a_summary_that_saves_too_little_leaves_the_session_where_it_is(tmp_path):
    agent, first, compressions, events = chat(tmp_path)
    summarised = [c for c in compressions if c.details.get("outcome") == "too_small_to_rotate"]
    assert summarised, [c.details.get("outcome") for c in compressions]
    for attempt in summarised:
        assert attempt.mode == "none" and not attempt.effective and attempt.new_session_id is None
        assert attempt.details["summary"]["would_save"] < 0.1 * attempt.tokens_before
        assert "not rotated" in " ".join(attempt.details["verdict"]["reasons"])
    rotations = [c for c in compressions if c.mode == "rotation"]
    started = [e for e in events if isinstance(e, SessionStarted)]
    assert len(started) == 1 + len(rotations)  # no child session was opened for an attempt left unapplied
    if not rotations:
        assert agent.session.id == first


def test_in_place_the_same_summary_is_applied(tmp_path):
    _, _, compressions, _ = chat(tmp_path, **{"compression.in_place": True})
    assert not any(c.details.get("outcome") == "too_small_to_rotate" for c in compressions)
    assert any(c.mode == "in_place" for c in compressions)


def test_a_compression_the_user_asks_for_is_applied_however_little_it_saves(tmp_path):
    agent, first, compressions, _ = chat(tmp_path)
    before = agent.session.id
    compaction = agent.compress()
    assert compaction is not None and compaction.changed and agent.session.id != before
    assert compaction.result.record["outcome"] == "compressed"
    assert not agent.compactor.state.user_asked  # the next automatic compression is judged as before
