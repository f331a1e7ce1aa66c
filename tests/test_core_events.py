import logging

from hermeslab.core.events import EventBus, MessageAdded, TextDelta, TurnFinished
from hermeslab.store import StoreWriter


def test_bus_fans_out_and_survives_a_failing_subscriber(caplog):
    bus = EventBus()
    seen = []

    def broken(event):
        raise RuntimeError("display crashed")

    bus.subscribe(broken)
    unsubscribe = bus.subscribe(seen.append)
    with caplog.at_level(logging.ERROR):
        bus.publish(TurnFinished(session_id="s", turn=1, trace_id="t", status="completed"))
    assert [e.kind for e in seen] == ["turn_finished"]
    assert "display crashed" in caplog.text
    unsubscribe()
    bus.publish(TurnFinished(session_id="s"))
    assert len(seen) == 1


def test_payload_excludes_envelope():
    event = MessageAdded(session_id="s", turn=2, trace_id="t", message_id="m", parent_id=None, seq=3,
                         message={"role": "user", "content": "hi"})
    payload = event.payload()
    assert payload["message"]["content"] == "hi"
    assert "session_id" not in payload and "trace_id" not in payload


def test_a_subscriber_may_name_the_events_it_wants_and_emitters_can_ask():
    bus = EventBus()
    assert not bus.wants(TurnFinished)
    finished: list = []
    unsubscribe = bus.subscribe(finished.append, kinds=(TurnFinished,))
    assert bus.wants(TurnFinished) and not bus.wants(MessageAdded)
    bus.publish(MessageAdded(session_id="s", message_id="m", parent_id=None, seq=0, message={}))
    bus.publish(TurnFinished(session_id="s"))
    assert [e.kind for e in finished] == ["turn_finished"]
    everything = bus.subscribe(lambda event: None)
    assert bus.wants(MessageAdded)
    everything()
    unsubscribe()
    assert not bus.wants(TurnFinished)


def test_a_subscriber_may_name_the_events_it_never_wants():
    bus = EventBus()
    kept: list = []
    unsubscribe = bus.subscribe(kept.append, skip=(TextDelta,))
    assert bus.wants(TurnFinished) and not bus.wants(TextDelta)
    bus.publish(TextDelta(session_id="s", text="frag"))
    bus.publish(TurnFinished(session_id="s"))
    assert [e.kind for e in kept] == ["turn_finished"]
    display = bus.subscribe(lambda event: None, kinds=(TextDelta,))
    assert bus.wants(TextDelta)
    display()
    assert not bus.wants(TextDelta)
    unsubscribe()
    assert not bus.wants(TurnFinished)


def test_a_loop_watched_only_by_the_lab_builds_no_streamed_fragments(tmp_path):
    """The writer keeps every event but the fragments, so with no live display none is built at all."""
    bus = EventBus()
    with StoreWriter(tmp_path / "lab.duckdb") as writer:
        writer.attach(bus)
        assert bus.wants(TurnFinished) and bus.wants(MessageAdded)
        assert not bus.wants(TextDelta)
