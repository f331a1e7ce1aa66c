"""The chat's line input under a paste that arrives as keystrokes (no bracketed paste)."""

from __future__ import annotations

import threading
import time
from collections import deque

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.key_binding import KeyPress
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import DummyOutput

from hermeslab import terminal_input
from hermeslab.terminal_input import BoundedFileHistory, InputLimit, cap_drawing, key_bindings, take_burst


def _prompt(keystrokes: str) -> tuple[str | None, InputLimit, float]:
    """Types ``keystrokes`` into a prompt as a terminal without bracketed paste would; returns what it gave."""
    limit = InputLimit()
    with create_pipe_input() as pipe:
        session: PromptSession = PromptSession(input=pipe, output=DummyOutput(), key_bindings=key_bindings(limit),
                                               bottom_toolbar=limit.toolbar)
        cap_drawing(session)
        sender = threading.Thread(target=pipe.send_text, args=(keystrokes,))
        start = time.monotonic()
        sender.start()
        try:
            text: str | None = session.prompt("you> ")
        except KeyboardInterrupt:
            text = None
        sender.join()
        return text, limit, time.monotonic() - start


def test_a_burst_takes_characters_and_inner_line_breaks_and_stops_at_a_control_key():
    queue = deque([KeyPress("a"), KeyPress(Keys.ControlM, "\r"), KeyPress("b"), KeyPress(Keys.ControlI, "\t"),
                   KeyPress("c"), KeyPress(Keys.ControlC, "\x03"), KeyPress("d")])
    assert take_burst(queue) == "a\nb\tc"
    assert [press.key for press in queue] == [Keys.ControlC, "d"]
    queue = deque([KeyPress("x"), KeyPress(Keys.ControlM, "\r")])
    assert take_burst(queue) == "x" and [press.key for press in queue] == [Keys.ControlM]  # the last Enter sends


def test_a_pasted_block_of_lines_is_one_message():
    lines = [f"line {i}: lorem ipsum dolor sit amet" for i in range(300)]
    text, limit, _ = _prompt("\r".join(lines) + "\r")
    assert text == "\n".join(lines)
    assert limit.dropped == 0


def test_a_typed_command_and_enter_in_one_read_still_sends():
    assert _prompt("/help\r")[0] == "/help"


def test_a_paste_past_the_limit_is_cut_said_so_not_sent_and_ctrl_c_clears_it(monkeypatch):
    monkeypatch.setattr(terminal_input, "MAX_INPUT_CHARS", 5_000)
    paste = "\r".join(f"line {i}: " + "lorem ipsum dolor sit amet " * 3 for i in range(600)) + "\r"
    text, limit, seconds = _prompt(paste + "\x03")
    assert text is None  # the paste's closing Enter did not send the cut text; Ctrl-C then cleared it
    assert limit.dropped == len(paste.replace("\r", "\n")) - 5_000
    assert "5,000 characters" in limit.toolbar() and "dropped" in limit.toolbar()
    assert seconds < 20


def test_enter_long_after_a_cut_sends_what_was_kept(monkeypatch):
    monkeypatch.setattr(terminal_input, "MAX_INPUT_CHARS", 100)
    monkeypatch.setattr(terminal_input, "OVERFLOW_GAP", 0.0)
    text, limit, _ = _prompt("y" * 300 + "\r")
    assert text == "y" * 100 and limit.dropped == 200


def test_the_history_file_keeps_only_inputs_of_a_typed_size(tmp_path):
    path = tmp_path / "chat_history"
    history = BoundedFileHistory(str(path))
    history.store_string("short question")
    history.store_string("z" * (terminal_input.HISTORY_MAX_CHARS + 1))
    with path.open("a", encoding="utf-8") as handle:  # one written before the bound existed
        handle.write("\n# old\n+" + "w" * (terminal_input.HISTORY_MAX_CHARS + 1) + "\n")
    assert "z" * 20 not in path.read_text(encoding="utf-8")
    assert list(BoundedFileHistory(str(path)).load_history_strings()) == ["short question"]


@pytest.mark.parametrize("count", [0, 7])
def test_the_toolbar_speaks_only_when_something_was_dropped(count):
    limit = InputLimit()
    limit.drop(count, time.monotonic())
    assert (limit.toolbar() is None) == (count == 0)


def test_an_enter_before_a_cursor_report_still_sends():
    queue = deque([KeyPress("/"), KeyPress("x"), KeyPress(Keys.ControlM, "\r"), KeyPress(Keys.CPRResponse, "\x1b[1;1R")])
    assert take_burst(queue) == "/x" and queue[0].key == Keys.ControlM
