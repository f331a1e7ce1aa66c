import json
import threading


from hermeslab.agent import Agent
from hermeslab.core.config import Config
from hermeslab.core.events import ApiCallFinished, EventBus, MessageAdded, ToolCallFinished, TurnFinished
from hermeslab.core.messages import validate_messages
from hermeslab.core.provider import ProviderError
from hermeslab.tools import builtin_registry
from hermeslab.tools.registry import Tool, ToolRegistry

from scripted_provider import ScriptedProvider, tool_call


def make_agent(tmp_path, steps, **overrides):
    config = Config().with_overrides({"tools.workspace": str(tmp_path), **overrides})
    bus = EventBus()
    events = []
    bus.subscribe(events.append)
    provider = ScriptedProvider(steps)
    agent = Agent(provider, config=config, tools=builtin_registry(config.tools), bus=bus, sleep=lambda s: None)
    return agent, provider, events


def test_tool_round_trip_builds_a_message_tree(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    agent, provider, events = make_agent(tmp_path, [
        {"content": "", "tool_calls": [tool_call("c1", "read_file", '{"path": "a.txt"}'),
                                       tool_call("c2", "list_dir", '{"path": "."}')]},
        {"content": "a.txt says alpha"},
    ])
    result = agent.chat("what is in a.txt?")
    assert result.status == "completed" and result.text == "a.txt says alpha"
    assert result.api_calls == 2
    validate_messages(agent.messages)
    added = [e for e in events if isinstance(e, MessageAdded)]
    by_id = {e.message_id: e for e in added}
    user, assistant, r1, r2, final = added[1:]
    assert user.parent_id is None
    assert assistant.parent_id == user.message_id
    assert r1.parent_id == r2.parent_id == assistant.message_id
    assert [r1.message["tool_call_id"], r2.message["tool_call_id"]] == ["c1", "c2"]
    assert final.parent_id == assistant.message_id
    assert "alpha" in by_id[r1.message_id].message["content"]
    assert {e.trace_id for e in events if e.turn == 1} == {added[1].trace_id}
    # the second request carried both tool results
    assert [m["role"] for m in provider.requests[1].messages][-3:] == ["assistant", "tool", "tool"]


def test_workspace_escape_is_a_tool_error_and_the_loop_goes_on(tmp_path):
    (tmp_path / "innocent.txt").symlink_to("/etc/passwd")
    agent, _, events = make_agent(tmp_path, [
        {"content": "", "tool_calls": [tool_call("c1", "read_file", '{"path": "../../etc/passwd"}')]},
        {"content": "", "tool_calls": [tool_call("c2", "read_file", '{"path": "/etc/passwd"}'),
                                       tool_call("c3", "read_file", '{"path": "innocent.txt"}')]},
        {"content": "I cannot read files outside the workspace."},
    ])
    result = agent.chat("read ../../etc/passwd")
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.is_error for e in finished] == [True, True, True]
    assert "escapes the workspace root" in finished[0].result
    assert "absolute path '/etc/passwd' is not allowed" in finished[1].result
    assert "innocent.txt" in finished[2].result and "root:" not in finished[2].result
    assert "root:" not in json.dumps([m for m in agent.messages])
    assert result.status == "completed"


def test_malformed_tool_arguments_become_a_tool_error(tmp_path):
    agent, provider, events = make_agent(tmp_path, [
        {"content": "", "tool_calls": [tool_call("c1", "read_file", '{"path": "a.txt"')]},
        {"content": "sorry, retrying is not needed"},
    ], **{"recovery.max_argument_retries": 0})
    result = agent.chat("read a.txt")
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[0].is_error and "JSON" in finished[0].result
    assert result.status == "completed"
    # history stays sendable: the arguments were wrapped into valid JSON
    sent = provider.requests[1].messages
    json.loads(sent[-2]["tool_calls"][0]["function"]["arguments"])
    validate_messages(agent.messages)


def test_transient_provider_errors_are_retried_then_fatal_ones_stop(tmp_path):
    agent, _, events = make_agent(tmp_path, [
        ProviderError("overloaded", status=503),
        {"content": "fine now"},
        ProviderError("bad key", status=401),
    ])
    assert agent.chat("hi").text == "fine now"
    calls = [e for e in events if isinstance(e, ApiCallFinished)]
    assert [(c.attempt, c.status_code) for c in calls] == [(1, 503), (2, None)]
    failed = agent.chat("again")
    assert failed.status == "failed" and "401" in failed.error
    validate_messages(agent.messages)


def test_max_iterations_bounds_the_turn(tmp_path):
    steps = [{"content": "", "tool_calls": [tool_call(f"c{i}", "list_dir", "{}")]} for i in range(3)]
    agent, _, events = make_agent(tmp_path, steps, **{"agent.max_iterations": 3})
    result = agent.chat("loop forever")
    assert result.status == "max_iterations" and result.api_calls == 3
    assert [e for e in events if isinstance(e, TurnFinished)][0].status == "max_iterations"


def test_interrupt_mid_stream_keeps_partial_text(tmp_path):
    gate = threading.Event()
    config = Config().with_overrides({"tools.workspace": str(tmp_path)})
    bus = EventBus()
    provider = ScriptedProvider([{"content": " ".join(f"word{i}" for i in range(200))}], chunk_gate=gate)
    agent = Agent(provider, config=config, bus=bus)
    deltas = []

    def on_event(event):
        if event.kind == "text_delta":
            deltas.append(event.text)
            if len(deltas) == 5:
                agent.interrupt()

    bus.subscribe(on_event)
    result = agent.chat("long answer please")
    assert result.status == "interrupted"
    assert result.text.startswith("word0 word1") and "word199" not in result.text
    assert agent.messages[-1]["_interrupted"] is True


def test_self_check_makes_one_extra_call_without_keeping_the_draft(tmp_path):
    agent, provider, _ = make_agent(tmp_path, [{"content": "draft 41"}, {"content": "checked: 42"}],
                                    **{"agent.self_check": True})
    result = agent.chat("what is 6*7?")
    assert result.text == "checked: 42" and result.api_calls == 2
    assert provider.requests[1].messages[-2]["content"] == "draft 41"
    assert [m["content"] for m in agent.messages if m["role"] == "assistant"] == ["checked: 42"]


def test_only_idempotent_tools_are_retried(tmp_path):
    from hermeslab.tools.registry import TransientToolError

    attempts = {"flaky_read": 0, "flaky_write": 0}

    def handler(name):
        def run(args):
            attempts[name] += 1
            if attempts[name] == 1:
                raise TransientToolError("temporarily unavailable")
            return "ok"
        return run

    registry = ToolRegistry()
    params = {"type": "object", "properties": {}}
    registry.register(Tool("flaky_read", "read", params, handler("flaky_read"), read_only=True, idempotent=True))
    registry.register(Tool("flaky_write", "write", params, handler("flaky_write")))
    provider = ScriptedProvider([
        {"content": "", "tool_calls": [tool_call("a", "flaky_read", "{}"), tool_call("b", "flaky_write", "{}")]},
        {"content": "done"},
    ])
    agent = Agent(provider, tools=registry, config=Config().with_overrides({"tools.idempotent_retries": 2}))
    agent.chat("go")
    results = {m["tool_call_id"]: m["content"] for m in agent.messages if m["role"] == "tool"}
    assert attempts == {"flaky_read": 2, "flaky_write": 1}
    assert results["a"] == "ok" and "temporarily unavailable" in results["b"]


def test_turns_never_interleave(tmp_path):
    gate = threading.Event()
    provider = ScriptedProvider([{"content": "one two three"}, {"content": "four"}], chunk_gate=gate)
    agent = Agent(provider)
    results = []
    threads = [threading.Thread(target=lambda t=t: results.append(agent.chat(t))) for t in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    roles = [m["role"] for m in agent.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]


def test_a_call_cut_off_by_an_interrupt_gets_a_result_even_when_an_earlier_turn_used_its_id(tmp_path):
    def stop_here(arguments):
        raise KeyboardInterrupt

    registry = ToolRegistry()
    registry.register(Tool("note", "Write a note.", {"type": "object"}, lambda arguments: "noted"))
    registry.register(Tool("halt", "Stop the agent.", {"type": "object"}, stop_here))
    provider = ScriptedProvider([
        {"content": "", "tool_calls": [tool_call("call_0", "note", "{}")]},
        {"content": "noted it"},
        {"content": "", "tool_calls": [tool_call("call_0", "halt", "{}")]},
    ])
    agent = Agent(provider, config=Config(), tools=registry, bus=EventBus(), sleep=lambda s: None)
    assert agent.chat("note something").status == "completed"
    assert agent.chat("now stop").status == "interrupted"
    assert [m["role"] for m in agent.messages[-2:]] == ["assistant", "tool"]
    assert agent.messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "interrupted before running"}


def test_a_message_too_large_for_the_window_is_refused_before_it_enters_the_history():
    config = Config().with_overrides({"model.context_length": 2_000})
    agent = Agent(ScriptedProvider([{"content": "hello back"}]), config=config)
    before = list(agent.messages)
    result = agent.chat("word " * 5_000)
    assert result.status == "failed" and result.text.startswith("Your message alone is ")
    assert "2,000-token window" in result.text and "not sent" in result.text
    assert agent.messages == before  # the conversation is unchanged ...
    following = agent.chat("hello")  # ... and usable
    assert following.status == "completed" and following.text == "hello back"
