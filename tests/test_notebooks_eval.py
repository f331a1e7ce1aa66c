"""The evaluation notebooks run top to bottom under nbval; their assert cells check what their prose claims, and
README's zoo table quotes notebook 07's output-checked means."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The zoo and probe-exam notebooks (07, 08) run from ``test_notebooks_zoo``, so a parallel run can give them a
#: worker of their own.
NOTEBOOKS = ["02_token_usage.ipynb", "03_compression_thresholds.ipynb", "04_summary_budgets.ipynb",
             "06_ab_recorded_sessions.ipynb"]


def code_cells(path: Path) -> int:
    """nbval collects one test per code cell; a cell that fails or never runs shows in the count."""
    return sum(cell["cell_type"] == "code" for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])


def run_under_nbval(name: str) -> None:
    """Run ``notebooks/NAME`` top to bottom under nbval; every code cell must pass."""
    path = ROOT / "notebooks" / name
    # Offline: without an endpoint, 04 skips its LLM comparison instead of calling a paid API.
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    env["MPLBACKEND"] = "Agg"
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         str(path.relative_to(ROOT))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-2000:]
    assert f"{code_cells(path)} passed" in process.stdout, process.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_notebook_runs_under_nbval(name):
    run_under_nbval(name)


#: README zoo-table columns, each with the notebook means column it quotes (compressions carry the
#: ineffective ones in brackets).
ZOO_COLUMNS = ["prompt_tokens (tokens)", "cost_usd (USD)", "peak_prompt_tokens (tokens)", "compressions (count)",
               "refused_calls (count)", "latest_user_missing (count)", "failed_turns (count)", "retention (share)",
               "cached_share (share)"]


def notebook_means(window: str) -> dict[str, dict[str, str]]:
    """Notebook 07's output-checked means table at ``window``: preset -> column -> the text it shows."""
    notebook = json.loads((ROOT / "notebooks" / "07_compaction_zoo.ipynb").read_text(encoding="utf-8"))
    cell = next(cell for cell in notebook["cells"]
                if cell["cell_type"] == "code" and "".join(cell["source"]).startswith("# NBVAL_CHECK_OUTPUT"))
    html = "".join(next(out["data"]["text/html"] for out in cell["outputs"] if "text/html" in out.get("data", {})))
    head, body = html.split("<tbody>")
    columns = re.findall(r"<th>([^<]+)</th>", head.split("</tr>")[0])
    table, current = {}, None
    for row in body.split("</tr>")[:-1]:
        group = re.search(r'<th rowspan="\d+" valign="top">([^<]+)</th>', row)
        current = group.group(1) if group else current
        preset = re.findall(r"<th>([^<]+)</th>", row)[-1]
        if current == window:
            table[preset] = dict(zip(columns, re.findall(r"<td>([^<]*)</td>", row)))
    return table


def test_the_readme_zoo_table_quotes_the_notebooks_means_at_8000_tokens():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("| preset | prompt tokens |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    means = notebook_means("8000")
    assert [row.split("`")[1] for row in rows] == list(means)
    for row in rows:
        preset, *cells = [cell.strip().strip("`") for cell in row.strip("|").split("|")]
        shown = means[preset]
        quoted = [shown[column] for column in ZOO_COLUMNS]
        quoted[3] = f"{quoted[3]} ({shown['ineffective_compressions (count)']})"
        assert [cell.replace(",", "") for cell in cells] == quoted, preset
