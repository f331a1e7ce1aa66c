"""%%hermes in a real JupyterLab: streaming transcript, tool card, live gauge, Stop, and a saved transcript.

Screenshots land in test-artifacts/browser/.
"""

from __future__ import annotations

import json
import re
import time

import nbformat
import pytest
from lab_page import cell, eventually, output, wait_idle, write_notebook
from playwright.sync_api import Page, expect

from hermeslab.store import open as open_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NUMBERS = re.compile(r"[\d,]+ / [\d,]+ tokens")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def write_chat_notebook(path, lab_path, workspace) -> None:
    setup = (f"%load_ext hermeslab\n%config Hermes.lab = {str(lab_path)!r}\n"
             f"%config Hermes.workspace = {str(workspace)!r}\n%config Hermes.stream_delay = 0.02")
    write_notebook(path, [setup, "%%hermes\nread notes.txt", "%%hermes\ncount to 3000"])


def test_chat_streams_stops_and_survives_a_reload(lab_server, page: Page, artifacts):
    root = lab_server.root
    (root / "notes.txt").write_text("the launch code is 4417\n")
    lab_path = root / "lab.duckdb"
    write_chat_notebook(root / "chat.ipynb", lab_path, root)

    page.goto(lab_server.notebook_url("chat.ipynb"))
    wait_idle(page)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

    # A tool turn: the card (name and argument summary in its title) and the answer from the file.
    first = output(page, 1)
    expect(first.locator(".hermeslab-tool summary")).to_contain_text("read_file", timeout=30_000)
    expect(first.locator(".hermeslab-tool summary")).to_contain_text("path=notes.txt")
    expect(first.locator(".hermeslab-text")).to_contain_text("the launch code is 4417")
    expect(first.locator(".hermeslab-gauge-numbers")).to_have_text(NUMBERS)

    # A long streamed answer: the live gauge moves while the text streams, then Stop.
    second = output(page, 2)
    expect(second.locator(".hermeslab-text")).to_contain_text("40, 41,", timeout=30_000)
    gauge = second.locator(".hermeslab-gauge .hermeslab-gauge-body")
    expect(gauge.locator(".hermeslab-gauge-numbers")).to_have_text(NUMBERS)
    before = int(gauge.get_attribute("data-tokens"))
    expect(second.locator(".hermeslab-text")).to_contain_text("90, 91,", timeout=30_000)
    assert int(gauge.get_attribute("data-tokens")) > before
    cell(page, 2).screenshot(path=str(artifacts / "streaming.png"))

    clicked = time.monotonic()
    second.locator(".hermeslab-stop button, button.hermeslab-stop").first.click()
    expect(second.locator(".hermeslab-interrupted")).to_be_visible(timeout=15_000)
    stopped_after = time.monotonic() - clicked
    expect(second.locator(".hermeslab-footer")).to_contain_text("interrupted")
    partial = second.locator(".hermeslab-text").inner_text()
    assert "3000." not in partial and "100," in partial
    page.locator(".jp-Notebook").screenshot(path=str(artifacts / "stopped.png"))
    assert stopped_after < 10

    def logged_as_interrupted():
        turns = open_lab(lab_path).turns().sort_values("turn")
        assert list(turns["status"]) == ["completed", "interrupted"]
        calls = open_lab(lab_path).api_calls().sort_values(["turn", "call_index"])
        assert calls["usage_estimated"].iloc[-1]

    eventually(logged_as_interrupted)  # the kernel's writer commits the turn in the background
    (artifacts / "timings.json").write_text(json.dumps({"stop_click_to_interrupted_s": round(stopped_after, 2)}))

    # Save, check the file, reload from disk: the transcript is ordinary output and stays.
    wait_idle(page)
    page.locator(".jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=15_000)
    saved = nbformat.read(root / "chat.ipynb", as_version=4)
    kinds = [set(out.get("data", {})) for c in saved.cells for out in c.get("outputs", [])]
    assert not any(WIDGET_VIEW in k for k in kinds), "finished cells should keep no widget views"
    html = json.dumps([out.get("data", {}).get("text/html", "") for out in saved.cells[2].outputs])
    assert "hermeslab-interrupted" in html

    page.goto(lab_server.notebook_url("chat.ipynb"))
    expect(output(page, 1).locator(".hermeslab-tool summary")).to_contain_text("read_file", timeout=30_000)
    expect(output(page, 1).locator(".hermeslab-text")).to_contain_text("the launch code is 4417")
    expect(output(page, 2).locator(".hermeslab-interrupted")).to_be_visible()
    expect(output(page, 2).locator(".hermeslab-gauge-numbers")).to_have_text(NUMBERS)
    page.locator(".jp-Notebook").screenshot(path=str(artifacts / "reloaded.png"))
