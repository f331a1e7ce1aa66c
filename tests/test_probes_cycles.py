"""Repeated compaction per session, from replay runs: tokens each cycle frees, the verbatim part, stuck sessions."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from hermeslab.context.budget import derive_budgets
from hermeslab.policies.loading import load_config
from hermeslab.eval.probes.cycles import cycles, run_cycles, stuck_sessions
from hermeslab.eval.replay import CompressionRecord, ReplayRun
from hermeslab.providers.replay import ServedCall, make_counter

CONFIG = load_config("seed,model.context_length=8000")
THRESHOLD = derive_budgets(CONFIG.compression, 8_000, CONFIG.model.max_tokens).threshold_tokens
COUNTER = make_counter("tiktoken")


def message(role: str, words: int, tag: str) -> dict:
    return {"role": role, "content": " ".join(f"{tag}{n}" for n in range(words))}


def summary(words: int) -> dict:
    return {"role": "user", "content": "x " * words, "_compressed_summary": True}


def run_with(prompts_after: list[int | None]) -> tuple[ReplayRun, list[dict]]:
    """A run whose n-th compaction summarises the oldest messages and keeps a growing verbatim tail; the call after
    it was sent ``prompts_after[n]`` decision tokens (None: no answered call followed)."""
    system = {"role": "system", "content": "you help"}
    history = [message("user" if n % 2 == 0 else "assistant", 200, f"m{n}-") for n in range(12)]
    records, calls = [], []
    for number, prompt in enumerate(prompts_after):
        before = [system, *history]
        kept = history[-(2 + 2 * number):]
        after = [system, summary(50), *kept]
        records.append(CompressionRecord("turn", len(calls), before, after, True, False, None))
        if prompt is not None:
            calls.append(ServedCall(0, after, prompt, 10, decision_tokens=prompt))
    run = ReplayRun(recording_id="rec", run_id="run", config_hash="h", model="m", context_length=8_000,
                    counter=COUNTER, tool_tokens=0, replies=[], calls=calls, compressions=records)
    return run, history


def test_each_cycle_reports_what_it_freed_and_kept_verbatim():
    run, history = run_with([THRESHOLD - 500, THRESHOLD - 200, THRESHOLD - 10])
    table = run_cycles(run, CONFIG, "seed")
    assert list(table.cycle) == [1, 2, 3]
    assert (table.freed_tokens == table.tokens_before - table.tokens_after).all()
    for number, values in table.iterrows():
        kept = history[-(2 + 2 * number):]
        assert values.verbatim_tokens == COUNTER.count_messages(kept)
    assert table.verbatim_growth.isna().iloc[0] and (table.verbatim_growth.iloc[1:] > 0).all()
    assert (table.freed_tokens.diff().iloc[1:] < 0).all()  # a growing tail frees less each time
    assert (table.threshold_tokens == THRESHOLD).all() and not table.over_threshold.any()
    assert table.token_unit.iloc[0] == "tiktoken cl100k_base"


def test_a_session_whose_last_compaction_stays_over_the_threshold_is_stuck():
    stuck, _ = run_with([THRESHOLD - 500, THRESHOLD + 1])
    fine, _ = run_with([THRESHOLD + 1, THRESHOLD - 1])
    table = cycles([(stuck, CONFIG, "seed"), (dataclasses.replace(fine, recording_id="other"), CONFIG, "seed")])
    verdict = stuck_sessions(table)
    assert verdict.loc[("seed", "rec"), "stuck"]
    assert not verdict.loc[("seed", "other"), "stuck"]
    assert verdict.loc[("seed", "rec"), "cycles"] == 2


def test_a_compaction_without_an_answered_call_after_it_has_no_verdict():
    run, _ = run_with([None])
    table = run_cycles(run, CONFIG)
    assert pd.isna(table.prompt_after.iloc[0]) and pd.isna(table.over_threshold.iloc[0])
    assert pd.isna(stuck_sessions(table).iloc[0]["stuck"])


def test_compactions_that_changed_nothing_are_not_cycles_and_bad_input_is_refused():
    run, _ = run_with([THRESHOLD - 1])
    unchanged = CompressionRecord("turn", 1, run.compressions[0].after, run.compressions[0].after, False, True, None)
    run.compressions.append(unchanged)
    assert len(run_cycles(run, CONFIG)) == 1
    with pytest.raises(TypeError, match="ReplayRun"):
        run_cycles("run", CONFIG)
    with pytest.raises(ValueError, match="not a cycles table"):
        stuck_sessions(pd.DataFrame({"config": []}))

