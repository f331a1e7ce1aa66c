"""The gauge and the Stop button, through ipywidgets' test comm (what a frontend would receive and send)."""

import asyncio
import itertools
import threading

import pytest
from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm
from scripted_provider import ScriptedProvider

from hermeslab.core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    TextDelta,
    ToolCallFinished,
    TurnFinished,
)
from hermeslab.core.tokens import count_text
from hermeslab.notebook import Hermes, NotebookChat, StopButton, TokenBudget
from hermeslab.notebook.budget import BudgetMeter
from hermeslab.store import open as open_lab

S = {"session_id": "s1", "turn": 1}
CLICK = {"content": {"data": {"method": "custom", "content": {"event": "click"}}}, "buffers": []}


@pytest.fixture
def test_comm():
    setup_test_comm()
    yield
    teardown_test_comm()


def sent_values(widget) -> list[str]:
    """Every ``value`` the kernel sent to the frontend for ``widget``."""
    values = []
    for args, kwargs in widget.comm.messages:
        data = kwargs.get("data") or (args[0] if args else {})
        state = data.get("state", {}) if isinstance(data, dict) else {}
        if "value" in state:
            values.append(state["value"])
    return values


# ---------------------------------------------------------------- the meter


def test_meter_is_the_reported_prompt_plus_the_estimate_since():
    meter = BudgetMeter(context_length=10_000, threshold=5_000)
    meter.reset(800)
    assert meter.tokens == 800 and meter.reported is None
    meter.observe(ApiCallStarted(**S, call_index=0, attempt=1, estimated_prompt_tokens=900, message_count=3))
    assert meter.tokens == 900
    meter.observe(TextDelta(**S, text="hello there"))
    assert meter.tokens == 900 + count_text("hello there")
    meter.observe(ApiCallFinished(**S, call_index=0, attempt=1, prompt_tokens=1_000, completion_tokens=40))
    assert (meter.reported, meter.since, meter.tokens) == (1_000, 40, 1_040)
    meter.observe(ToolCallFinished(**S, tool_call_id="c", name="t", arguments="{}", result="x " * 50))
    assert meter.tokens == 1_040 + count_text("x " * 50)
    meter.observe(TurnFinished(**S))
    assert meter.per_turn == [meter.tokens]


def test_an_estimated_or_failed_call_does_not_replace_the_reported_count():
    meter = BudgetMeter(context_length=10_000)
    meter.observe(ApiCallFinished(**S, call_index=0, attempt=1, prompt_tokens=1_000, completion_tokens=5))
    for event in (ApiCallFinished(**S, call_index=1, attempt=1, prompt_tokens=50, usage_estimated=True),
                  ApiCallFinished(**S, call_index=1, attempt=1, error_class="rate_limit")):
        assert not meter.observe(event)
    assert meter.tokens == 1_005


def test_a_compression_restarts_from_its_own_count_plus_the_tool_schemas():
    meter = BudgetMeter(context_length=10_000, overhead=300)
    meter.observe(ApiCallFinished(**S, call_index=0, attempt=1, prompt_tokens=8_000, completion_tokens=10))
    meter.observe(CompressionEvent(**S, trigger="manual", tokens_before=7_700, tokens_after=1_200, mode="rotation"))
    assert meter.tokens == 1_500 and meter.reported is None
    assert not meter.observe(CompressionEvent(**S, trigger="manual", tokens_before=1, tokens_after=1, mode="none"))


@pytest.mark.parametrize(("tokens", "level"), [(0, "ok"), (3_749, "ok"), (3_750, "warn"), (4_499, "warn"),
                                                (4_500, "alert"), (9_000, "alert")])
def test_levels_are_shares_of_the_threshold(tokens, level):
    meter = BudgetMeter(context_length=10_000, threshold=5_000)
    meter.reset(tokens)
    assert meter.level == level


def test_without_a_threshold_the_window_is_the_limit():
    meter = BudgetMeter(context_length=10_000)
    meter.reset(7_600)
    assert meter.level == "warn"


def test_meter_rejects_impossible_limits():
    with pytest.raises(ValueError, match="context_length"):
        BudgetMeter(context_length=0)
    with pytest.raises(ValueError, match="threshold"):
        BudgetMeter(context_length=100, threshold=-5)


# ---------------------------------------------------------------- the gauge widget


def test_gauge_sends_numbers_colour_and_threshold_to_the_frontend(test_comm):
    gauge = TokenBudget(BudgetMeter(context_length=10_000, threshold=5_000))
    gauge.configure(context_length=10_000, threshold=5_000, estimate=1_000)
    first = sent_values(gauge)[-1]
    assert "~1,000 / 10,000 tokens (10.0%)" in first and "20% of the compression threshold (5,000)" in first
    assert 'data-level="ok"' in first and "#9e9e9e" in first
    assert 'title="compression threshold" style="position:absolute;left:50.00%' in first

    gauge.observe_event(ApiCallFinished(**S, call_index=0, attempt=1, prompt_tokens=3_900, completion_tokens=0))
    gauge.refresh()
    assert 'data-level="warn"' in sent_values(gauge)[-1] and "#f0a30a" in sent_values(gauge)[-1]
    assert ">3,900 / 10,000 tokens" in sent_values(gauge)[-1]  # a provider's reading carries no estimate mark
    gauge.observe_event(ApiCallFinished(**S, call_index=1, attempt=1, prompt_tokens=4_600, completion_tokens=0))
    gauge.refresh()
    assert 'data-level="alert"' in sent_values(gauge)[-1] and "#d32f2f" in sent_values(gauge)[-1]
    assert "hermeslab-gauge" in gauge._dom_classes


def test_gauge_sends_nothing_when_nothing_changed(test_comm):
    gauge = TokenBudget(BudgetMeter(context_length=10_000))
    before = len(sent_values(gauge))
    gauge.refresh()
    gauge.refresh()
    assert len(sent_values(gauge)) == before


def test_sparkline_has_a_point_per_turn_and_one_for_now(test_comm):
    gauge = TokenBudget(BudgetMeter(context_length=10_000))
    for turn, prompt in enumerate((1_000, 2_000, 3_000), start=1):
        gauge.observe_event(ApiCallFinished(session_id="s", turn=turn, call_index=0, attempt=1,
                                            prompt_tokens=prompt, completion_tokens=0))
        gauge.observe_event(TurnFinished(session_id="s", turn=turn))
    gauge.observe_event(TextDelta(session_id="s", turn=4, text="more words"))
    gauge.refresh()
    value = sent_values(gauge)[-1]
    points = value.split('points="')[1].split('"')[0].split()
    assert len(points) == 4


# ---------------------------------------------------------------- the Stop button


def test_a_click_from_the_frontend_calls_the_stop_handler(test_comm):
    calls = []
    button = StopButton(lambda: calls.append(threading.current_thread().name))
    button._handle_msg(CLICK)
    assert calls == [threading.current_thread().name]
    assert button.disabled and button.description == "Stopping…"
    button.finish()
    assert button.description == "Stopped"
    assert "hermeslab-stop" in button._dom_classes


def test_the_button_says_stopped_when_the_turn_was_stopped_elsewhere(test_comm):
    done, stopped = StopButton(lambda: None), StopButton(lambda: None)
    done.finish()
    stopped.finish(stopped=True)  # %hermes stop or Kernel → Interrupt, not a click
    assert (done.description, stopped.description) == ("Done", "Stopped") and done.disabled and stopped.disabled


class RecordingDisplay:
    """Stands in for IPython's display(): keeps the latest bundle shown under each display id."""

    def __init__(self):
        self.latest: dict[int, object] = {}
        self._ids = itertools.count()

    def __call__(self, obj, raw=False, display_id=False):
        handle = RecordingHandle(self, next(self._ids))
        self.latest[handle.display_id] = obj
        return handle


class RecordingHandle:
    def __init__(self, owner, display_id):
        self.owner, self.display_id = owner, display_id

    def update(self, obj, raw=False):
        self.owner.latest[self.display_id] = obj


def test_stop_button_interrupts_a_streaming_turn_keeps_the_text_and_logs_it(tmp_path, test_comm):
    shown = RecordingDisplay()
    chat = NotebookChat(Hermes(lab=str(tmp_path / "lab.duckdb"), workspace=str(tmp_path)), display=shown)
    long_answer = " ".join(str(n) for n in range(400))
    chat.runtime.agent.provider = ScriptedProvider([{"content": long_answer}], chunk_gate=threading.Event())

    async def scenario():
        job = chat.ask("count slowly")
        assert chat.busy and not job.task.done()  # the cell returned while the turn streams
        while "5 6 7" not in job.transcript.to_text():
            await asyncio.sleep(0.02)
        job.stop_button._handle_msg(CLICK)  # the frontend's click, through the comm
        return await job.task

    try:
        result = asyncio.run(scenario())
        assert result.status == "interrupted"
        assert result.text.startswith("0 1 2 3 4 5 6 7") and not result.text.rstrip().endswith("399")
        controls, transcript = shown.latest[0], shown.latest[1]
        assert "hermeslab-controls-final" in controls["text/html"]  # the widgets were swapped for a static gauge
        assert "hermeslab-interrupted" in transcript["text/html"]
        assert "interrupted" in transcript["text/plain"]
        chat.runtime.writer.flush()
        lab = open_lab(tmp_path / "lab.duckdb")
        turns = lab.turns()
        assert list(turns["status"]) == ["interrupted"]
        assert turns["final_text"].iloc[0] == result.text
        assert bool(lab.api_calls()["usage_estimated"].iloc[-1])
    finally:
        chat.close()
