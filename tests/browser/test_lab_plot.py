"""A fresh notebook shows ``hermeslab.plot_token_usage`` as a picture, with no ``%matplotlib`` first."""

from __future__ import annotations

import pytest
from lab_page import output, run_cell, wait_idle, write_notebook
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_token_plot_renders_as_an_image(lab_server, page: Page, artifacts):
    root = lab_server.root
    lab_path = root / "plot.duckdb"
    write_notebook(root / "plot.ipynb", [
        f"%load_ext hermeslab\n%config Hermes.lab = {str(lab_path)!r}",
        "%%hermes\ncount to 200",
        ("import hermeslab\nfrom hermeslab.notebook import current_chat\n\nawait current_chat().wait()\n"
         "hermeslab.plot_token_usage(current_chat())"),
    ])
    page.goto(lab_server.notebook_url("plot.ipynb"))
    wait_idle(page)
    for index in range(3):
        run_cell(page, index)
        wait_idle(page)
    plot = output(page, 2)
    image = plot.locator("img")
    expect(image).to_be_visible(timeout=30_000)
    assert "<Figure" not in plot.inner_text()
    width = image.evaluate("(img) => img.naturalWidth")
    assert width > 300, f"the plot image is {width} px wide"
    plot.screenshot(path=str(artifacts / "token-plot.png"))
