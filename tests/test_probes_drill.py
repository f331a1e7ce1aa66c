"""From an exam's probe back to the transcript: the span its gold came from and the summary that replaced it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermeslab.policies.loading import load_config
from hermeslab.eval.probes.bank import run_bank
from hermeslab.eval.probes.context import effective_compactions
from hermeslab.eval.probes.drill import trace
from hermeslab.eval.recording import read_recordings
from hermeslab.eval.replay import replay

SHIPPED = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


@pytest.fixture(scope="module")
def recording():
    return next(iter(read_recordings(SHIPPED)))


def test_a_probe_is_traced_to_its_gold_in_the_source_message_and_to_the_summary(recording):
    config = load_config("seed")
    run = replay(recording, config.with_overrides({"model.context_length": 6_000}), fast=True)
    probes = run_bank(run, effective_compactions(run))
    assert probes
    for probe in probes[:5]:
        found = trace(recording, "seed", 6_000, probe.compaction, probe.probe_id)
        assert found.probe == probe
        assert f"⟦{probe.golds[0]}" in found.source_excerpt or isinstance(probe.gold, tuple)
        assert found.removed_messages > 0 and found.retained_tokens > 0 and found.token_unit
        assert found.gold_in_summary() == any(gold in text for gold in probe.golds for text in found.summaries)


def test_a_compaction_or_probe_that_is_not_there_is_a_one_line_error(recording):
    with pytest.raises(ValueError, match="there is no compaction 99"):
        trace(recording, "seed", 6_000, 99, "x")
    with pytest.raises(ValueError, match="no probe 'nope'"):
        trace(recording, "seed", 6_000, 0, "nope")
