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


def test_a_stopped_turns_line_says_it_was_stopped_and_what_is_estimated():
    from hermeslab.core.events import ApiCallFinished, TurnFinished
    from hermeslab.core.provider import ESTIMATE_COUNTS

    out = io.StringIO()
    console = ConsoleTranscript(out, context_length=8_000)
    console(ApiCallFinished(session_id="s", turn=1, call_index=0, attempt=1, prompt_tokens=900,
                            completion_tokens=40, usage_estimated=True))
    console(TurnFinished(session_id="s", turn=1, status="interrupted", api_calls=1, prompt_tokens=900,
                         completion_tokens=40))
    line = out.getvalue()
    assert line.startswith("[turn 1 · interrupted · 1 call · prompt ~900 tokens")
    assert f"estimated for its call (stopped by the user before the server reported usage; {ESTIMATE_COUNTS})" in line
    assert "the server reported no usage" not in line
