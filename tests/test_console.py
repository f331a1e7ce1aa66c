"""The terminal transcript's lines."""

from __future__ import annotations

import io

from hermeslab.console import ConsoleTranscript
from hermeslab.core.events import ErrorEvent


def test_an_error_line_keeps_its_remedy_and_stays_one_line():
    message = ("Your message alone is 70,214 tokens; with the system prompt and tool schemas (1,803 tokens) it "
               "cannot fit the 65,536-token window, so it was not sent and the conversation is unchanged.\n"
               "Shorten it, or save it to a file and ask for it to be read.")
    out = io.StringIO()
    ConsoleTranscript(out)(ErrorEvent(session_id="s", error_class="input_too_large", message=message))
    assert out.getvalue() == "  ! input_too_large: " + " ".join(message.split()) + "\n"


def test_a_huge_error_body_is_not_echoed_whole():
    out = io.StringIO()
    ConsoleTranscript(out)(ErrorEvent(session_id="s", error_class="server_error", message="<html>" + "x" * 500_000))
    assert len(out.getvalue()) < 2_100 and out.getvalue().endswith("…\n")
