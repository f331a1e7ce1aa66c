"""What llama-server says about itself reaches the client: a template without tools, its slots, its pace."""

from __future__ import annotations

from hermeslab.agent import Agent
from hermeslab.core.config import Config
from hermeslab.core.events import EventBus, Notice
from hermeslab.core.provider import ChatRequest
from hermeslab.providers import LocalServer, OfflineModel, OpenAICompatProvider
from hermeslab.tools import builtin_registry


def test_tools_a_template_cannot_render_are_said_once_and_left_out_of_the_count(tmp_path):
    server = LocalServer(OfflineModel(), personality="llama-server", supports_tools=False)
    url = server.start()
    provider = OpenAICompatProvider(url, None, "hermeslab-offline")
    try:
        config = Config().with_overrides({"tools.workspace": str(tmp_path)})
        tools = builtin_registry(config.tools)
        bus, notices = EventBus(), []
        bus.subscribe(notices.append, kinds=(Notice,))
        agent = Agent(provider, config=config, tools=tools, bus=bus)
        agent.chat("hello")
        agent.chat("and again")
        assert provider.server_props().supports_tools is False and provider.server_props().slots == 1
        said = [n.text for n in notices if "no tool support" in n.text]
        assert len(said) == 1 and agent.calls.server_note == said[0]
        schemas = agent.tools.schemas()
        with_tools = agent.context.count_request(agent.messages, schemas)
        assert agent.context.tools_dropped and with_tools == agent.context.count_request(agent.messages, None)
    finally:
        provider.close()
        server.stop()


def test_a_template_with_tools_changes_nothing(tmp_path):
    server = LocalServer(OfflineModel(), personality="llama-server")
    url = server.start()
    provider = OpenAICompatProvider(url, None, "hermeslab-offline")
    try:
        config = Config().with_overrides({"tools.workspace": str(tmp_path)})
        agent = Agent(provider, config=config, tools=builtin_registry(config.tools))
        agent.chat("hello")
        assert not agent.context.tools_dropped and agent.calls.server_note is None
    finally:
        provider.close()
        server.stop()


def test_the_servers_timings_set_the_pace_of_later_timeouts():
    server = LocalServer(OfflineModel(), personality="llama-server")
    url = server.start()
    provider = OpenAICompatProvider(url, None, "hermeslab-offline", timeout=60.0)
    try:
        request = ChatRequest(messages=[{"role": "user", "content": "write a long story " * 20}], max_tokens=200)
        provider.complete(request)
        assert provider.pace.generated_per_second is not None
        expected = provider.pace.expected_seconds(100, 10**9)
        assert provider.request_timeout(ChatRequest(messages=request.messages, max_tokens=10**9)) >= expected
    finally:
        provider.close()
        server.stop()


def test_dropped_tools_are_said_by_status_in_the_terminal_and_the_notebook_and_kept_in_the_lab(tmp_path, capsys,
                                                                                              monkeypatch):
    from hermeslab.notebook.chat import NotebookChat
    from hermeslab.notebook.settings import Hermes
    from hermeslab.store import open as open_lab
    from hermeslab.terminal import TerminalChat

    monkeypatch.chdir(tmp_path)  # anything not named here (the notebook's memory) lives under it
    server = LocalServer(OfflineModel(), personality="llama-server", supports_tools=False)
    url = server.start()
    try:
        terminal = TerminalChat(Config().with_overrides({
            "model.base_url": url, "model.name": "hermeslab-offline", "store.path": str(tmp_path / "cli.duckdb"),
            "memory.path": str(tmp_path), "tools.workspace": str(tmp_path)}))
        try:
            terminal.handle("hello")
            capsys.readouterr()
            terminal.handle("/status")
            shown = capsys.readouterr().out
        finally:
            terminal.close()
        assert "server       the server's chat template has no tool support" in shown
        notices = open_lab(tmp_path / "cli.duckdb").events(kind="notice")
        assert notices["payload"].str.contains("no tool support").sum() == 1

        chat = NotebookChat(Hermes(base_url=url, model="hermeslab-offline", lab=str(tmp_path / "nb.duckdb"),
                                   workspace=str(tmp_path)), display=lambda *args, **kwargs: None)
        try:
            assert not any(line.startswith("server") for line in chat.status().lines())
            chat.runtime.agent.chat("hello")
            lines = chat.status().lines()
        finally:
            chat.close()
        assert any(line.startswith("server") and "no tool support" in line for line in lines)
    finally:
        server.stop()


def test_estimates_stay_with_the_servers_count_when_its_template_drops_the_tools(tmp_path):
    """The schemas the template drops are an amount apart from the tokenizers' ratio: taken out of the count, the
    calibration learns the ratio alone, and every later estimate stays with what the server reports (counting them
    in, the first reading taught a ratio far below one and later estimates ran several times low)."""
    from hermeslab.core.events import ApiCallFinished

    server = LocalServer(OfflineModel(), personality="llama-server", supports_tools=False)
    url = server.start()
    provider = OpenAICompatProvider(url, None, "hermeslab-offline")
    try:
        config = Config().with_overrides({"tools.workspace": str(tmp_path)})
        tools = builtin_registry(config.tools)
        bus, calls = EventBus(), []
        bus.subscribe(calls.append, kinds=(ApiCallFinished,))
        agent = Agent(provider, config=config, tools=tools, bus=bus)
        schemas = agent.context.counter.count_tools(agent.tools.schemas())
        for index in range(4):
            agent.chat(f"Message {index}: " + "tell me more about the lab. " * (20 * index + 1))
    finally:
        provider.close()
        server.stop()
    answered = [c for c in calls if c.purpose == "turn" and c.prompt_tokens]
    assert len(answered) >= 4 and schemas > answered[0].prompt_tokens  # the schemas outweigh the first prompt
    for call in answered[1:]:
        assert abs(call.estimated_prompt_tokens - call.prompt_tokens) <= 0.1 * call.prompt_tokens, call
