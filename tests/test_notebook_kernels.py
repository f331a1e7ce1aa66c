"""Real kernels: two chatting into one lab at once, one shut down or interrupted mid-turn, 01_chat.ipynb under nbval."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

from hermeslab.store import open as open_lab

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
KERNEL = "hermeslab-test-python"


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernelspec for this very Python, and an IPython profile of its own, both under tmp_path."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hermeslab tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    return tmp_path


def chat_notebook(lab: Path, workspace: Path, messages: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        f"%load_ext hermeslab\n%config Hermes.lab = {str(lab)!r}\n%config Hermes.workspace = {str(workspace)!r}\n"
        "%config Hermes.stream_delay = 0.004")]
    nb.cells += [nbformat.v4.new_code_cell(f"%%hermes\n{message}") for message in messages]
    nb.cells.append(nbformat.v4.new_code_cell(
        "from hermeslab.notebook import current_chat\n"
        "result = await current_chat().wait()\n"
        "print(current_chat().runtime.agent.session.id, result.status)"))
    return nb


def transcript_text(cell) -> str:
    return "\n".join(out["data"]["text/plain"] for out in cell.outputs
                     if "text/html" in out.get("data", {}) and "hermeslab-transcript" in out["data"]["text/html"])


def test_two_kernels_chat_into_one_lab_at_once_and_log_every_turn(kernel_env):
    lab = kernel_env / "shared" / "lab.duckdb"
    (kernel_env / "notes.txt").write_text("alpha beta gamma\n")
    messages = ["count to 300", "read notes.txt", "count to 80", "list files"]
    notebooks = [chat_notebook(lab, kernel_env, messages) for _ in range(2)]

    async def run_both():
        clients = [NotebookClient(nb, timeout=120, kernel_name=KERNEL,
                                  resources={"metadata": {"path": str(kernel_env)}}) for nb in notebooks]
        await asyncio.gather(*(client.async_execute() for client in clients))

    asyncio.run(run_both())

    session_ids = []
    for nb in notebooks:
        last = nb.cells[-1].outputs[0]["text"].split()
        assert last[1] == "completed"
        session_ids.append(last[0])
        # Every %%hermes cell returned at once, so each later one waited for the turn before it.
        for cell in nb.cells[2:-1]:
            assert "waited" in transcript_text(cell)
        assert "alpha beta gamma" in transcript_text(nb.cells[2])
    assert session_ids[0] != session_ids[1]

    turns = open_lab(lab).turns()
    spans = []
    for session_id in session_ids:
        mine = turns[turns["session_id"] == session_id].sort_values("turn")
        assert list(mine["status"]) == ["completed"] * 4
        assert list(mine["user_text"]) == messages
        # Turns of one chat never overlap: each starts after the one before it ended.
        assert (mine["started_at"].iloc[1:].to_numpy() >= mine["ended_at"].iloc[:-1].to_numpy()).all()
        spans.append((mine["started_at"].min(), mine["ended_at"].max()))
    (start_a, end_a), (start_b, end_b) = spans
    assert start_a < end_b and start_b < end_a, "the two kernels were meant to chat at the same time"
    calls = open_lab(lab).api_calls()
    assert set(calls["session_id"]) == set(session_ids) and calls["error_class"].isna().all()


def test_the_chat_notebook_runs_under_nbval(kernel_env):
    shutil.copy(REPO / "notebooks" / "01_chat.ipynb", kernel_env / "01_chat.ipynb")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider", "-q",
         "01_chat.ipynb"], cwd=kernel_env, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout  # its last cell checks the export
    assert not (kernel_env / "notes.txt").exists() and not (kernel_env / "chat.jsonl").exists()  # left nothing here


def test_a_kernel_shut_down_mid_turn_logs_the_turn_as_interrupted(kernel_env):
    lab = kernel_env / "lab.duckdb"
    manager, client = start_new_kernel(kernel_name=KERNEL, cwd=str(kernel_env))
    try:
        client.execute_interactive(f"%load_ext hermeslab\n%config Hermes.lab = {str(lab)!r}\n"
                                   "%config Hermes.stream_delay = 0.02", timeout=60)
        client.execute_interactive("%%hermes\ncount to 3000", timeout=60)  # returns while the turn streams
        client.execute_interactive("import time; time.sleep(1)", timeout=60)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)
    turns = open_lab(lab).turns()
    assert list(turns["status"]) == ["interrupted"]
    assert turns["final_text"].iloc[0].startswith("1, 2, 3,")


def test_kernel_interrupt_stops_a_background_turn_whether_the_kernel_is_idle_or_busy(kernel_env):
    lab = kernel_env / "lab.duckdb"
    manager, client = start_new_kernel(kernel_name=KERNEL, cwd=str(kernel_env))
    printed: list[str] = []

    def collect(message):
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    def ended_as() -> str:
        printed.clear()
        reply = client.execute_interactive("from hermeslab.notebook import current_chat\n"
                                           "print((await current_chat().wait()).status)", timeout=60,
                                           output_hook=collect)
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(printed).strip()

    try:
        client.execute_interactive(f"%load_ext hermeslab\n%config Hermes.lab = {str(lab)!r}\n"
                                   "%config Hermes.stream_delay = 0.02", timeout=60)
        # Idle: the cell returned while the turn streams, and an idle kernel used to ignore SIGINT.
        client.execute_interactive("%%hermes\ncount to 3000", timeout=60)
        time.sleep(1.0)
        manager.interrupt_kernel()
        assert ended_as() == "interrupted"

        # Busy with another cell: that cell gets its KeyboardInterrupt, and the turn stops as well.
        client.execute_interactive("%%hermes\ncount to 3000", timeout=60)
        # stop_on_error=False: otherwise the kernel aborts the requests queued right after this cell fails.
        sleeping = client.execute("import time\ntime.sleep(60)", stop_on_error=False)
        time.sleep(1.0)
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != sleeping:
            reply = client.get_shell_msg(timeout=30)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        assert ended_as() == "interrupted"

        client.execute_interactive("%%hermes\nhello", timeout=60)  # the history is still usable
        assert ended_as() == "completed"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)
    turns = open_lab(lab).turns().sort_values("turn")
    assert list(turns["status"]) == ["interrupted", "interrupted", "completed"]
    assert all(text.startswith("1, 2, 3,") for text in turns["final_text"].iloc[:2])
