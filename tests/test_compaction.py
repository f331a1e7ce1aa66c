"""Compression inside the running agent: triggers, rotation and in-place modes, overflow, commands."""

import pytest

from hermeslab.agent import Agent
from hermeslab.context.compactor import Compactor
from hermeslab.session import next_title
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.policies.loading import apply_preset
from hermeslab.context.types import is_summary_message
from hermeslab.core.config import Config
from hermeslab.core.events import CompressionEvent, EventBus, Notice, SessionEnded, SessionStarted
from hermeslab.core.messages import validate_messages
from hermeslab.core.tokens import default_counter
from hermeslab.core.provider import ProviderError
from hermeslab.recovery import classify
from hermeslab.runtime import Runtime
from hermeslab.store import open as open_lab
from hermeslab.tools import builtin_registry
from hermeslab.tools.todo import TodoStore

from scripted_provider import ScriptedProvider

LONG = "The inventory report lists widget_{i} with 1{i}7 units in bin B-{i}. " * 12


def small_config(tmp_path, **overrides):
    return Config().with_overrides({
        "tools.workspace": str(tmp_path), "model.context_length": 3000, "compression.summariser": "extractive",
        **overrides})


def chatty_agent(tmp_path, replies, **overrides):
    config = small_config(tmp_path, **overrides)
    bus = EventBus()
    events = []
    bus.subscribe(events.append)
    todos = TodoStore()
    compactor = Compactor(config, ExtractiveSummariser(), todos=todos.format_for_injection)
    provider = ScriptedProvider(replies)
    agent = Agent(provider, config=config, tools=builtin_registry(config.tools, todo_store=todos), bus=bus,
                  compactor=compactor, sleep=lambda s: None)
    return agent, events, todos, provider


def test_rotation_continues_in_a_child_session_with_numbered_titles(tmp_path):
    replies = [{"content": LONG.format(i=i)} for i in range(12)]
    agent, events, todos, _ = chatty_agent(tmp_path, replies)
    todos.add(["ship the fix"])
    first_session = agent.session.id
    for i in range(12):
        agent.chat(f"Tell me about widget_{i}, please.")
    compressions = [e for e in events if isinstance(e, CompressionEvent)]
    assert compressions and all(c.mode == "rotation" for c in compressions)
    starts = [e for e in events if isinstance(e, SessionStarted)]
    assert starts[0].session_id == first_session and starts[0].title == "Tell me about widget_0, please."
    assert [s.parent_session_id for s in starts[1:]] == [s.session_id for s in starts[:-1]]
    assert starts[1].title == "Tell me about widget_0, please. #2"
    assert [s.title for s in starts[2:4]] == ["Tell me about widget_0, please. #3", "Tell me about widget_0, please. #4"][
        :len(starts[2:4])]
    ended = [e for e in events if isinstance(e, SessionEnded)]
    assert all(e.end_reason == "compression" for e in ended)
    history = agent.messages
    validate_messages(history)
    assert history[0]["role"] == "system"
    assert any(is_summary_message(m) for m in history)
    assert any(m.get("_synthetic") and "ship the fix" in m["content"] for m in history)
    assert history[-2]["content"] == "Tell me about widget_11, please."
    assert agent.compactor.state.compression_count == len(compressions)


def test_in_place_mode_archives_rows_and_keeps_the_session(tmp_path):
    config = small_config(tmp_path, **{"compression.in_place": True, "store.path": str(tmp_path / "lab.duckdb"),
                                       "model.context_length": 8000})
    with Runtime(config) as runtime:
        for i in range(16):
            runtime.agent.chat(f"write \"{LONG.format(i=i)}\" to note_{i}.txt")
        session_id = runtime.agent.session.id
        assert runtime.agent.compactor.state.compression_count >= 1
    lab = open_lab(tmp_path / "lab.duckdb")
    assert len(lab.sessions()) == 1
    rows = lab.messages(session_id)
    archived = rows[~rows["active"]]
    assert len(archived) and archived["compacted"].all()
    history = lab.history(session_id)
    validate_messages(history)
    assert any(is_summary_message(m) for m in history)
    compressions = lab.compressions(session_id)
    assert set(compressions["mode"]) == {"in_place"}
    assert (compressions["archived_before_seq"] > 0).all()


def test_overflow_lowers_the_window_compresses_and_retries(tmp_path):
    replies = [{"content": LONG.format(i=i)} for i in range(6)]
    replies.append(ProviderError("This model's maximum context length is 2048 tokens. However, your messages "
                                 "resulted in 2950 tokens.", status=400, error_type="context_length_exceeded"))
    replies.append({"content": "answered after compressing"})
    agent, events, _, provider = chatty_agent(tmp_path, replies, **{"model.context_length": 100_000})
    for i in range(6):
        agent.chat(f"Describe widget_{i} in detail.")
    result = agent.chat("And now the summary of all widgets?")
    assert result.status == "completed" and result.text == "answered after compressing"
    assert agent.compactor.window == 2048
    overflow = [e for e in events if isinstance(e, CompressionEvent) and e.trigger == "overflow"]
    assert len(overflow) == 1 and overflow[0].details["window"] == 2048
    assert any(isinstance(e, Notice) and "2,048" in e.text for e in events)
    assert len(provider.requests[-1].messages) < len(provider.requests[-2].messages)


def test_a_message_no_compression_could_fit_fails_the_turn_clearly_without_asking_the_provider(tmp_path):
    agent, _, _, provider = chatty_agent(tmp_path, [
        ProviderError("prompt is too long: 5000 tokens > 4096 maximum", status=400)])
    before = list(agent.messages)
    result = agent.chat("Please read this: " + "widget bin count " * 1200)
    assert result.status == "failed" and result.error.startswith("Your message alone is")
    assert "3,000-token window" in result.error and not provider.requests and agent.messages == before


def test_manual_compress_new_and_branch(tmp_path):
    replies = [{"content": LONG.format(i=i)} for i in range(12)] + [{"content": "after branch"}]
    agent, events, _, _ = chatty_agent(tmp_path, replies, **{"model.context_length": 200_000})
    for i in range(12):
        agent.chat(f"Report on widget_{i}.")
    assert agent.compactor.state.compression_count == 0
    compaction = agent.compress("bin locations")
    assert compaction is not None and compaction.changed and compaction.trigger == "manual"
    summary = next(m for m in agent.messages if is_summary_message(m))
    assert "bin" in summary["content"].lower()

    parent = agent.session.id
    child = agent.branch()
    assert child != parent and agent.session.parent_session_id == parent
    assert [e.end_reason for e in events if isinstance(e, SessionEnded)][-1] == "branched"
    assert agent.chat("continue").text == "after branch"

    fresh = agent.new_session()
    assert fresh != child and len(agent.messages) == 1
    assert agent.compactor.state.compression_count == 0


def support_chat(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are a support agent for a phone company. " * 300}]
    for i in range(turns):
        messages += [{"role": "user", "content": f"Question {i}: " + LONG.format(i=i)},
                     {"role": "assistant", "content": f"Answer {i}: " + LONG.format(i=i + 1)}]
    return messages


SUPPORT_TOOLS = [{"type": "function", "function": {"name": "lookup_line", "description": "Find a phone line. " * 200,
                                                    "parameters": {"type": "object", "properties": {}}}}]


def test_the_tail_is_sized_after_the_system_prompt_and_tool_schemas(tmp_path):
    messages = support_chat(20)
    fixed = default_counter.count_message(messages[0]) + default_counter.count_tools(SUPPORT_TOOLS)
    seed = Compactor(small_config(tmp_path, **{"model.context_length": 16_000}), ExtractiveSummariser())
    budgets = seed.run(messages, trigger="manual", tools=SUPPORT_TOOLS).result.record["budgets"]
    assert budgets["fixed_tokens"] == fixed > 3_000
    assert budgets["tail_token_budget"] == int((seed.budgets.threshold_tokens - fixed) * 0.20)
    assert seed.budgets.fixed_tokens == 0  # the trigger still reads the whole prompt against the whole threshold

    hermes = Compactor(apply_preset(small_config(tmp_path, **{"model.context_length": 16_000}), "hermes-0.19"),
                       ExtractiveSummariser())
    assert hermes.budgets_for(messages, SUPPORT_TOOLS) == hermes.budgets


def test_the_agent_counts_its_tool_schemas_as_fixed_cost(tmp_path):
    replies = [{"content": LONG.format(i=i)} for i in range(8)]
    agent, _, _, _ = chatty_agent(tmp_path, replies, **{"model.context_length": 200_000})
    for i in range(8):
        agent.chat(f"Report on widget_{i}.")
    compaction = agent.compress()
    schemas = agent.tools.schemas()
    assert schemas and compaction.result.record["budgets"]["fixed_tokens"] == (
        default_counter.count_message(agent.messages[0]) + default_counter.count_tools(schemas))


def test_two_ineffective_compressions_switch_automatic_compression_off(tmp_path):
    agent, events, _, _ = chatty_agent(tmp_path, [], **{"model.context_length": 200_000})
    policy = agent.compactor.policy
    for _ in range(2):
        policy.record(type("R", (), {"messages": [], "tokens_before": 100, "tokens_after": 99, "aborted": False,
                                     "condensed": 1})(), "turn")
    assert agent.compactor.state.auto_disabled
    assert not policy.should_compress(10**9, "pressure") and policy.should_compress(10**9, "overflow")
    agent.session.append({"role": "user", "content": "x"})
    policy.reset_manual()
    assert not agent.compactor.state.auto_disabled


def test_resume_follows_rotations_and_continues_the_log(tmp_path):
    config = small_config(tmp_path, **{"store.path": str(tmp_path / "lab.duckdb"), "model.context_length": 8000})
    with Runtime(config) as runtime:
        for i in range(14):
            runtime.agent.chat(f"write \"{LONG.format(i=i)}\" to n{i}.txt")
        runtime.writer.flush()  # the last turn may have rotated the session: its rows must be in the lab to read
        root = open_lab(tmp_path / "lab.duckdb").lineage(runtime.agent.session.id)[0]
        tip = runtime.agent.session.id
    assert root != tip
    with Runtime(config) as runtime:
        resumed = runtime.resume(root)
        assert resumed == tip
        runtime.agent.chat("list files")
    lab = open_lab(tmp_path / "lab.duckdb")
    history = lab.history(tip)
    validate_messages(history)
    assert history[-1]["role"] == "assistant"
    assert lab.messages(tip)["id"].is_unique


@pytest.mark.parametrize("status, text, expected", [
    (400, "This model's maximum context length is 8192 tokens.", True),
    (400, "prompt is too long: 210000 tokens > 200000 maximum", True),
    (400, "the request exceeds the available context size (4096 tokens)", True),
    (413, "Request Entity Too Large", True),
    (429, "Rate limit reached: limit 30000 tokens per minute", False),
    (400, "Invalid value for 'temperature'", False),
])
def test_context_overflow_detection(status, text, expected):
    fault = classify(ProviderError(text, status=status))
    assert (fault.name in ("context_overflow", "payload_too_large")) is expected


def test_titles_number_their_continuations():
    assert next_title(None, "Fix the bug") == "Fix the bug #2"
    assert next_title("Fix the bug #2", "x") == "Fix the bug #3"


def test_open_todos_never_split_a_call_from_its_result():
    from hermeslab.context.assemble import merge_summary, summary_text

    todos = TodoStore()
    todos.add(["ship the fix"])
    compactor = Compactor(Config(), ExtractiveSummariser(), todos=todos.format_for_injection)
    call = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
    summary = merge_summary({"role": "assistant", "content": "", "tool_calls": [call]}, summary_text("Earlier work."))
    messages = [{"role": "system", "content": "You help."}, summary,
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "user", "content": "next?"}]
    out = compactor._with_todos(messages)
    assert [m["role"] for m in out[:3]] == ["system", "assistant", "tool"]
    assert out[3]["_synthetic"] and "ship the fix" in out[3]["content"]
    validate_messages([m for m in out if not m.get("_synthetic")])
