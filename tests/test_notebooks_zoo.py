"""The compaction-zoo and probe-exam notebooks (07, 08) run top to bottom under nbval, in a file of their own so a
parallel test run gives them a worker while the other evaluation notebooks run on another."""

from __future__ import annotations

import pytest

from test_notebooks_eval import run_under_nbval


@pytest.mark.slow
@pytest.mark.parametrize("name", ["07_compaction_zoo.ipynb", "08_what_compaction_forgets.ipynb"])
def test_the_zoo_notebook_runs_under_nbval(name):
    run_under_nbval(name)
