"""The README's first command, end to end: demo → DuckDB rows that match the server's usage."""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import hermeslab.providers as providers
from hermeslab.cli import main
from hermeslab.providers.offline import OfflineModel
from hermeslab.store import open as open_lab


class RecordingOfflineModel(OfflineModel):
    """The offline model hosted by the local server, remembering the usage it reported per call."""

    reported: list = []
    #: Usage of the summary requests (one prompt, no tools), which the lab logs as calls of purpose 'summary'.
    summaries: list = []

    def complete(self, request):  # the streaming path answers through complete() too
        response = super().complete(request)
        (RecordingOfflineModel.reported if request.tools else RecordingOfflineModel.summaries).append(response.usage)
        return response


def test_demo_logs_every_table_with_the_servers_usage(tmp_path, monkeypatch, capsys):
    RecordingOfflineModel.reported, RecordingOfflineModel.summaries = [], []
    monkeypatch.setattr(providers, "OfflineModel", RecordingOfflineModel)
    lab_path = tmp_path / "lab.duckdb"
    plot = tmp_path / "usage.png"
    assert main(["demo", "--lab", str(lab_path), "--workspace", str(tmp_path / "ws"), "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "Per-turn usage" in out and "offline model" in out.lower()
    assert plot.stat().st_size > 10_000

    lab = open_lab(lab_path)
    sessions = lab.sessions().sort_values("started_at")
    tip = sessions["id"].iloc[-1]
    assert lab.lineage(tip) == list(sessions["id"])  # the demo's small window rotates into child sessions
    assert set(sessions["end_reason"]) <= {"compression", "agent_close"}
    assert sessions["end_reason"].iloc[-1] == "agent_close"
    assert len(lab.compressions()) >= 1
    assert len(lab.messages(tip)) > 5
    tools = lab.tool_calls()
    assert len(tools) >= 8
    # A compression inside a turn must not leave its request after its own answer: no call is made twice.
    assert not tools.duplicated(["name", "arguments"]).any(), tools[["turn", "name", "arguments"]]
    every_call = lab.api_calls()
    summaries = every_call[every_call["purpose"] == "summary"]
    assert sorted(summaries["prompt_tokens"]) == sorted(u.prompt_tokens for u in RecordingOfflineModel.summaries)
    assert len(summaries) >= 1
    calls = every_call[every_call["purpose"] == "turn"].sort_values(["turn", "call_index"])
    assert len(calls) + len(summaries) == len(every_call)
    assert len(calls) == len(RecordingOfflineModel.reported) > 10
    assert list(calls["prompt_tokens"]) == [u.prompt_tokens for u in RecordingOfflineModel.reported]
    assert list(calls["completion_tokens"]) == [u.completion_tokens for u in RecordingOfflineModel.reported]
    assert not calls["usage_estimated"].any()
    assert set(lab.turns()["status"]) == {"completed"}


def test_the_installed_command_runs(tmp_path):
    exe = Path(sys.executable).with_name("hermeslab")
    result = subprocess.run([str(exe), "demo", "--lab", str(tmp_path / "lab.duckdb"), "--workspace",
                             str(tmp_path / "ws")], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "lab.duckdb").exists()
    assert list(tmp_path.glob("token_usage_*.png"))


KILLED_SCRIPT = textwrap.dedent("""
    import sys
    from hermeslab.core.config import Config
    from hermeslab.runtime import Runtime
    from hermeslab.providers import LocalServer, OfflineModel

    lab, workspace = sys.argv[1], sys.argv[2]
    server = LocalServer(OfflineModel(), chunk_delay=0.02)
    url = server.start()
    config = Config().with_overrides({"store.path": lab, "tools.workspace": workspace,
                                      "model.base_url": url})
    runtime = Runtime(config)
    for n in range(3):
        runtime.agent.chat("list files")
        print("TURN", n + 1, flush=True)
    runtime.agent.chat("count to 2000")   # slow: killed in the middle of this one
    print("UNREACHABLE", flush=True)
""")


@pytest.mark.slow
def test_sigkill_mid_session_keeps_every_completed_turn(tmp_path):
    (tmp_path / "ws").mkdir()
    script = tmp_path / "run.py"
    script.write_text(KILLED_SCRIPT)
    lab = tmp_path / "lab.duckdb"
    process = subprocess.Popen([sys.executable, str(script), str(lab), str(tmp_path / "ws")],
                               stdout=subprocess.PIPE, text=True)
    seen = []
    deadline = time.time() + 120
    while len(seen) < 3 and time.time() < deadline:
        line = process.stdout.readline()
        if line.startswith("TURN"):
            seen.append(line)
    assert len(seen) == 3
    time.sleep(1.0)  # well inside the slow fourth turn
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)

    lab_view = open_lab(lab)
    sessions = lab_view.sessions()
    assert len(sessions) == 1
    session_id = sessions["id"].iloc[0]
    turns = lab_view.turns(session_id)
    assert sorted(turns["turn"]) == [1, 2, 3]
    assert set(turns["status"]) == {"completed"}
    messages = lab_view.messages(session_id)
    assert set(messages["turn"]) <= {0, 1, 2, 3}
    assert len(lab_view.api_calls(session_id)) == 6


def test_chat_and_sessions_commands(tmp_path):
    exe = Path(sys.executable).with_name("hermeslab")
    config = tmp_path / "config.yaml"
    config.write_text(f"store:\n  path: {tmp_path / 'lab.duckdb'}\ntools:\n  workspace: {tmp_path}\n")
    (tmp_path / "hello.txt").write_text("hello from the workspace\n")
    chat = subprocess.run([str(exe), "chat", "--config", str(config)], input="read hello.txt\n/quit\n",
                          capture_output=True, text=True, timeout=120)
    assert chat.returncode == 0, chat.stderr
    assert "hello from the workspace" in chat.stdout
    listing = subprocess.run([str(exe), "sessions", "--config", str(config)], capture_output=True, text=True,
                             timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert "cli" in listing.stdout and "hermeslab-offline" in listing.stdout


def test_serve_command_answers_the_openai_client(tmp_path):
    import socket

    import openai

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exe = Path(sys.executable).with_name("hermeslab")
    server = subprocess.Popen([str(exe), "serve", "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert "served at" in server.stdout.readline()
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local", max_retries=0)
        reply = client.chat.completions.create(model="hermeslab-offline",
                                               messages=[{"role": "user", "content": "Who are you?"}])
        assert "offline model" in reply.choices[0].message.content
        assert reply.usage.prompt_tokens > 0
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(10)


def test_a_demo_that_cannot_open_its_provider_leaves_no_lab_so_the_next_run_says_where_it_made_one(
        tmp_path, monkeypatch, capsys):
    lab_path = tmp_path / "lab.duckdb"

    def broken(config):
        raise ModuleNotFoundError("No module named 'missing_client'")

    monkeypatch.setattr(providers, "open_provider", broken)
    with pytest.raises(ModuleNotFoundError):
        main(["demo", "--lab", str(lab_path), "--workspace", str(tmp_path / "ws"), "--plot", str(tmp_path / "p.png")])
    assert not lab_path.exists()
    monkeypatch.undo()
    assert main(["demo", "--lab", str(lab_path), "--workspace", str(tmp_path / "ws"),
                 "--plot", str(tmp_path / "p.png")]) == 0
    assert f"lab created at {lab_path}" in capsys.readouterr().out


def test_demo_exits_nonzero_with_one_line_when_every_turn_failed(tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = f"seed,model.base_url=http://127.0.0.1:{port}/v1,agent.api_max_retries=0"
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--config", config, "--lab", str(tmp_path / "lab.duckdb"), "--workspace", str(tmp_path / "ws"),
              "--plot", str(tmp_path / "usage.png")])
    assert re.fullmatch(r"hermeslab demo: every turn failed \((\d+) of \1\), so there is no usage to show; "
                        r"the first: .*nothing is listening.*", str(stop.value))
    assert not (tmp_path / "usage.png").exists()
