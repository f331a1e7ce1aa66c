"""The cell transcript folded from events, and the throttle that paces its redraws."""

import threading
import time

import pytest

from hermeslab.core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    ErrorEvent,
    Notice,
    RecoveryEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from hermeslab.notebook.live import Throttle
from hermeslab.core.provider import ESTIMATE_COUNTS
from hermeslab.notebook.transcript import Transcript, argument_summary

S = {"session_id": "s1", "turn": 1}


def turn_with_a_tool() -> Transcript:
    t = Transcript()
    for event in [
        TurnStarted(**S, user_text="read notes.txt"),
        ApiCallStarted(**S, call_index=0, attempt=1, estimated_prompt_tokens=100, message_count=2),
        ToolCallStarted(**S, tool_call_id="c1", name="read_file", arguments='{"path": "notes.txt", "limit": 20}'),
        ToolCallFinished(**S, tool_call_id="c1", name="read_file", arguments='{"path": "notes.txt", "limit": 20}',
                         result="1| <b>secret</b> launch code 4417", duration_ms=3.0),
        ApiCallStarted(**S, call_index=1, attempt=1, estimated_prompt_tokens=140, message_count=4),
        TextDelta(**S, text="The file says "),
        TextDelta(**S, text="**4417**."),
        TurnFinished(**S, status="completed", final_text="The file says **4417**.", api_calls=2,
                     prompt_tokens=240, completion_tokens=12),
    ]:
        t.observe(event)
    return t


def test_a_tool_turn_renders_a_card_then_the_streamed_answer():
    t = turn_with_a_tool()
    html = t.to_html()
    assert html.index("hermeslab-tool") < html.index("hermeslab-text")
    assert "<strong>read_file</strong> <code>path=notes.txt, limit=20</code>" in html
    assert "&lt;b&gt;secret&lt;/b&gt;" in html and "<b>secret" not in html
    assert "The file says <strong>4417</strong>." in html
    assert 'data-status="completed"' in html
    assert "turn 1 · completed · 2 API calls · in 240 / out 12 tokens over the turn]" in t.to_text()
    assert "[tool read_file(path=notes.txt, limit=20) → 1| <b>secret</b> launch code 4417]" in t.to_text()


def test_an_interrupted_turn_keeps_its_partial_text_and_says_so():
    t = Transcript()
    t.observe(TurnStarted(**S))
    t.observe(TextDelta(**S, text="1, 2, 3,"))
    t.observe(ApiCallFinished(**S, call_index=0, attempt=1, prompt_tokens=90, completion_tokens=6,
                              usage_estimated=True))
    t.observe(TurnFinished(**S, status="interrupted", final_text="1, 2, 3,", api_calls=1, prompt_tokens=90,
                           completion_tokens=6))
    html = t.to_html()
    assert "1, 2, 3," in html and "hermeslab-interrupted" in html
    assert html.count("1, 2, 3,") == 1  # the final text is not added again
    assert t.footer() == ("turn 1 · interrupted · 1 API call · in ~90 / out ~6 tokens over the turn · estimated for "
                          f"its call (stopped by the user before the server reported usage; {ESTIMATE_COUNTS})")


def test_banners_for_compression_recovery_notice_and_error():
    t = Transcript()
    t.observe(CompressionEvent(**S, trigger="pressure", tokens_before=9_000, tokens_after=2_500, messages_before=40,
                               messages_after=9, mode="rotation", new_session_id="s2"))
    t.observe(RecoveryEvent(**S, fault_class="rate_limit", action="retry", attempt=2, outcome="recovered"))
    t.observe(Notice(**S, level="warning", text="the context was compressed 2 times"))
    t.observe(ErrorEvent(**S, error_class="server_error", message="<boom>"))
    html = t.to_html()
    assert ("context compressed (pressure): 9,000 → 2,500 tokens of messages (tool schemas not counted), 40 → 9 "
            "messages; continues in session s2") in html
    assert "recovery from rate_limit: retry, attempt 2 (recovered)" in html
    assert "hermeslab-banner-warning" in html and "hermeslab-banner-error" in html
    assert "&lt;boom&gt;" in html


def test_a_call_after_a_tool_starts_a_new_text_block_and_reasoning_is_folded_away():
    t = Transcript()
    t.observe(TextDelta(**S, text="thinking", reasoning=True))
    t.observe(TextDelta(**S, text="draft"))
    t.observe(ApiCallStarted(**S, call_index=1, attempt=1, estimated_prompt_tokens=1, message_count=1))
    t.observe(TextDelta(**S, text="final"))
    texts = [(b.text, b.reasoning) for b in t.blocks]
    assert texts == [("thinking", True), ("draft", False), ("final", False)]
    assert '<details class="hermeslab-reasoning"' in t.to_html()


def test_a_long_tool_result_is_clipped_in_the_card():
    t = Transcript()
    t.observe(ToolCallFinished(**S, tool_call_id="c", name="terminal", arguments="{}", result="x" * 10_000))
    assert "6,000 more characters" in t.to_html()


def test_argument_summary_is_one_clipped_line():
    assert argument_summary('{"command": "ls\\n-la", "timeout": 5}') == "command=ls -la, timeout=5"
    assert argument_summary("not json") == "not json"
    assert len(argument_summary('{"content": "' + "y" * 500 + '"}')) == 72


def test_unknown_banner_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown banner kind"):
        Transcript().note("party", "hi")


# ---------------------------------------------------------------- the throttle


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_throttle_draws_at_most_at_its_rate_and_always_the_last_state():
    clock = FakeClock()
    drawn = []
    state = {"value": 0}
    throttle = Throttle(lambda: drawn.append(state["value"]), rate=10, clock=clock)
    for value in range(1, 51):  # 50 updates within 0.05 s of fake time
        state["value"] = value
        throttle.request()
        clock.now += 0.001
    assert drawn == [1]
    throttle.flush()
    assert drawn == [1, 50]


def test_a_scheduled_redraw_shows_changes_that_arrived_during_the_quiet_period():
    drawn = []
    state = {"value": 0}
    done = threading.Event()

    def draw():
        drawn.append(state["value"])
        if state["value"] == 2:
            done.set()

    throttle = Throttle(draw, rate=20)
    state["value"] = 1
    throttle.request()
    state["value"] = 2
    throttle.request()  # too soon: scheduled, not dropped
    assert done.wait(2.0)
    assert drawn == [1, 2]


def test_throttle_rejects_a_non_positive_rate():
    with pytest.raises(ValueError, match="positive"):
        Throttle(lambda: None, rate=0)


def test_throttle_is_safe_from_many_threads():
    count = {"draws": 0}
    throttle = Throttle(lambda: count.__setitem__("draws", count["draws"] + 1), rate=1000)
    threads = [threading.Thread(target=lambda: [throttle.request() for _ in range(200)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    throttle.flush()
    time.sleep(0.01)
    assert count["draws"] == throttle.draws >= 1
