"""The memory-provider hooks around the loop and the compactor, and recall from the lab database."""

import time

from hermeslab.agent import Agent
from hermeslab.context.compactor import Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.core.config import Config
from hermeslab.core.events import CompressionEvent, EventBus, Notice
from hermeslab.memory.manager import Memory
from hermeslab.memory.provider import RECALL_FLAG, RECALL_NOTE, MemoryProvider, fence_recall
from hermeslab.memory.recall import LabRecall, keywords, snippet
from hermeslab.providers.offline import OfflineModel
from hermeslab.runtime import Runtime
from hermeslab.tools import ToolRegistry


class Recorder(MemoryProvider):
    name = "recorder"

    def __init__(self, recall="Earlier: the build uses make.", saved="Saved before compression: build uses make."):
        self.calls = []
        self.recall, self.saved = recall, saved

    def prefetch(self, query, session_id):
        self.calls.append(("prefetch", query, session_id))
        return self.recall

    def sync(self, user_text, reply, session_id):
        self.calls.append(("sync", user_text, reply, session_id))

    def pre_compress(self, span):
        self.calls.append(("pre_compress", [dict(m) for m in span]))
        return self.saved

    def session_switched(self, old_id, new_id, reason):
        self.calls.append(("switch", old_id, new_id, reason))


class Remembering:
    """A summariser that records what it was asked, then lets the extractive one answer."""

    def __init__(self):
        self.inner, self.requests = ExtractiveSummariser(), []

    def summarise(self, request):
        self.requests.append(request)
        return self.inner.summarise(request)


class Spy:
    def __init__(self, inner):
        self.inner, self.requests, self.name = inner, [], "spy"

    def complete(self, request):
        self.requests.append(request)
        return self.inner.complete(request)

    def stream(self, request):
        self.requests.append(request)
        return self.inner.stream(request)


def build(tmp_path, provider, **overrides):
    config = Config().with_overrides({"memory.nudge_interval": 0, "skills.creation_nudge_interval": 0,
                                      "compression.summariser": "extractive", **overrides})
    memory = Memory(config, tmp_path, provider=provider)
    summariser = Remembering()
    bus = EventBus()
    events = []
    bus.subscribe(events.append)
    model = Spy(OfflineModel())
    agent = Agent(model, config=config, tools=ToolRegistry(memory.tools()), bus=bus, memory=memory,
                  compactor=Compactor(config, summariser, pre_compress=memory.pre_compress))
    return agent, events, summariser, model


def test_recall_goes_in_a_fenced_message_before_the_users_and_sync_follows_the_turn(tmp_path):
    provider = Recorder()
    agent, _, _, model = build(tmp_path, provider)
    result = agent.chat("count to 3")
    assert result.text == "1, 2, 3."  # the model answered the user, not the recalled text
    sent = model.requests[0].messages
    assert sent[-1] == {"role": "user", "content": "count to 3"}
    fenced = sent[-2]
    assert fenced["role"] == "user" and fenced[RECALL_FLAG] is True
    assert fenced["content"] == f"<memory-context>\n{RECALL_NOTE}\n\nEarlier: the build uses make.\n</memory-context>"
    session = agent.session.id
    assert provider.calls == [("prefetch", "count to 3", session), ("sync", "count to 3", "1, 2, 3.", session)]


def test_no_recall_means_no_extra_message(tmp_path):
    agent, _, _, model = build(tmp_path, Recorder(recall="   "))
    agent.chat("count to 2")
    assert [m["role"] for m in model.requests[0].messages] == ["system", "user"]


def test_fence_strips_tags_that_would_close_it_early():
    message = fence_recall("a </memory-context> b <memory-context>")
    assert message["content"].count("</memory-context>") == 1 and message["content"].endswith("a  b\n</memory-context>")


def test_pre_compress_sees_the_span_and_its_text_reaches_the_summariser(tmp_path):
    provider = Recorder()
    agent, events, summariser, _ = build(tmp_path, provider)
    for number in range(8):
        agent.chat(f"count to {40 + number}")
    before = [dict(m) for m in agent.messages]
    old_session = agent.session.id
    assert agent.compress().changed
    event = next(e for e in events if isinstance(e, CompressionEvent))
    spans = [call[1] for call in provider.calls if call[0] == "pre_compress"]
    assert spans == [before[event.compress_start:event.compress_end]] and spans[0]
    assert summariser.requests[-1].memory_context == "Saved before compression: build uses make."
    assert ("switch", old_session, agent.session.id, "compression") in provider.calls


def test_session_switches_are_reported(tmp_path):
    provider = Recorder()
    agent, _, _, _ = build(tmp_path, provider)
    agent.chat("count to 2")
    first = agent.session.id
    branched = agent.branch()
    fresh = agent.new_session()
    switches = [call for call in provider.calls if call[0] == "switch"]
    assert switches == [("switch", first, branched, "branch"), ("switch", branched, fresh, "new")]


class Broken(MemoryProvider):
    name = "broken"

    def prefetch(self, query, session_id):
        raise RuntimeError("index unavailable")

    def sync(self, user_text, reply, session_id):
        raise OSError("disk full")


class Slow(MemoryProvider):
    name = "slow"

    def prefetch(self, query, session_id):
        time.sleep(1.0)
        return "too late"


def test_a_failing_provider_costs_a_notice_never_the_turn(tmp_path):
    agent, events, _, _ = build(tmp_path, Broken())
    assert agent.chat("count to 2").status == "completed"
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == ["memory provider 'broken': prefetch failed: RuntimeError: index unavailable",
                       "memory provider 'broken': sync failed: OSError: disk full"]


def test_a_slow_prefetch_is_abandoned_after_the_timeout(tmp_path):
    agent, events, _, model = build(tmp_path, Slow(), **{"memory.prefetch_timeout": 0.1})
    assert agent.chat("count to 2").text == "1, 2."
    assert [m["role"] for m in model.requests[0].messages] == ["system", "user"]
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "memory provider 'slow': prefetch failed: TimeoutError: no answer within 0.1 s"]


def test_keywords_and_snippets():
    assert keywords("Which region does zephyr deploy to? zephyr!") == ["region", "zephyr", "deploy"]
    assert keywords("and the of to 42") == []
    text = "x " * 200 + "the zephyr region is eu-west-2 " + "y " * 200
    cut = snippet(text, ["zephyr"], limit=60)
    assert "zephyr" in cut and cut.startswith("…") and cut.endswith("…") and len(cut) <= 62


def test_lab_recall_finds_other_conversations_and_skips_its_own(tmp_path):
    config = Config().with_overrides({"store.path": str(tmp_path / "lab.duckdb"), "memory.nudge_interval": 0,
                                      "tools.workspace": str(tmp_path), "agent.stream": False})
    with Runtime(config) as runtime:
        runtime.agent.chat("write \"zephyr deploys to eu-west-2\" to zephyr.txt")
    recalling = config.with_overrides({"memory.provider": "lab"})
    with Runtime(recalling) as runtime:
        runtime.agent.chat("Where does zephyr deploy?")
        fenced = runtime.agent.messages[1]
        hits = fenced["content"].splitlines()[3:-1]
        assert fenced[RECALL_FLAG] and len(hits) == 2
        assert hits[0].endswith('· write "zephyr deploys to eu-west-2" to zephyr.txt · user: write "zephyr deploys '
                                'to eu-west-2" to zephyr.txt')
        assert "· assistant: Done: `zephyr.txt` is written" in hits[1]
        runtime.writer.flush()
        own = runtime.agent.session.id
        runtime.agent.chat("zephyr deploy again?")
        again = runtime.agent.messages[-3]
        assert again[RECALL_FLAG] and own not in again["content"] and "Where does zephyr deploy" not in again["content"]


def test_lab_recall_tracks_the_conversations_sessions():
    recall = LabRecall("/nonexistent/lab.duckdb")
    assert recall.prefetch("anything at all", "s1") is None
    recall.session_switched("s1", "s2", "compression")
    recall.session_switched("s2", "s3", "branch")
    assert recall._own == {"s1", "s2", "s3"}
    recall.session_switched("s3", "s4", "new")
    assert recall._own == {"s4"}
