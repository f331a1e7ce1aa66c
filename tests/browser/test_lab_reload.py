"""A page reloaded while a turn streams: the turn can still be followed and stopped, three ways.

The reloaded page shows the cell's transcript as it was saved (its updates no
longer reach that page), with a line saying how to get control back; the
widgets come back live from the kernel. ``%hermes attach`` shows the turn live
in a new cell. Stopping works with the restored Stop button, with
Kernel → Interrupt, and with ``%hermes stop``; each turn is logged as
interrupted and the chat goes on.
"""

from __future__ import annotations

import pytest
from lab_page import (
    command,
    eventually,
    output,
    run_cell,
    save,
    wait_idle,
    write_notebook,
)
from playwright.sync_api import Page, expect

from hermeslab.notebook.job import STALE_AFTER
from hermeslab.store import open as open_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG_TURN = "%%hermes\ncount to 3000"


def statuses(lab_path) -> list[str]:
    return list(open_lab(lab_path).turns().sort_values("turn")["status"])


def start_then_reload(page: Page, url: str, index: int, *, check_hint: bool = False) -> None:
    """Run the long turn in cell ``index``, save while it streams, reload the page; ``check_hint`` also waits
    out the staleness delay on both sides of the reload (once is enough: it is the same hint each time)."""
    run_cell(page, index)
    streaming = output(page, index)
    expect(streaming.locator(".hermeslab-text")).to_contain_text("20, 21,", timeout=30_000)
    expect(streaming.locator(".hermeslab-reload-hint")).to_contain_text("%hermes stop")
    if check_hint:
        page.wait_for_timeout(STALE_AFTER * 1_000 + 1_000)  # a live output stays fresher than that: no hint on it
        expect(streaming.locator(".hermeslab-reload-hint")).to_be_hidden()
    save(page)
    page.goto(url)  # a reload: the kernel and its running turn stay, the page's display routing is gone
    wait_idle(page)
    saved = output(page, index)
    expect(saved.locator(".hermeslab-reload-hint")).to_contain_text("%hermes attach", timeout=30_000)
    if check_hint:
        expect(saved.locator(".hermeslab-reload-hint")).to_be_visible(timeout=STALE_AFTER * 1_000 + 5_000)
    expect(saved.locator(".hermeslab-transcript")).to_have_attribute("data-status", "running")


def test_a_turn_survives_a_reload_and_can_be_stopped(lab_server, page: Page, artifacts):
    root = lab_server.root
    lab_path = root / "reload.duckdb"
    setup = f"%load_ext hermeslab\n%config Hermes.lab = {str(lab_path)!r}\n%config Hermes.stream_delay = 0.05"
    write_notebook(root / "reload.ipynb", [
        setup,
        LONG_TURN, "%hermes attach",                        # 1, 2: attach, then the restored Stop button
        LONG_TURN, "%hermes attach",                        # 3, 4: Kernel → Interrupt, then the final transcript
        LONG_TURN, "%hermes stop", "%%hermes\nhello",       # 5, 6, 7: %hermes stop, then the chat goes on
    ])
    url = lab_server.notebook_url("reload.ipynb")
    page.on("dialog", lambda dialog: dialog.accept())  # "leave the page?": the cell changed since the save
    page.goto(url)
    wait_idle(page)
    run_cell(page, 0)
    wait_idle(page)

    # 1. Reload, attach in a new cell: the transcript is live there again; the restored Stop button stops it.
    start_then_reload(page, url, 1, check_hint=True)
    output(page, 1).screenshot(path=str(artifacts / "reload-saved-cell.png"))  # the restored widgets and the hint
    run_cell(page, 2)
    attached = output(page, 2)
    expect(attached.locator(".hermeslab-transcript")).to_have_attribute("data-status", "running", timeout=15_000)
    numbers = attached.locator(".hermeslab-text")
    seen = len(numbers.inner_text())
    eventually(lambda: _grew(numbers, seen))  # updates reach the new cell
    output(page, 1).locator(".hermeslab-stop button, button.hermeslab-stop").first.click(timeout=30_000)
    expect(attached.locator(".hermeslab-interrupted")).to_be_visible(timeout=15_000)
    expect(output(page, 1).locator(".hermeslab-end-state")).to_have_attribute("data-status", "interrupted",
                                                                             timeout=15_000)  # not streaming…
    expect(attached.locator(".hermeslab-controls-final")).to_be_visible()
    output(page, 2).screenshot(path=str(artifacts / "reload-attached-stopped.png"))
    eventually(lambda: _equal(statuses(lab_path), ["interrupted"]), timeout=30)

    # 2. Reload, Kernel → Interrupt: the turn stops; attach shows how it ended.
    start_then_reload(page, url, 3)
    command(page, "notebook:interrupt-kernel")
    eventually(lambda: _equal(statuses(lab_path), ["interrupted"] * 2), timeout=30)
    wait_idle(page)
    run_cell(page, 4)
    expect(output(page, 4).locator(".hermeslab-interrupted")).to_be_visible(timeout=15_000)

    # 3. Reload, %hermes stop from another cell; then the conversation goes on as usual.
    start_then_reload(page, url, 5)
    run_cell(page, 6)
    expect(output(page, 6)).to_contain_text("stopping the running turn", timeout=15_000)
    eventually(lambda: _equal(statuses(lab_path), ["interrupted"] * 3), timeout=30)
    wait_idle(page)
    run_cell(page, 7)
    expect(output(page, 7).locator(".hermeslab-transcript")).to_have_attribute("data-status", "completed",
                                                                              timeout=30_000)
    eventually(lambda: _equal(statuses(lab_path), ["interrupted"] * 3 + ["completed"]), timeout=30)


def _grew(locator, length: int) -> None:
    assert len(locator.inner_text()) > length


def _equal(actual, expected) -> None:
    assert actual == expected
