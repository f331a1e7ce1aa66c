"""The evaluation notebooks run top to bottom under nbval; their assert cells check what their prose claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["02_token_usage.ipynb", "03_compression_thresholds.ipynb", "04_summary_budgets.ipynb",
             "06_ab_recorded_sessions.ipynb", "07_compaction_zoo.ipynb"]


def code_cells(path: Path) -> int:
    """nbval collects one test per code cell; a cell that fails or never runs shows in the count."""
    return sum(cell["cell_type"] == "code" for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_notebook_runs_under_nbval(name):
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
