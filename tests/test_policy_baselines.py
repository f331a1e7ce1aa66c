"""The trivial arms: recency (the newest messages that fit, nothing summarised) and no compaction at all."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.baselines import units_of
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.messages import validate_messages
from hermeslab.eval.metrics import role_order_problems
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.policies.baselines import NO_COMPACTION, RECENCY_PRESET, keep_recent, newest_that_fit
from hermeslab.policies.loading import load_config
from hermeslab.policies.running import make_compactor

from test_context_conversations import conversations

PROJECT_RECORDINGS = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


def _zoo(window: int) -> ZooInput:
    config = load_config(RECENCY_PRESET, {"model.context_length": window})
    compactor = make_compactor(config, FixedSummariser("never asked"))
    return ZooInput(cfg=config.compression, budgets=compactor.budgets, summariser=compactor.summariser,
                    estimate=compactor._estimate_message)


def _history(messages: list[dict]) -> list[dict]:
    return [m for m in messages if m["role"] not in ("system", "developer")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([2_000, 8_000, 30_000, 200_000]))
def test_recency_keeps_the_newest_whole_groups_that_fit_and_summarises_nothing(messages, window):
    zoo = _zoo(window)
    snapshot = json.dumps(messages, sort_keys=True)
    result = keep_recent(messages, zoo, {})
    assert json.dumps(messages, sort_keys=True) == snapshot
    validate_messages(result.messages)  # every tool call beside its results
    assert role_order_problems(result.messages) <= role_order_problems(messages)
    assert result.summary_text is None
    system = messages[:len(messages) - len(_history(messages))]
    assert result.messages[:len(system)] == system
    history, kept = _history(messages), result.messages[len(system):]
    assert kept == history[len(history) - len(kept):]  # a suffix: the newest messages, in order
    budget = zoo.budgets.tail_token_budget
    cost = sum(map(zoo.estimate, kept))
    units = units_of(history, 0)
    if len(kept) < len(history):
        start = len(history) - len(kept)
        assert start == newest_that_fit(history, budget, zoo.estimate)
        assert kept, "the newest message is always kept"
        assert cost <= budget or [start] == units[-1][:1]  # over the budget only when the newest group alone is
        [older] = [unit for unit in units if unit[-1] == start - 1]
        assert cost + sum(zoo.estimate(history[i]) for i in older) > budget  # the next older group would not fit
        assert result.condensed == start
    else:
        assert result.condensed == 0 and result.messages == messages


def test_recency_drops_the_oldest_and_keeps_a_call_with_its_results():
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "old " * 2_000},
                {"role": "assistant", "content": "old answer " * 1_000}, {"role": "user", "content": "new"},
                call, {"role": "tool", "tool_call_id": "c1", "content": "result"}]
    result = keep_recent(messages, _zoo(8_000), {})
    assert result.messages == [messages[0], *messages[3:]]
    assert result.record["outcome"] == "kept_newest" and result.record["over_budget"] is False


def test_the_trivial_arms_replay_beside_the_others():
    from hermeslab.eval.ab import run_ab

    frame = run_ab([PROJECT_RECORDINGS], {"none": f"{NO_COMPACTION},model.context_length=60000",
                                          "recency": f"{RECENCY_PRESET},model.context_length=8000"},
                   executor="serial", progress=False, limit=3)
    by_config = frame.groupby("config")["compressions"].sum()
    assert by_config["none"] == 0 and by_config["recency"] > 0
    assert frame.loc[frame.config == "recency", "summary_tokens"].fillna(0).sum() == 0
