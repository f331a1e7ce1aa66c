"""benchmarks/seed_vs_hermes.py judges the cost goal on the calls both presets served."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("seed_vs_hermes")
    finally:
        sys.path.remove(str(BENCHMARKS))


def side(per_call: dict, **defects) -> dict:
    row = {key: 0 for key in ("over_window_calls", "two_summary_outputs", "original_task_lost",
                              "summary_only_compressions", "failed_turns", "missed_calls")}
    row.update(defects, retention=0.95, token_unit="tiktoken cl100k_base", per_call=per_call,
               prompt_tokens=sum(per_call.values()), api_calls=len(per_call))
    return row


def test_prompt_tokens_compare_over_the_calls_both_served(bench):
    # seed served call (0, 2) that hermes never made (its turn failed); hermes is cheaper only in raw totals
    seed = side({(0, 0): 100, (0, 1): 200, (0, 2): 900, (1, 0): 50})
    hermes = side({(0, 0): 120, (0, 1): 210, (1, 0): 60}, failed_turns=1, missed_calls=1)
    common = bench.common_calls(seed, hermes)
    assert common == {"calls": 3, "seed_prompt_tokens": 350, "hermes_prompt_tokens": 390, "seed_per_call": 116.7,
                      "hermes_per_call": 130.0, "seed_only_calls": 1, "hermes_only_calls": 0}
    assert seed["prompt_tokens"] > hermes["prompt_tokens"]
    assert bench.goals(seed, hermes, common)["prompt_tokens_at_most_hermes"]
    dearer = side({(0, 0): 500, (0, 1): 200, (1, 0): 50})
    assert not bench.goals(dearer, hermes, bench.common_calls(dearer, hermes))["prompt_tokens_at_most_hermes"]


def test_the_stored_result_names_its_basis_and_keeps_the_raw_totals(bench):
    stored = json.loads((BENCHMARKS / "results" / "seed_vs_hermes.json").read_text())
    assert stored["prompt_tokens_basis"] == bench.PROMPT_TOKENS_BASIS
    for cell in stored["cells"]:
        assert cell["prompt_tokens_basis"] == bench.PROMPT_TOKENS_BASIS
        common = cell["common_calls"]
        assert common["calls"] <= min(cell["seed"]["api_calls"], cell["hermes-0.19"]["api_calls"])
        assert cell["seed_goals"]["prompt_tokens_at_most_hermes"] == \
            (common["seed_prompt_tokens"] <= common["hermes_prompt_tokens"])
        assert all("prompt_tokens" in cell[preset] and "per_call" not in cell[preset] for preset in ("seed", "hermes-0.19"))
