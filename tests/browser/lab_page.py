"""Driving a notebook in JupyterLab from the browser tests: locate cells, run them, save, wait."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
from playwright.sync_api import Page


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook of code cells with a kernelspec (without one, Lab asks for a kernel in a modal dialog)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, path)


def cell(page: Page, index: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def output(page: Page, index: int):
    return cell(page, index).locator(".jp-OutputArea")


def eventually(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_idle(page: Page, timeout: float = 60_000) -> None:
    """The notebook's kernel is connected and idle (the toolbar indicator says idle before it connects)."""
    page.wait_for_function(
        "() => { const kernel = window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel;"
        " return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'; }",
        timeout=timeout)


def run_cell(page: Page, index: int) -> None:
    """Run one cell without waiting for it (clicks and reloads may follow while it runs)."""
    page.evaluate("(i) => { const panel = window.jupyterapp.shell.currentWidget; panel.content.activeCellIndex = i;"
                  " window.jupyterapp.commands.execute('notebook:run-cell'); }", index)


def run_cell_to_end(page: Page, index: int) -> None:
    """Run one cell and return once its execution has finished: cells run one after another this way even when
    the page is slow to send each request (setting the next active cell before then can drop the run)."""
    page.evaluate("async (i) => { const panel = window.jupyterapp.shell.currentWidget;"
                  " panel.content.activeCellIndex = i;"
                  " await window.jupyterapp.commands.execute('notebook:run-cell'); }", index)


def command(page: Page, name: str) -> None:
    page.evaluate("(name) => { window.jupyterapp.commands.execute(name); }", name)


def save(page: Page) -> None:
    """Save and wait for the write (while a turn streams the model turns dirty again at once: no dirty check)."""
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")
