"""The background review and the user's turns share one endpoint: turns first, never two requests at once."""

from __future__ import annotations

import threading
import time

import pytest

from hermeslab.core.config import Config
from hermeslab.core.events import Notice
from hermeslab.memory import review
from hermeslab.memory.gate import EndpointBusy, EndpointGate, endpoint_key, gate_for
from hermeslab.providers.offline import OfflineModel
from hermeslab.providers.server import CompletionEndpoint, LocalServer, Reply
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab

#: How long the single slot takes over a non-streamed answer, and per streamed chunk.
ANSWER_SECONDS = 0.4
CHUNK_SECONDS = 0.01


class SingleSlot(CompletionEndpoint):
    """One request at a time, as a one-slot server: a request that arrives while another is answered cuts it."""

    def __init__(self, provider):
        super().__init__(provider)
        self._lock = threading.Lock()
        self._active: dict[str, bool] | None = None
        self.overlaps = 0
        self.cut_streams = 0

    def _enter(self) -> dict[str, bool]:
        with self._lock:
            if self._active is not None:
                self.overlaps += 1
                self._active["cut"] = True
            self._active = {"cut": False}
            return self._active

    def _leave(self, slot: dict[str, bool]) -> None:
        with self._lock:
            if self._active is slot:
                self._active = None

    def respond(self, call_index, payload):
        slot = self._enter()
        if not payload.get("stream"):
            try:
                time.sleep(ANSWER_SECONDS)
                return super().respond(call_index, payload)
            finally:
                self._leave(slot)
        reply = super().respond(call_index, payload)
        if reply.chunks is None:
            self._leave(slot)
            return reply
        return Reply(status=reply.status, headers=reply.headers, chunks=self._paced(reply.chunks, slot))

    def _paced(self, chunks, slot):
        try:
            for chunk in chunks:
                time.sleep(CHUNK_SECONDS)
                if slot["cut"]:
                    self.cut_streams += 1
                    raise ConnectionAbortedError("the slot was given to another request")
                yield chunk
        finally:
            self._leave(slot)


@pytest.fixture
def single_slot():
    server = LocalServer(OfflineModel())
    endpoint = server.endpoint = SingleSlot(server.provider)
    server.start()
    yield server, endpoint
    server.stop()


def chat_config(tmp_path, server) -> Config:
    return Config().with_overrides({
        "model.base_url": server.base_url, "model.name": server.model_name, "store.path": str(tmp_path / "lab.duckdb"),
        "memory.nudge_interval": 2, "skills.enabled": False, "tools.workspace": str(tmp_path),
        "agent.stream": True})


def run_three_turns(tmp_path, server):
    """Turn 2 starts a review; turn 3 follows at once, while the review is still calling the endpoint."""
    notices = []
    with Runtime(chat_config(tmp_path, server)) as runtime:
        runtime.bus.subscribe(notices.append, [Notice])
        runtime.agent.chat("I work on the billing service.")
        runtime.agent.chat("count to 2")
        third = runtime.agent.chat("count to 30")
        assert runtime.memory.wait(30)
        session_id = runtime.agent.session.id
    return third, session_id, [n.text for n in notices]


def test_a_review_never_shares_a_single_slot_with_the_users_turn(tmp_path, single_slot):
    server, endpoint = single_slot
    third, session_id, notices = run_three_turns(tmp_path, server)
    assert third.status == "completed" and third.text == ", ".join(map(str, range(1, 31))) + "."
    assert (endpoint.overlaps, endpoint.cut_streams) == (0, 0)
    assert (tmp_path / "USER.md").read_text() == "Works on the billing service\n"
    calls = open_lab(tmp_path / "lab.duckdb").api_calls(session_id)
    assert calls["purpose"].tolist().count("review") == 2 and calls["error_class"].isna().all()
    # Every call reached the server one after another: 3 turn calls and 2 review calls.
    assert server.calls == 5
    assert not [text for text in notices if "failed" in text or "stopped" in text]


def test_without_the_gate_the_same_conversation_collides_on_the_slot(tmp_path, single_slot, monkeypatch):
    """The scenario above is a real collision: with the gate taken out, the two requests meet."""
    server, endpoint = single_slot
    monkeypatch.setattr(review, "GatedProvider", lambda provider, gate, timeout: provider)
    monkeypatch.setattr(EndpointGate, "turn_started", lambda self, holder, timeout=None: True)
    run_three_turns(tmp_path, server)
    assert endpoint.overlaps >= 1


def test_a_turn_waits_for_the_review_call_in_flight_and_the_review_then_waits_for_the_turn():
    gate, order = EndpointGate("http://slot/v1"), []
    entered, release = threading.Event(), threading.Event()

    def review_call(name: str, hold: threading.Event | None = None) -> None:
        with gate.background(timeout=5):
            order.append(f"{name} starts")
            entered.set()
            if hold is not None:
                hold.wait(5)
            order.append(f"{name} ends")

    first = threading.Thread(target=review_call, args=("review 1", release))
    first.start()
    assert entered.wait(5)
    turn = threading.Thread(target=lambda: (gate.turn_started("agent"), order.append("turn starts")))
    turn.start()
    time.sleep(0.1)
    assert order == ["review 1 starts"] and turn.is_alive()  # the turn waits for the call in flight
    release.set()
    turn.join(5)
    second = threading.Thread(target=review_call, args=("review 2",))
    second.start()
    time.sleep(0.1)
    assert order == ["review 1 starts", "review 1 ends", "turn starts"]  # the review pauses during the turn
    gate.turn_finished("agent")
    second.join(5)
    first.join(5)
    assert order[-2:] == ["review 2 starts", "review 2 ends"]


def test_a_review_call_gives_up_when_turns_keep_the_endpoint_and_frees_nothing():
    gate = EndpointGate("http://slot/v1")
    gate.turn_started("agent")
    with pytest.raises(EndpointBusy, match="stayed busy with the user's turns for 0.05 s"):
        with gate.background(timeout=0.05):
            pass
    assert not gate.background_busy
    gate.turn_finished("agent")
    with gate.background(timeout=0.05):
        assert gate.background_busy


def test_one_gate_per_base_url():
    class Client:
        name = "client"

        def __init__(self, base_url):
            self.base_url = base_url

    assert gate_for(Client("http://127.0.0.1:9/v1/")) is gate_for(Client("http://127.0.0.1:9/v1"))
    assert gate_for(Client("http://127.0.0.1:9/v1")) is not gate_for(Client("http://127.0.0.1:10/v1"))
    local = OfflineModel()
    assert endpoint_key(local) == endpoint_key(local) != endpoint_key(OfflineModel())


def test_a_turn_that_meets_a_review_call_in_flight_says_why_it_waits_and_then_runs(tmp_path):
    from scripted_provider import ScriptedProvider

    from hermeslab.agent import Agent
    from hermeslab.core.events import EventBus
    from hermeslab.memory.manager import Memory

    config = Config().with_overrides({"memory.nudge_interval": 0, "skills.enabled": False,
                                      "tools.workspace": str(tmp_path)})
    provider = ScriptedProvider([{"content": "one"}, {"content": "two"}])
    bus, notices = EventBus(), []
    bus.subscribe(notices.append, [Notice])
    agent = Agent(provider, config=config, bus=bus, memory=Memory(config, tmp_path), sleep=lambda s: None)
    agent.chat("first")  # from now on the memory knows the endpoint its turns use
    in_flight, release = threading.Event(), threading.Event()

    def review_call() -> None:
        with gate_for(provider).background(timeout=5):
            in_flight.set()
            release.wait(5)

    holder = threading.Thread(target=review_call)
    holder.start()
    assert in_flight.wait(5)
    second = threading.Thread(target=agent.chat, args=("second",))
    second.start()
    time.sleep(0.2)
    assert len(provider.requests) == 1 and second.is_alive()
    assert [n.text for n in notices] == ["waiting for the background memory review's model call to finish "
                                         "(it shares the endpoint, and pauses during turns)"]
    release.set()
    second.join(5)
    holder.join(5)
    assert len(provider.requests) == 2 and agent.messages[-1]["content"] == "two"
