"""Nudges and the background review: when it fires, what it may do, and that it never touches the turn."""

import json

import pytest
from scripted_provider import ScriptedProvider, tool_call

from hermeslab.agent import Agent
from hermeslab.core.config import Config
from hermeslab.core.events import EventBus, MemoryUpdated, MessageAdded, Notice, TextDelta, TurnFinished
from hermeslab.memory.manager import Memory
from hermeslab.memory.nudges import NudgeCounters, ReviewDue
from hermeslab.memory.review import REVIEW_MARKER, review_prompt
from hermeslab.core.provider import ProviderError
from hermeslab.providers.offline import OfflineModel
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab
from hermeslab.tools import builtin_registry


def test_memory_nudge_falls_due_every_interval_and_the_memory_tool_restarts_it():
    nudges = NudgeCounters(memory_interval=3, skill_interval=0)
    for _ in range(2):
        nudges.user_turn()
        assert not nudges.take_due()
    nudges.user_turn()
    assert nudges.take_due() == ReviewDue(memory=True)
    nudges.user_turn()
    nudges.user_turn()
    nudges.tool_used("memory")
    nudges.user_turn()
    assert not nudges.take_due() and nudges.turns_since_memory == 1


def test_skill_nudge_counts_model_calls_and_skill_manage_restarts_it():
    nudges = NudgeCounters(memory_interval=0, skill_interval=4)
    for _ in range(3):
        nudges.model_call()
    nudges.tool_used("skill_manage")
    nudges.model_call()
    assert not nudges.take_due()
    for _ in range(3):
        nudges.model_call()
    assert nudges.take_due() == ReviewDue(skills=True) and nudges.calls_since_skill == 0


def test_zero_switches_a_nudge_off_and_resume_seeds_the_count():
    nudges = NudgeCounters(memory_interval=0, skill_interval=0)
    for _ in range(50):
        nudges.user_turn()
        nudges.model_call()
    assert not nudges.take_due()
    seeded = NudgeCounters(memory_interval=10, skill_interval=10)
    seeded.seed(23)
    assert seeded.turns_since_memory == 3
    with pytest.raises(ValueError, match="memory_interval must be 0"):
        NudgeCounters(memory_interval=-1, skill_interval=1)


def test_review_prompt_covers_what_is_due():
    assert review_prompt(ReviewDue(memory=True)).startswith(REVIEW_MARKER)
    assert "memory tool" in review_prompt(ReviewDue(memory=True)) and "skill_manage" not in review_prompt(
        ReviewDue(memory=True))
    both = review_prompt(ReviewDue(memory=True, skills=True))
    assert "memory tool" in both and "skill_manage" in both
    with pytest.raises(ValueError, match="no review is due"):
        review_prompt(ReviewDue())


class Counting:
    """Wraps a provider and counts its calls."""

    def __init__(self, inner):
        self.inner, self.calls, self.name = inner, 0, "counting"

    def complete(self, request):
        self.calls += 1
        return self.inner.complete(request)

    def stream(self, request):
        self.calls += 1
        return self.inner.stream(request)


def agent_with_memory(tmp_path, provider, **overrides):
    config = Config().with_overrides({"memory.nudge_interval": 3, "skills.creation_nudge_interval": 0,
                                      "tools.workspace": str(tmp_path), **overrides})
    memory = Memory(config, tmp_path, make_agent=Agent)
    bus = EventBus()
    events = []
    bus.subscribe(events.append)
    registry = builtin_registry(config.tools)
    for tool in memory.tools():
        registry.register(tool)
    agent = Agent(provider, config=config, tools=registry, bus=bus, memory=memory, sleep=lambda s: None)
    return agent, memory, events


def test_the_nudge_starts_a_review_that_saves_to_memory_silently(tmp_path, capsys):
    provider = Counting(OfflineModel())
    agent, memory, events = agent_with_memory(tmp_path, provider)
    agent.chat("count to 3")
    agent.chat("My name is Ada and I prefer tabs over spaces.")
    assert provider.calls == 2 and not memory.reviewer.running
    result = agent.chat("count to 4")
    assert result.status == "completed" and result.text == "1, 2, 3, 4."
    history = list(agent.messages)
    finished_at = len(events)
    assert memory.wait(20)
    assert provider.calls == 3 + 2  # the review: one call with two memory writes, one closing reply
    assert (tmp_path / "USER.md").read_text() == "Name: Ada\n§\nPrefers tabs over spaces\n"
    assert agent.messages == history
    after = events[finished_at:]
    assert not [e for e in after if isinstance(e, (TextDelta, MessageAdded, TurnFinished))]
    updates = [e for e in after if isinstance(e, MemoryUpdated)]
    assert len(updates) == 1 and updates[0].changes == ["user add", "user add"]
    assert updates[0].text == "memory updated: user add, user add" and updates[0].session_id == agent.session.id
    assert capsys.readouterr() == ("", "")


def test_the_review_is_not_logged_as_a_session(tmp_path):
    config = Config().with_overrides({"store.path": str(tmp_path / "lab.duckdb"), "memory.nudge_interval": 2,
                                      "tools.workspace": str(tmp_path), "agent.stream": False})
    with Runtime(config) as runtime:
        runtime.agent.chat("I work on the billing service.")
        runtime.agent.chat("count to 2")
        assert runtime.memory.wait(20)
        session_id = runtime.agent.session.id
    assert (tmp_path / "USER.md").read_text() == "Works on the billing service\n"
    lab = open_lab(tmp_path / "lab.duckdb")
    assert list(lab.sessions()["id"]) == [session_id]
    assert len(lab.messages(session_id)) == 5  # system + two turns of user and assistant
    calls = lab.api_calls(session_id)
    # The review's two calls are logged under the turn it looked back on, marked as the review's.
    assert calls[["turn", "call_index", "purpose"]].values.tolist() == [
        [1, 0, "turn"], [2, 0, "turn"], [2, 0, "review"], [2, 1, "review"]]
    session = lab.sessions().iloc[0]
    assert (session["api_call_count"], session["estimated_calls"]) == (2, 0)  # the user's calls only
    assert lab.turn_usage(session_id)["api_calls"].tolist() == [1, 1]
    updated = lab.events(kind="memory_updated")
    assert len(updated) == 1 and json.loads(updated["payload"].iloc[0])["changes"] == ["user add"]


def test_a_failing_review_becomes_a_notice_and_the_next_turn_still_works(tmp_path):
    provider = ScriptedProvider([{"content": "one"}, {"content": "two"}, {"content": "three"}])
    agent, memory, events = agent_with_memory(tmp_path, provider)
    for _ in range(3):
        assert agent.chat("hello").status == "completed"
    assert memory.wait(20)  # the review asked a provider whose script had run out
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].level == "warning"
    assert notices[0].text.startswith("the background memory review failed: AssertionError: the script ran out")
    provider.steps.append({"content": "four"})
    assert agent.chat("hello again").text == "four"


def test_a_review_whose_model_call_fails_reports_how_it_stopped(tmp_path):
    replies = [{"content": "one"}, {"content": "two"}, {"content": "three"},
               ProviderError("invalid api key", status=401, error_type="authentication_error")]
    agent, memory, events = agent_with_memory(tmp_path, ScriptedProvider(replies))
    for _ in range(3):
        agent.chat("hello")
    assert memory.wait(20)
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].startswith("the background memory review stopped (failed)")
    assert not any(isinstance(e, MemoryUpdated) for e in events)


def test_the_skills_nudge_asks_the_review_to_write_a_skill_with_only_memory_and_skill_tools(tmp_path):
    steps = "1. Create the venv.\n2. pip install -e .[test]\n3. pytest -q"
    replies = [
        {"content": "", "tool_calls": [tool_call("c1", "list_dir", json.dumps({"path": "."}))]},
        {"content": "The folder is empty."},
        # the review: a tool outside its whitelist is refused, then it writes a skill
        {"content": "", "tool_calls": [tool_call("r1", "write_file", json.dumps({"path": "x.txt", "content": "x"}))]},
        {"content": "", "tool_calls": [tool_call("r2", "skill_manage", json.dumps(
            {"action": "create", "name": "run-tests", "description": "Set up and run the test suite",
             "body": steps}))]},
        {"content": "Saved one skill."},
    ]
    provider = ScriptedProvider(replies)
    agent, memory, events = agent_with_memory(tmp_path, provider, **{"memory.nudge_interval": 0,
                                                                      "skills.creation_nudge_interval": 2})
    assert agent.chat("what is in this folder?").text == "The folder is empty."
    assert memory.wait(20)
    review_requests = provider.requests[2:]
    assert review_requests[0].messages[-1]["content"] == review_prompt(ReviewDue(skills=True))
    assert review_requests[0].messages[:-1] == agent.messages
    assert {t["function"]["name"] for t in review_requests[0].tools} == {"memory", "skills_list", "skill_view",
                                                                          "skill_manage"}
    refused = review_requests[1].messages[-1]
    assert refused["role"] == "tool" and refused["content"].startswith("unknown tool 'write_file'")
    assert not (tmp_path / "x.txt").exists()
    assert memory.skills.view("run-tests").body == steps
    updates = [e for e in events if isinstance(e, MemoryUpdated)]
    assert [e.changes for e in updates] == [["skill create run-tests"]]
