"""hermes-0.19 preset against decisions recorded from the real Hermes Agent 0.19.0.

Each row is what ``ContextCompressor.compress`` of hermes-agent 0.19.0 decided
for one recorded session of the shared datasets (its summary call stubbed):
window, compressions already done, the summarised range ``[start, end)`` (None:
nothing summarised) and the indices its prune phase rewrote. The rows were
chosen to cover every rule of the boundary walk at least once.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from shared_data import dataset

from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import CompressionState, plan_compression
from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config

FILES = ("tau_bench_airline_gpt4o.jsonl", "mini_swe_agent_gemini3pro_swebv.jsonl")

# session id, window, compression_count, start, end, pruned indices
HERMES_DECISIONS = [
    ('tau_bench_airline_gpt4o/task35_trial3', 16000, 0, None, None, []),
    ('tau_bench_airline_gpt4o/task10_trial1', 16000, 0, 4, 6, []),
    ('tau_bench_airline_gpt4o/task1_trial0', 16000, 0, 4, 7, []),
    ('tau_bench_airline_gpt4o/task1_trial0', 16000, 1, 1, 4, []),
    ('tau_bench_airline_gpt4o/task7_trial0', 16000, 0, 4, 12, []),
    ('tau_bench_airline_gpt4o/task7_trial0', 16000, 1, 1, 12, []),
    ('mini_swe_agent_gemini3pro_swebv/django__django-11239', 16000, 1, 1, 4, [5, 7, 8]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-11239', 32000, 1, 1, 4, [5, 7, 8]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-11239', 64000, 1, 1, 4, [5]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-13410', 32000, 1, 1, 4, [5, 6, 9]),
    ('tau_bench_airline_gpt4o/task0_trial0', 16000, 0, 4, 6, []),
    ('tau_bench_airline_gpt4o/task0_trial0', 16000, 1, 1, 6, []),
    ('tau_bench_airline_gpt4o/task0_trial0', 32000, 0, 4, 22, []),
    ('tau_bench_airline_gpt4o/task0_trial0', 32000, 1, 1, 22, []),
    ('mini_swe_agent_gemini3pro_swebv/django__django-15127', 64000, 0, 4, 19, [3, 5]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-15127', 64000, 1, 1, 19, [3, 5]),
    ('tau_bench_airline_gpt4o/task10_trial0', 16000, 0, 4, 6, [5]),
    ('tau_bench_airline_gpt4o/task10_trial0', 16000, 1, 1, 4, [5]),
    ('mini_swe_agent_gemini3pro_swebv/scikit-learn__scikit-learn-14894', 16000, 0, 4, 30, [3, 4, 9, 13, 15, 16]),
    ('mini_swe_agent_gemini3pro_swebv/scikit-learn__scikit-learn-14894', 16000, 1, 1, 4, [3, 4, 9, 13, 15, 16]),
    ('tau_bench_airline_gpt4o/task4_trial2', 16000, 0, 4, 15, [5, 9, 11, 13]),
    ('tau_bench_airline_gpt4o/task8_trial1', 16000, 1, 1, 3, [9, 11, 13]),
    ('tau_bench_airline_gpt4o/task8_trial1', 32000, 0, 4, 26, []),
    ('tau_bench_airline_gpt4o/task8_trial1', 32000, 1, 1, 26, []),
    ('mini_swe_agent_gemini3pro_swebv/pytest-dev__pytest-5809', 64000, 1, 1, 21, [5, 7, 8, 16, 25, 26, 39]),
    ('mini_swe_agent_gemini3pro_swebv/astropy__astropy-7671', 16000, 0, 4, 29, [5, 17, 19, 22, 27, 30]),
    ('mini_swe_agent_gemini3pro_swebv/astropy__astropy-7671', 16000, 1, 1, 29, [5, 17, 19, 22, 27, 30]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-15987', 32000, 0, 4, 15, [3, 7, 10, 16, 18, 20]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-15987', 32000, 1, 1, 15, [3, 7, 10, 16, 18, 20]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-11551', 64000, 0, 4, 17, [3, 7, 8, 11, 18, 22]),
    ('tau_bench_airline_gpt4o/task33_trial0', 32000, 0, 4, 53, [7, 11, 23, 27, 39]),
    ('tau_bench_airline_gpt4o/task33_trial0', 32000, 1, 1, 53, [7, 11, 23, 27, 39]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-15629', 16000, 0, 4, 57, [3, 5, 7, 15, 17, 21, 23, 25, 29, 33, 35, 39, 41, 43, 45, 52, 55, 59, 63, 67, 71, 75, 77, 78, 83]),
    ('mini_swe_agent_gemini3pro_swebv/django__django-15629', 16000, 1, 1, 57, [3, 5, 7, 15, 17, 21, 23, 25, 29, 33, 35, 39, 41, 43, 45, 52, 55, 59, 63, 67, 71, 75, 77, 78, 83]),
]


@lru_cache(maxsize=1)
def sessions() -> dict[str, list[dict]]:
    found = {}
    for name in FILES:
        with open(dataset(name), encoding="utf-8") as handle:
            for line in handle:
                session = json.loads(line)
                found[session["id"]] = session["messages"]
    return found


@pytest.mark.parametrize("session_id, window, count, start, end, pruned", HERMES_DECISIONS)
def test_plan_matches_hermes(session_id, window, count, start, end, pruned):
    cfg = apply_preset(Config(), "hermes-0.19").compression
    plan = plan_compression(sessions()[session_id], cfg=cfg, budgets=derive_budgets(cfg, window),
                            state=CompressionState(compression_count=count))
    summarised = (None, None) if plan.boundary.empty else (plan.boundary.start, plan.boundary.end)
    assert summarised == (start, end)
    assert sorted(d.index for d in plan.decisions) == pruned
