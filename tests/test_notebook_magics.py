"""%load_ext hermeslab in an IPython shell: magics, settings, commands, background turns that never interleave."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from IPython import get_ipython
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython
from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm
from scripted_provider import ScriptedProvider

import hermeslab
from hermeslab.core.events import TurnFinished, TurnStarted
from hermeslab.notebook import current_chat
from hermeslab.notebook.extension import _loaded
from hermeslab.notebook.interrupt import InterruptRelay
from hermeslab.notebook.job import RELOAD_HINT
from hermeslab.store import open as open_lab


@pytest.fixture
def shell(tmp_path, monkeypatch):
    """The test IPython with hermeslab loaded, its lab and workspace in tmp_path, displays captured."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("the launch code is 4417\n")
    start_ipython()
    ip = get_ipython()
    setup_test_comm()
    publisher, ip.display_pub = ip.display_pub, CapturingDisplayPublisher()
    ip.run_line_magic("load_ext", "hermeslab")
    ip.run_line_magic("config", f"Hermes.lab = {str(tmp_path / 'lab.duckdb')!r}")
    yield ip
    ip.run_line_magic("unload_ext", "hermeslab")
    ip.config.pop("Hermes", None)  # %config writes into the shell's config, which outlives a test
    ip.display_pub = publisher
    teardown_test_comm()


def final_displays(ip) -> list[dict]:
    """The bundles on screen: each display id's last update (what a frontend would show)."""
    shown: dict[str, dict] = {}
    for output in ip.display_pub.outputs:
        display_id = (output["transient"] or {}).get("display_id") or id(output)
        if output["update"] and display_id not in shown:
            continue
        shown[display_id] = output["data"]
    return list(shown.values())


def gated(steps):
    """A provider whose stream advances one word per 50 ms, so a turn is still running when we look."""
    return ScriptedProvider(steps, chunk_gate=threading.Event())


# ---------------------------------------------------------------- loading


def test_loading_registers_both_names_once_and_twice_is_harmless(shell):
    magics = shell.magics_manager.magics
    assert {"hermes", "hermeslab"} <= set(magics["cell"]) and {"hermes", "hermeslab"} <= set(magics["line"])
    first = _loaded[shell]
    shell.run_line_magic("load_ext", "hermeslab")
    hermeslab.load_ipython_extension(shell)
    assert _loaded[shell] is first
    assert sum(type(c).__name__ == "Hermes" for c in shell.configurables) == 1


def test_only_hermeslab_is_registered_when_another_extension_owns_hermes(shell, capsys):
    shell.run_line_magic("unload_ext", "hermeslab")
    assert "hermes" not in shell.magics_manager.magics["cell"]

    def other(line, cell):
        return "the other extension"

    shell.register_magic_function(other, magic_kind="cell", magic_name="hermes")
    try:
        shell.run_line_magic("load_ext", "hermeslab")
        assert "%%hermes is taken by another extension; use %%hermeslab" in capsys.readouterr().err
        assert ("cell", "hermes") not in _loaded[shell].registered
        assert ("cell", "hermeslab") in _loaded[shell].registered and ("line", "hermes") in _loaded[shell].registered
        assert shell.run_cell_magic("hermes", "", "hi") == "the other extension"
        shell.run_line_magic("unload_ext", "hermeslab")
        assert shell.run_cell_magic("hermes", "", "hi") == "the other extension"
    finally:
        shell.magics_manager.magics["cell"].pop("hermes", None)
        shell.run_line_magic("load_ext", "hermeslab")


def test_import_hermeslab_stays_light():
    code = "import sys, hermeslab; print(sorted(m for m in ('ipywidgets', 'matplotlib', 'pandas', 'IPython') " \
           "if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- settings


def test_config_magic_sets_hermes_settings_and_rejects_bad_values(shell, caplog):
    shell.run_line_magic("config", "Hermes.context_length = 9000")
    shell.run_line_magic("config", "Hermes.stream_delay = -1")
    assert "Hermes.stream_delay must be zero or positive seconds, got -1.0" in caplog.text
    chat = current_chat()
    assert chat.settings.context_length == 9000 and chat.settings.stream_delay == 0
    assert chat.runtime.config.model.context_length == 9000
    assert chat.runtime.config.model.name == "hermeslab-offline"  # the offline model unless told otherwise
    assert chat.gauge.meter.context_length == 9000


def test_ipython_config_file_settings_reach_the_chat(tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "ipython_config.py").write_text(textwrap.dedent(f"""
        c.InteractiveShellApp.extensions = ["hermeslab"]
        c.Hermes.context_length = 12345
        c.Hermes.lab = {str(tmp_path / 'lab.duckdb')!r}
    """))
    code = "from hermeslab.notebook import current_chat; print(current_chat().runtime.config.model.context_length)"
    result = subprocess.run([sys.executable, "-m", "IPython", "--profile-dir", str(profile), "--no-banner",
                             "--colors=nocolor", "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    assert "12345" in result.stdout


def test_changing_a_runtime_setting_rebuilds_and_the_conversation_continues(shell):
    shell.run_cell("%%hermes\nread notes.txt")  # no event loop here: the turn runs in the foreground
    chat = current_chat()
    session, messages = chat.runtime.agent.session.id, len(chat.runtime.agent.messages)
    old = chat.runtime
    shell.run_line_magic("config", "Hermes.context_length = 20000")
    assert chat.runtime is not old and chat.runtime.config.model.context_length == 20000
    assert chat.runtime.agent.session.id == session and len(chat.runtime.agent.messages) == messages


# ---------------------------------------------------------------- turns in the background


def test_a_cell_returns_at_once_and_its_task_can_be_awaited(shell):
    async def scenario():
        shell.run_cell("%%hermes\nread notes.txt")
        chat = current_chat()
        assert isinstance(chat.task, asyncio.Task) and not chat.task.done()  # the cell is done, the turn is not
        return await chat.wait()

    result = asyncio.run(scenario())
    assert result.status == "completed" and "4417" in result.text
    transcript = [d for d in final_displays(shell) if "hermeslab-transcript" in d.get("text/html", "")]
    assert len(transcript) == 1
    html = transcript[0]["text/html"]
    assert "hermeslab-tool" in html and "read_file" in html and "4417" in html and 'data-status="completed"' in html
    controls = [d for d in final_displays(shell) if "hermeslab-controls-final" in d.get("text/html", "")]
    assert len(controls) == 1 and "/ 65,536 tokens" in controls[0]["text/html"]


def test_cancelling_the_task_stops_the_turn_and_logs_it_as_interrupted(shell, tmp_path):
    chat = current_chat()
    chat.runtime.agent.provider = gated([{"content": " ".join(map(str, range(300)))}])

    async def scenario():
        job = chat.ask("count")
        while "3 4 5" not in job.transcript.to_text():
            await asyncio.sleep(0.02)
        job.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job.task
        return job

    job = asyncio.run(scenario())
    assert not chat.busy and job.transcript.status == "interrupted"
    chat.runtime.writer.flush()
    assert list(open_lab(tmp_path / "lab.duckdb").turns()["status"]) == ["interrupted"]


def test_a_second_cell_waits_for_the_running_turn_and_turns_never_interleave(shell):
    chat = current_chat()
    chat.runtime.agent.provider = gated([{"content": "one two three four five six"}, {"content": "second answer"}])
    order = []
    chat.runtime.bus.subscribe(lambda e: order.append((type(e).__name__, e.turn))
                               if isinstance(e, (TurnStarted, TurnFinished)) else None)

    async def scenario():
        first = chat.ask("first")
        second = chat.ask("second")
        await asyncio.sleep(0.05)
        assert second.transcript.status == "waiting"
        assert "waiting for the turn still running" in second.transcript.to_text()
        with pytest.raises(UsageError, match="still running"):
            shell.run_line_magic("hermes", "new")
        await chat.wait()
        return first, second

    first, second = asyncio.run(scenario())
    assert first.result.text == "one two three four five six" and second.result.text == "second answer"
    assert order == [("TurnStarted", 1), ("TurnFinished", 1), ("TurnStarted", 2), ("TurnFinished", 2)]
    assert "waited" in second.transcript.to_text()


def test_stopping_a_queued_turn_keeps_it_from_starting(shell):
    chat = current_chat()
    chat.runtime.agent.provider = gated([{"content": "a b c d"}])

    async def scenario():
        chat.ask("first")
        queued = chat.ask("second")
        queued.stop_button._handle_msg({"content": {"data": {"method": "custom", "content": {"event": "click"}}},
                                        "buffers": []})
        await chat.wait()
        return queued

    queued = asyncio.run(scenario())
    assert queued.transcript.status == "stopped" and queued.result is None
    assert chat.runtime.agent.session.turns == 1


# ---------------------------------------------------------------- stop, attach, interrupt


def new_displays(ip, since: int) -> list[dict]:
    """Displays (not updates) published since output number ``since``: data and display id."""
    return [{"data": out["data"], "id": (out["transient"] or {}).get("display_id")}
            for out in ip.display_pub.outputs[since:] if not out["update"]]


def test_stop_command_stops_the_running_turn_and_the_queued_ones_then_the_chat_goes_on(shell, capsys, tmp_path):
    chat = current_chat()
    chat.runtime.agent.provider = gated([{"content": " ".join(map(str, range(300)))}, {"content": "later"}])
    shell.run_line_magic("hermes", "stop")
    assert "nothing to stop" in capsys.readouterr().out

    async def scenario():
        running, queued = chat.ask("count"), chat.ask("second")
        while "3 4 5" not in running.transcript.to_text():
            await asyncio.sleep(0.02)
        shell.run_line_magic("hermes", "stop")  # another cell: the kernel is free while the turn runs
        await chat.wait()
        return running, queued

    running, queued = asyncio.run(scenario())
    out = capsys.readouterr().out
    assert "stopping the running turn" in out and "1 queued job will not start" in out
    assert running.transcript.status == "interrupted" and running.result.text.startswith("0 1 2 3 4 5")
    assert queued.transcript.status == "stopped" and queued.result is None
    assert running.stop_button.description == "Stopped"
    assert not chat.pending
    shell.run_cell("%%hermes\nand now?")
    assert chat.last_job.result.status == "completed" and chat.last_job.result.text == "later"
    chat.runtime.writer.flush()
    assert list(open_lab(tmp_path / "lab.duckdb").turns().sort_values("turn")["status"]) == ["interrupted",
                                                                                            "completed"]


def test_an_interrupt_from_the_signal_handler_stops_the_turn_on_the_loop(shell):
    chat = current_chat()
    chat.runtime.agent.provider = gated([{"content": " ".join(map(str, range(300)))}])
    chat.interrupt_soon()  # nothing running: nothing happens

    async def scenario():
        job = chat.ask("count")
        while "3 4 5" not in job.transcript.to_text():
            await asyncio.sleep(0.02)
        chat.interrupt_soon()
        await chat.wait()
        return job

    assert asyncio.run(scenario()).transcript.status == "interrupted"


def test_attach_shows_the_running_turn_again_under_the_same_display_ids(shell, capsys):
    chat = current_chat()
    shell.run_line_magic("hermes", "attach")
    assert "nothing to show" in capsys.readouterr().out
    chat.runtime.agent.provider = gated([{"content": "one two three four five six seven eight nine ten"}])

    async def scenario():
        job = chat.ask("count")
        while "two" not in job.transcript.to_text():
            await asyncio.sleep(0.02)
        first = new_displays(shell, 0)
        since = len(shell.display_pub.outputs)
        shell.run_line_magic("hermes", "attach")
        again = new_displays(shell, since)
        await chat.wait()
        return first, again

    first, again = asyncio.run(scenario())
    assert [d["id"] for d in again] == [d["id"] for d in first] and all(d["id"] for d in first)
    assert "StopButton" in again[0]["data"]["text/plain"]  # the live controls (a widget view in a kernel)
    assert RELOAD_HINT in again[1]["data"]["text/plain"] and "hermeslab-reload-hint" in again[1]["data"]["text/html"]
    # Later updates go to both copies (one display id); the final state leaves the hint out.
    transcript = [d for d in final_displays(shell) if "hermeslab-transcript" in d.get("text/html", "")]
    assert len(transcript) == 1 and 'data-status="completed"' in transcript[0]["text/html"]
    assert RELOAD_HINT not in transcript[0]["text/plain"] and "ten" in transcript[0]["text/plain"]

    since = len(shell.display_pub.outputs)
    shell.run_line_magic("hermes", "attach")  # after the end: the last turn as it ended, nothing live
    controls, final = new_displays(shell, since)
    assert "hermeslab-controls-final" in controls["data"]["text/html"] and controls["id"] is None
    assert 'data-status="completed"' in final["data"]["text/html"] and RELOAD_HINT not in final["data"]["text/plain"]


def test_ctrl_c_stops_a_foreground_turn_and_the_chat_goes_on(shell):
    chat = current_chat()
    chat.runtime.agent.provider = gated([{"content": " ".join(map(str, range(300)))}, {"content": "later"}])

    seen = []

    def interrupt_once_streaming():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            job = chat.running_job
            if job is not None and "3 4 5" in job.transcript.to_text():
                seen.append(job.bundle()["text/plain"])
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    threading.Thread(target=interrupt_once_streaming, daemon=True).start()
    result = shell.run_cell("%%hermes\ncount")  # no event loop: the cell waits for the turn, Ctrl-C stops it
    assert result.success
    job = chat.last_job
    assert job.transcript.status == "interrupted" and job.result.text.startswith("0 1 2 3 4 5")
    assert seen and RELOAD_HINT not in seen[0]  # a cell that waits cannot lose its output to a reload
    shell.run_cell("%%hermes\nand now?")
    assert chat.last_job.result.text == "later" and chat.runtime.agent.session.turns == 2


class IdleKernel:
    """ipykernel's SIGINT handling: ignored while idle, a KeyboardInterrupt while a request is handled."""

    saved_sigint_handler = None

    def pre_handler_hook(self):
        self.saved_sigint_handler = signal.signal(signal.SIGINT, signal.default_int_handler)

    def post_handler_hook(self):
        signal.signal(signal.SIGINT, self.saved_sigint_handler)


@pytest.fixture
def idle_sigint():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


def test_the_relay_hears_sigint_idle_or_busy_and_keeps_what_the_kernel_would_do(idle_sigint):
    heard = []
    kernel = IdleKernel()
    relay = InterruptRelay(lambda: heard.append("interrupt"))
    assert relay.attach(kernel) and relay.attach(kernel)  # twice is harmless
    signal.raise_signal(signal.SIGINT)  # idle: heard, and still ignored
    assert heard == ["interrupt"]
    kernel.pre_handler_hook()
    with pytest.raises(KeyboardInterrupt):  # a request runs: heard, and it still gets its KeyboardInterrupt
        signal.raise_signal(signal.SIGINT)
    kernel.post_handler_hook()
    signal.raise_signal(signal.SIGINT)
    assert heard == ["interrupt"] * 3

    kernel.pre_handler_hook()
    relay.detach()  # mid-request, as %unload_ext is: the idle handler the kernel puts back is its own again
    kernel.post_handler_hook()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert kernel.pre_handler_hook.__func__ is IdleKernel.pre_handler_hook
    signal.raise_signal(signal.SIGINT)
    assert heard == ["interrupt"] * 3


def test_the_relay_stays_out_where_it_cannot_follow_the_kernel(idle_sigint):
    relay = InterruptRelay(lambda: None)
    assert not relay.attach(object())  # a terminal IPython: Ctrl-C reaches the waiting cell itself
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(relay.attach(IdleKernel())))
    worker.start()
    worker.join()
    assert outcome == [False] and signal.getsignal(signal.SIGINT) == signal.SIG_IGN


# ---------------------------------------------------------------- commands


def test_usage_errors_are_one_clear_line(shell, capsys):
    for line, cell, message in [("", "   ", "the cell is empty"), ("--fast", "hi", "takes no options")]:
        with pytest.raises(UsageError, match=message):
            shell.run_cell_magic("hermes", line, cell)
    for line, message in [("dance", "unknown %hermes command 'dance'"), ("resume", "usage: %hermes resume"),
                          ("export pdf out.pdf", "usage: %hermes export"), ("config threshold", "key=value"),
                          ("config compression.nonsense=1", "unknown config key 'compression.nonsense'"),
                          ("resume nope", "no session 'nope'"), ("new now", "takes no arguments")]:
        with pytest.raises(UsageError, match=message):
            shell.run_line_magic("hermes", line)
    shell.run_line_magic("hermes", "")
    assert "compress [focus]" in capsys.readouterr().out


def test_new_branch_resume_and_status(shell, capsys):
    shell.run_cell("%%hermes\nread notes.txt")
    chat = current_chat()
    first = chat.runtime.agent.session.id
    shell.run_line_magic("hermes", "branch")
    branched = chat.runtime.agent.session
    assert branched.parent_session_id == first and branched.id != first
    shell.run_line_magic("hermes", "new")
    assert chat.runtime.agent.session.id not in (first, branched.id) and len(chat.runtime.agent.messages) == 1
    shell.run_line_magic("hermes", f"resume {first}")
    assert chat.runtime.agent.session.id == first and len(chat.runtime.agent.messages) > 3
    capsys.readouterr()
    shell.run_line_magic("hermes", "status")
    out = capsys.readouterr().out
    assert f"session      {first}" in out and "turns        1 · compressions 0" in out
    assert "/ 65,536 tokens" in out and "hermeslab-offline" in out


def test_compress_now_rotates_and_status_shows_the_lineage(shell, capsys):
    for text in ["read notes.txt", "tell me a long story", "list files", "add todos: call Ada; fix the build"]:
        shell.run_cell(f"%%hermes\n{text}")
    chat = current_chat()
    before = chat.runtime.agent.session.id
    shell.run_line_magic("hermes", "compress the launch code")
    job = chat.last_job
    assert job.transcript.status == "compressed" and job.result.changed
    assert "context compressed (manual)" in job.transcript.to_text()
    assert chat.gauge.meter.reported is None
    capsys.readouterr()
    shell.run_line_magic("hermes", "status")
    out = capsys.readouterr().out
    assert f"lineage      {before} → {chat.runtime.agent.session.id}" in out and "compressions 1" in out
    child = chat.runtime.agent.session.id
    shell.run_line_magic("hermes", "new")
    shell.run_line_magic("hermes", f"resume {before}")  # follows the rotation to the child
    assert chat.runtime.agent.session.id == child
    capsys.readouterr()
    shell.run_line_magic("hermes", "status")
    assert "compressions 1" in capsys.readouterr().out  # counted over the lineage, not the fresh compactor


def test_config_command_rebuilds_with_overrides_and_keeps_the_conversation(shell, capsys):
    shell.run_cell("%%hermes\nread notes.txt")
    chat = current_chat()
    session = chat.runtime.agent.session.id
    shell.run_line_magic("hermes", 'config compression.threshold=0.6 agent.system_prompt="Be brief."')
    assert chat.runtime.config.compression.threshold == 0.6
    assert chat.runtime.config.agent.system_prompt == "Be brief."
    assert chat.runtime.agent.session.id == session
    assert "continues in session" in capsys.readouterr().out


def test_the_config_command_says_where_compression_fires_and_which_rule_decided(shell, capsys):
    shell.run_line_magic("hermes", "config model.context_length=100000 compression.threshold=0.6")
    out = capsys.readouterr().out
    assert ("compression fires at 64,000 tokens (0.64 of the 100,000-token window): seed's min_threshold_tokens "
            "floor of 64,000 wins over 0.6 of the window below windows of 106,667 tokens") in out
    shell.run_line_magic("hermes", "config model.context_length=200000")
    assert "compression fires at 120,000 tokens (0.60 of the 200,000-token window)" in capsys.readouterr().out


def test_a_refused_setting_leaves_the_previous_config_in_force(shell, capsys):
    shell.run_cell("%%hermes\nread notes.txt")
    chat = current_chat()
    session = chat.runtime.agent.session.id
    with pytest.raises(UsageError, match=r"compression.threshold: expected a fraction in \(0, 1\], got 5"):
        shell.run_line_magic("hermes", "config compression.threshold=5")
    assert chat.runtime.config.compression.threshold == 0.5 and "compression.threshold" not in chat.overrides
    shell.run_line_magic("hermes", "status")
    shell.run_cell("%%hermes\nlist files")  # no event loop here: the turn runs in the foreground
    assert chat.runtime.agent.session.id == session and chat.runtime.agent.session.turns == 2


def test_export_writes_markdown_and_the_recorded_session_format(shell, tmp_path):
    shell.run_cell("%%hermes\nread notes.txt")
    with pytest.raises(UsageError, match=f"no folder {tmp_path / 'out'} to write chat.jsonl in"):
        shell.run_line_magic("hermes", f"export jsonl {tmp_path / 'out' / 'chat.jsonl'}")
    assert not (tmp_path / "out").exists()  # a missing folder is refused, not made
    (tmp_path / "out").mkdir()
    shell.run_line_magic("hermes", f"export jsonl {tmp_path / 'out' / 'chat.jsonl'}")
    shell.run_line_magic("hermes", f"export md {tmp_path / 'chat.md'}")
    lines = (tmp_path / "out" / "chat.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert set(record) == {"id", "source", "license", "model", "messages", "tools", "meta"}
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert all(isinstance(m["content"], str) for m in record["messages"])
    assert record["messages"][2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert {t["function"]["name"] for t in record["tools"]} >= {"read_file", "list_dir"}
    markdown = (tmp_path / "chat.md").read_text()
    assert markdown.startswith("# read notes.txt") and "## tool" in markdown and "4417" in markdown
    with pytest.raises(UsageError, match="is a directory"):
        shell.run_line_magic("hermes", f"export md {tmp_path}")


def test_unloading_releases_the_runtime(shell):
    chat = current_chat()
    server = chat.runtime.provider_handle.server
    shell.run_line_magic("unload_ext", "hermeslab")
    assert not server.running
    assert "hermes" not in shell.magics_manager.magics["cell"]
    with pytest.raises(RuntimeError, match="load_ext hermeslab"):
        current_chat()
    shell.run_line_magic("load_ext", "hermeslab")
