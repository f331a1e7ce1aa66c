"""Every token figure names its unit, two configs are billed in one unit, and mixed units are never compared."""

from __future__ import annotations

import pandas as pd
import pytest

from hermeslab.policies.loading import load_config
from hermeslab.eval.metrics import UNIT_COLUMNS, measure
from hermeslab.eval.replay import replay
from hermeslab.eval.stats import paired_compare
from hermeslab.recordings import Recording

from test_eval_replay import reply, result, user


def conversation(model: str | None) -> Recording:
    messages = [{"role": "system", "content": "You fix bugs."}, user("List the files and read notes.txt.")]
    for i in range(8):
        messages += [reply(f"step {i}", (f"c{i}", f"cat part{i}.txt")), result(f"c{i}", f"line {i} " * 600)]
    messages.append(reply("Done."))
    return Recording(id="units", messages=messages, model=model)


def test_both_presets_are_billed_in_one_unit_and_their_own_estimates_are_labelled_apart():
    rows = {name: measure(replay(conversation("gpt-4.1"), load_config(f"{name},model.context_length=8000")))
            for name in ("seed", "hermes-0.19")}
    assert rows["seed"]["token_unit"] == rows["hermes-0.19"]["token_unit"] == "tiktoken o200k_base"
    assert rows["seed"]["decision_unit"] == "tiktoken cl100k_base"
    assert rows["hermes-0.19"]["decision_unit"] == "rough chars/4"
    assert rows["hermes-0.19"]["decision_prompt_tokens"] > 0 and rows["seed"]["prompt_tokens"] > 0


@pytest.mark.parametrize("model, unit", [("gpt-4o-2024-08-06", "tiktoken o200k_base"),
                                         ("gpt-4-0613", "tiktoken cl100k_base"),
                                         ("gemini-3-pro", "tiktoken cl100k_base"),
                                         (None, "tiktoken cl100k_base")])
def test_the_billing_unit_is_the_recorded_models_encoding(model, unit):
    run = replay(conversation(model), load_config("seed,model.context_length=32000"))
    assert run.counter.encoding == unit and measure(run)["token_unit"] == unit


def test_a_unit_can_be_chosen_for_every_config_alike():
    run = replay(conversation("gpt-4o"), load_config("seed"), counter="rough")
    assert measure(run)["token_unit"] == "rough chars/4"


def test_every_token_figure_has_a_unit_column_in_the_row():
    row = measure(replay(conversation("gpt-4.1"), load_config("seed,model.context_length=8000")))
    for unit, figures in UNIT_COLUMNS.items():
        assert isinstance(row[unit], str)
        assert all(figure in row for figure in figures)


def frame(unit_a: str, unit_b: str) -> pd.DataFrame:
    rows = []
    for config, unit in (("A", unit_a), ("B", unit_b)):
        for i in range(4):
            rows.append({"session_id": f"s{i}", "config": config, "status": "ok", "prompt_tokens": 100 + i,
                         "api_calls": 3 + i, "token_unit": unit})
    return pd.DataFrame(rows)


def test_paired_compare_refuses_token_figures_counted_in_different_units():
    with pytest.raises(ValueError, match="prompt_tokens is counted in .*rough chars/4.* under 'B'"):
        paired_compare(frame("tiktoken cl100k_base", "rough chars/4"), "A", "B", ["prompt_tokens"], n_resamples=99)
    left = paired_compare(frame("tiktoken cl100k_base", "rough chars/4"), "A", "B", n_resamples=99)
    assert "prompt_tokens" not in left.index and "prompt_tokens" in left.attrs["left_out"]
    # figures without a unit still compare
    table = paired_compare(frame("tiktoken cl100k_base", "rough chars/4"), "A", "B", ["api_calls"], n_resamples=99)
    assert table.loc["api_calls", "n_pairs"] == 4


def test_paired_compare_accepts_one_unit():
    table = paired_compare(frame("tiktoken o200k_base", "tiktoken o200k_base"), "A", "B", n_resamples=99)
    assert "prompt_tokens" in table.index and "token_unit" not in table.index


def test_among_the_default_metrics_a_mixed_unit_figure_is_left_out_and_named():
    mixed = frame("tiktoken cl100k_base", "tiktoken cl100k_base")
    mixed["decision_prompt_tokens"] = mixed["prompt_tokens"]
    mixed["decision_unit"] = ["tiktoken cl100k_base"] * 4 + ["rough chars/4"] * 4
    table = paired_compare(mixed, "A", "B", n_resamples=99)
    assert "decision_prompt_tokens" not in table.index and "prompt_tokens" in table.index
    assert "rough chars/4" in table.attrs["left_out"]["decision_prompt_tokens"]
    with pytest.raises(ValueError, match="decision_prompt_tokens is counted in"):
        paired_compare(mixed, "A", "B", ["decision_prompt_tokens"], n_resamples=99)
