"""A cell's job: its live output never shows the reload hint, and a reloaded page's controls show the end."""

from __future__ import annotations

import threading
import time

import ipywidgets as widgets

from hermeslab.core.events import EventBus, TurnFinished, TurnStarted
from hermeslab.notebook import job as job_module
from hermeslab.notebook.budget import BudgetMeter
from hermeslab.notebook.job import STALE_AFTER, CellJob
from hermeslab.notebook.widgets import TokenBudget
from hermeslab.turn import TurnResult


class Shown:
    """A display handle that records the bundles sent to it."""

    def __init__(self, log: list):
        self.display_id, self.log = "d", log

    def update(self, data, raw=False):
        self.log.append(data)


class SilentAgent:
    """A turn that emits nothing until it is stopped (a long tool call, say), then ends interrupted."""

    def __init__(self):
        self.bus, self.stopped = EventBus(), threading.Event()

    def chat(self, text):
        self.bus.publish(TurnStarted(session_id="s", turn=1, user_text=text))
        self.stopped.wait(10)
        self.bus.publish(TurnFinished(session_id="s", turn=1, status="interrupted", api_calls=1))
        return TurnResult(text="", status="interrupted")

    def interrupt(self):
        self.stopped.set()


def test_a_silent_background_turn_keeps_its_output_fresh_and_the_hint_hidden_until_stale(monkeypatch):
    monkeypatch.setattr(job_module, "HEARTBEAT", 0.05)
    updates: list = []
    job = CellJob("turn", "wait", gauge=TokenBudget(BudgetMeter(context_length=8_000)), rate=100,
                  display=lambda *args, **kwargs: Shown(updates))
    job.background = True
    job.show()
    agent = SilentAgent()
    worker = threading.Thread(target=job.run, args=(agent,))
    worker.start()
    time.sleep(0.6)
    live = [u for u in updates if "hermeslab-transcript" in u.get("text/html", "")]
    assert len(live) >= 4  # redrawn while no event came: a live output is never STALE_AFTER old
    hint = live[-1]["text/html"]
    assert "visibility:hidden" in hint and f"hermeslab-stale 0s linear {STALE_AFTER:g}s forwards" in hint

    job.stop()  # the restored Stop button of a reloaded page
    worker.join(5)
    end = job._controls_widget.children[-1]
    assert isinstance(end, widgets.HTML) and 'data-status="interrupted"' in end.value
    assert "turn 1 · interrupted" in end.value and "streaming" not in end.value
