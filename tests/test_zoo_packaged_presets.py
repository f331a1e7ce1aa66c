"""The presets of the agents published as Python packages (Aider, LangChain, Inspect AI) run through the engine:
loaded by name, they fire at their agent's trigger and the compactor runs their agent's strategy."""

from __future__ import annotations

import pytest

from hermeslab.core.messages import validate_messages
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.policies.loading import load_config
from hermeslab.policies.running import budgets_of, make_compactor


@pytest.mark.parametrize("preset, window, expected", [
    ("aider-0.86.2", 65_536, 4_097),  # aider/models.py 346: 65,536 / 16, compared with >
    ("aider-0.86.2", 8_000, 1_025),  # ... at least 1,024
    ("langchain-1.5.0", 8_000, 6_400),  # summarization.py 725: int(8,000 * 0.8), compared with >=
    ("inspect-ai-0.3.285", 8_000, 7_201),  # _compaction.py 462 and 218: int(0.9 * 8,000), compared with >
    ("inspect-ai-0.3.285-trim", 8_000, 7_201),
])
def test_each_preset_fires_at_its_agents_trigger(preset, window, expected):
    config = load_config(preset, {"model.context_length": window, "model.max_tokens": None})
    assert budgets_of(config.compression, window).threshold_tokens == expected


def _conversation(turns: int = 40) -> list[dict]:
    messages = [{"role": "system", "content": "You are an agent."}]
    for number in range(turns):
        messages += [{"role": "user", "content": f"request {number} " + "words " * 80},
                     {"role": "assistant", "content": f"answer {number} " + "words " * 80}]
    return messages + [{"role": "user", "content": "the newest request"}]


@pytest.mark.parametrize("preset, strategy", [("aider-0.86.2", "aider_chat_summary"),
                                              ("langchain-1.5.0", "langchain_summarization"),
                                              ("inspect-ai-0.3.285", "inspect_summary"),
                                              ("inspect-ai-0.3.285-trim", "inspect_trim")])
def test_the_compactor_runs_each_presets_strategy(preset, strategy):
    config = load_config(preset, {"model.context_length": 8_000, "model.max_tokens": None})
    messages = _conversation()
    compaction = make_compactor(config, FixedSummariser("THE SUMMARY")).run(messages, trigger="pressure")
    assert compaction is not None and compaction.strategy == strategy
    assert compaction.result.record["strategy"] == strategy and compaction.result.condensed > 0
    assert compaction.messages[0] == messages[0] and len(compaction.messages) < len(messages)
    validate_messages(compaction.messages)
