"""The compaction timeline in JupyterLab: a demo conversation's compactions before and after, with counters.

The lab is written by ``hermeslab demo`` (the offline model) at a 4,000-token
window, where the conversation is compacted twice: once by the overflow's fit
(oldest turns dropped, a long tool output cut) and once by a summary.
"""

from __future__ import annotations

import re

import pytest
from lab_page import output, run_cell_to_end, wait_idle, write_notebook
from playwright.sync_api import Page, expect

from hermeslab.cli import main
from hermeslab.store import open as open_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WINDOW = 4_000


def test_the_timeline_shows_each_compaction_and_says_when_there_is_none(lab_server, page: Page, artifacts, tmp_path):
    root = lab_server.root
    lab_path = root / "timeline.duckdb"
    assert main(["demo", "--lab", str(lab_path), "--workspace", str(tmp_path / "ws"), "--context-length", str(WINDOW),
                 "--plot", str(tmp_path / "usage.png")]) == 0
    lab = open_lab(lab_path)
    tip = str(lab.sessions().sort_values("started_at")["id"].iloc[-1])
    applied = lab.compressions().query("mode != 'none'")
    assert len(applied) >= 2, applied[["trigger", "strategy", "mode"]]
    summary = next(text for text in applied["summary_text"] if isinstance(text, str) and text)

    write_notebook(root / "timeline.ipynb", [
        f"from hermeslab.notebook.timeline import show_timeline\n\nshow_timeline({str(lab_path)!r}, session={tip!r})",
        f"%load_ext hermeslab\n%config Hermes.lab = {str(lab_path)!r}\n%hermes timeline no-such-session",
        "%%hermes\nWho are you?",
        "from hermeslab.notebook import current_chat\n\nawait current_chat().wait()",
        "%hermes timeline",
    ])
    page.goto(lab_server.notebook_url("timeline.ipynb"))
    wait_idle(page)
    for index in range(5):
        run_cell_to_end(page, index)
        wait_idle(page)

    shown = output(page, 0)
    counters = shown.locator(".hermeslab-timeline-counters")
    expect(counters).to_contain_text(f"{len(applied)} compactions", timeout=30_000)
    expect(counters).to_contain_text(re.compile(r"[\d,]+ tokens reclaimed · \d+ tool outputs? pruned"))
    expect(shown.locator(".hermeslab-timeline-compaction")).to_have_count(len(applied))
    first_line = summary.strip().splitlines()[0]
    expect(shown.locator(".hermeslab-timeline-summary").first).to_contain_text(first_line)
    for fate in ("kept", "pruned", "summarised", "dropped"):
        assert shown.locator(f".hermeslab-timeline-before .hermeslab-fate-{fate}").count() > 0, fate
    expect(shown.locator(".hermeslab-timeline-after .hermeslab-fate-summary")).to_have_count(1)
    page.set_viewport_size({"width": 1280, "height": 2400})  # the whole timeline on screen, not scrolled away
    shown.scroll_into_view_if_needed()
    shown.screenshot(path=str(artifacts / "compaction-timeline.png"))

    error = output(page, 1)
    expect(error).to_contain_text("no session 'no-such-session' in", timeout=30_000)
    lines = [line for line in error.inner_text().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("UsageError"), lines

    empty = output(page, 4)
    expect(empty).to_contain_text("no compactions", timeout=60_000)
    lines = [line for line in empty.inner_text().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("session "), lines
