"""The token gauge at about 30% and 90% of the compression threshold, and after a compression, as screenshots.

A small window (``%hermes config model.context_length=8500``: threshold 6,800, 80% of it)
and the offline model make the levels the same on every run: the first reply
brings the context to ~30% of the threshold, a long count to ~90%, and a
manual compression (once the long count is no longer in the kept tail) brings
it back down.
"""

from __future__ import annotations

import re

import pytest
from lab_page import output, run_cell, wait_idle, write_notebook
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHARE = re.compile(r"(\d+)% of the compression threshold \(6,800\)")
CELLS = [
    "%hermes config model.context_length=8500",
    "%%hermes\nhello",                                    # ~30%
    "%%hermes\ncount to 1300",                            # ~90%
    "%%hermes\ncount to 300",
    "%%hermes\nhello",
    "%hermes compress",                                   # back down
]
SHOTS = {2: ("gauge-30.png", "ok", 25, 35), 3: ("gauge-90.png", "alert", 85, 95),
         6: ("gauge-compressed.png", "ok", 35, 65)}


def test_gauge_levels_are_captured(lab_server, page: Page, artifacts):
    root = lab_server.root
    lab_path = root / "gauge.duckdb"
    write_notebook(root / "gauge.ipynb", [f"%load_ext hermeslab\n%config Hermes.lab = {str(lab_path)!r}", *CELLS])
    page.goto(lab_server.notebook_url("gauge.ipynb"))
    wait_idle(page)
    for index in range(len(CELLS) + 1):
        run_cell(page, index)
        if index in SHOTS:
            name, level, low, high = SHOTS[index]
            controls = output(page, index).locator(".hermeslab-controls-final")
            expect(controls).to_be_visible(timeout=30_000)  # the job ended: its gauge shows where it left the context
            body = controls.locator(".hermeslab-gauge-body")
            expect(body).to_have_attribute("data-level", level)
            share = int(SHARE.search(body.inner_text()).group(1))
            assert low <= share <= high, f"{name}: {share}% of the threshold"
            controls.screenshot(path=str(artifacts / name))
        wait_idle(page)
    expect(output(page, 6).locator(".hermeslab-transcript")).to_have_attribute("data-status", "compressed")
