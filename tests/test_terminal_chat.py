"""``hermeslab chat`` driven through a pseudo-terminal, as a person types into it."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXE = Path(sys.executable).with_name("hermeslab")
#: Terminal control sequences prompt_toolkit writes around the text.
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b[>=]|\r")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")


class Terminal:
    """A child process on a pseudo-terminal: type into it, wait for text to appear."""

    def __init__(self, cwd: Path):
        self.master, slave = os.openpty()
        env = {**os.environ, "HOME": str(cwd), "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
        self.process = subprocess.Popen([str(EXE), "chat"], stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                        env=env, close_fds=True)
        os.close(slave)
        self.seen = ""

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """Read until ``pattern`` (a regex) appears in the output after what was matched before."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.seen, re.DOTALL)
            if match:
                found, self.seen = self.seen[:match.end()], self.seen[match.end():]
                return found
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    break
                if "\x1b[6n" in chunk:  # prompt_toolkit asks where the cursor is: answer as a terminal would
                    self.type("\x1b[1;1R")
                self.seen += ANSI.sub("", chunk)
        raise AssertionError(f"{pattern!r} did not appear; the terminal shows:\n{self.seen[-2000:]}")

    def close(self) -> int:
        try:
            return self.process.wait(timeout=30)
        finally:
            os.close(self.master)


@pytest.fixture
def terminal(tmp_path):
    (tmp_path / "notes.txt").write_text("The answer is 4417.\n", encoding="utf-8")
    term = Terminal(tmp_path)
    yield term
    if term.process.poll() is None:
        term.process.kill()
        term.close()


def test_slash_commands_work_a_mistake_changes_nothing_and_a_paste_is_one_message(terminal):
    terminal.wait_for(r"you>")
    terminal.type("/help\r")
    terminal.wait_for(r"/compress \[focus\].*?you>")
    terminal.type("/config compression.threshold=5\r")
    terminal.wait_for(r"error: compression\.threshold: expected a fraction in \(0, 1\], got 5.*?you>")
    terminal.type("/status\r")
    terminal.wait_for(r"turns\s+0 · compressions 0.*?compression threshold.*?you>")
    terminal.type("\x1b[200~read notes.txt\nand tell me\nthe number in it\x1b[201~\r")  # a bracketed paste
    terminal.wait_for(r"hermes> .*?4417.*?you>", timeout=90)
    terminal.type("/status\r")
    terminal.wait_for(r"turns\s+1 · compressions 0.*?you>")  # three pasted lines made one turn
    terminal.type("/compress\r")
    terminal.wait_for(r"(compressed: |nothing to compress yet).*?you>")
    terminal.type("/nope\r")
    terminal.wait_for(r"error: unknown command /nope; /help lists them.*?you>")  # typed at the prompt, as a person
    terminal.type("/new\r")
    terminal.wait_for(r"new conversation: session \d{8}_\d{6}_[0-9a-f]{6}.*?you>")
    terminal.type("/quit\r")
    assert terminal.close() == 0


def test_a_setting_a_floor_overrides_is_named_when_it_is_set(terminal):
    terminal.wait_for(r"you>")
    terminal.type("/config model.context_length=100000 compression.threshold=0.3\r")
    terminal.wait_for(r"compression fires at 64,000 tokens \(0\.64 of the 100,000-token window\): seed's "
                      r"min_threshold_tokens floor of 64,000 wins over 0\.3 of the window.*?you>")
    terminal.type("/quit\r")
    assert terminal.close() == 0


def test_ctrl_d_leaves_the_chat(terminal):
    terminal.wait_for(r"you>")
    terminal.type("\x04")
    assert terminal.close() == 0


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux) to paste without brackets")
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads memory use from /proc")
def test_a_200_kb_paste_without_brackets_is_bounded_and_ctrl_c_clears_it(tmp_path):
    server = ["tmux", "-L", f"hermeslab-test-{os.getpid()}"]
    paste = tmp_path / "paste.txt"
    paste.write_text("".join(f"line {i}: " + "lorem ipsum dolor sit amet " * 3 + "\n" for i in range(2_200)))
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run([*server, "new-session", "-d", "-s", "chat", "-x", "160", "-y", "40", "-c", str(tmp_path),
                    f"exec {EXE} chat"], check=True, env=env)

    def screen() -> str:
        return subprocess.run([*server, "capture-pane", "-p", "-t", "chat"], capture_output=True, text=True).stdout

    def wait_for(predicate, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(screen()):
            assert time.monotonic() < deadline, f"the terminal shows:\n{screen()}"
            time.sleep(0.3)

    try:
        wait_for(lambda text: "you>" in text)
        pid = int(subprocess.run([*server, "display", "-p", "-t", "chat", "#{pane_pid}"], capture_output=True,
                                 text=True, check=True).stdout)
        before = _rss_kib(pid)
        subprocess.run([*server, "load-buffer", str(paste)], check=True)
        subprocess.run([*server, "paste-buffer", "-t", "chat"], check=True)  # keystrokes, no bracketed paste
        wait_for(lambda text: "input limit" in text and "more were dropped" in text, timeout=120)
        assert _rss_kib(pid) - before < 200_000  # KiB: a bounded line, not gigabytes
        assert "[turn 1" not in screen()  # the cut paste was not sent
        subprocess.run([*server, "send-keys", "-t", "chat", "C-c"], check=True)
        wait_for(lambda text: "input limit" not in text, timeout=30)
        subprocess.run([*server, "send-keys", "-t", "chat", "/status", "Enter"], check=True)
        wait_for(lambda text: re.search(r"turns\s+0 · compressions 0", text) is not None)
        history = (tmp_path / ".hermeslab" / "chat_history").read_text(encoding="utf-8")
        assert "/status" in history and "line 2" not in history
    finally:
        subprocess.run([*server, "kill-server"], capture_output=True)
