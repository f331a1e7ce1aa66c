"""The probe bank: golds cut verbatim from what a compaction removed, present in the uncompacted context,
absent from the floor, the same bank for the same replay; on recordings and on generated conversations."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.policies.loading import load_config
from hermeslab.eval.ab import gather_recordings
from hermeslab.eval.metrics import message_text
from hermeslab.eval.probes.bank import BANK_TYPES, bank_hash, bank_of, build_bank, run_bank
from hermeslab.eval.probes.context import EffectiveCompaction, effective_compactions
from hermeslab.eval.probes.text import context_text, normal_answer
from hermeslab.eval.replay import replay

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"
SHARED = sorted((ROOT.parent / "shared" / "datasets").glob("*.jsonl"))
#: Recordings of every shared file taken for the fast tests (the benchmark takes them all).
PER_SHARED_FILE = 3


@cache
def sample_recordings() -> tuple:
    recordings, _ = gather_recordings([SHIPPED])
    for path in SHARED:
        found, _ = gather_recordings([path], limit=PER_SHARED_FILE)
        recordings += found
    return tuple(recordings)


@cache
def replayed(preset: str, window: int) -> tuple:
    config = load_config(f"{preset},model.context_length={window}")
    return tuple(replay(recording, config, fast=True) for recording in sample_recordings())


def check_probe(compaction: EffectiveCompaction, probe) -> None:
    """Every guarantee of one probe: verbatim span of a removed message, in the ceiling, not in the floor."""
    assert probe.source_message in compaction.removed
    text = message_text(compaction.before[probe.source_message])
    start, end = probe.source_span
    assert text[start:end] == probe.golds[0]
    ceiling = context_text(compaction.uncompacted)
    floor = context_text(compaction.arm("floor"))
    removed = context_text(compaction.removed_messages())
    for gold in probe.golds:
        key = normal_answer(gold)
        assert key and key in removed and key in ceiling, (probe, gold)
        assert key not in floor and key not in normal_answer(probe.question), (probe, gold)


@pytest.mark.parametrize("preset", ["seed", "hermes-0.19"])
@pytest.mark.parametrize("window", [8_000, 16_000])
def test_every_probe_of_the_recordings_keeps_its_guarantees(preset, window):
    probes = 0
    for run in replayed(preset, window):
        for compaction in effective_compactions(run):
            for probe in bank_of(run.recording_id, compaction):
                check_probe(compaction, probe)
                probes += 1
    assert probes > 20


def test_the_recordings_give_all_five_types():
    types = {probe.probe_type for preset in ("seed", "hermes-0.19") for run in replayed(preset, 8_000)
             for probe in run_bank(run)}
    assert types == set(BANK_TYPES)


def test_the_bank_is_deterministic_and_hashed():
    config = load_config("hermes-0.19,model.context_length=8000")
    recording = max(sample_recordings(), key=lambda r: len(r.messages))
    first, second = (run_bank(replay(recording, config, fast=True)) for _ in range(2))
    assert first and first == second
    assert bank_hash(first) == bank_hash(second)
    assert len({p.probe_id for p in first}) == len(first)
    assert bank_hash(first[:-1]) != bank_hash(first)


def test_build_bank_takes_an_effective_compaction_index():
    run = max(replayed("seed", 8_000), key=lambda r: len(effective_compactions(r)))
    compactions = effective_compactions(run)
    assert [p.compaction for p in build_bank(run, 1)] == [1] * len(build_bank(run, 1))
    with pytest.raises(IndexError, match="effective compaction"):
        build_bank(run, len(compactions))


def test_the_compacted_arm_is_exactly_what_the_next_call_was_sent():
    for run in replayed("hermes-0.19", 8_000):
        for compaction in effective_compactions(run):
            assert compaction.compacted is run.calls[compaction.call].messages
            assert compaction.retained_tokens == run.calls[compaction.call].prompt_tokens
            first = run.compressions[compaction.records[0]]
            assert compaction.before is first.before and first.changed


# ---------------------------------------------------------------- generated conversations

_WORDS = st.sampled_from(["the", "build", "failed", "so", "we", "retry", "config", "order", "file", "now"])
_FACTS = st.sampled_from(["src/app.py", "order_4711", "ERR-2024-77", "v2.3.1", "/etc/hosts", "1,250 ms",
                          "build_cache.json", "deadbeef42", "ValueError: bad input"])
_SENTENCES = st.one_of(
    st.lists(st.one_of(_WORDS, _FACTS), min_size=3, max_size=12).map(" ".join),
    st.tuples(_WORDS, _FACTS).map(lambda p: f"Never touch {p[1]} without asking {p[0]} first."),
    st.tuples(_FACTS, _WORDS).map(lambda p: f"I'll edit {p[0]} because the {p[1]} test keeps failing today."),
)


@st.composite
def conversations(draw):
    """A system prompt and turns of every shape: string or parts content, tool calls with their results."""
    messages = [{"role": "system", "content": "You are a helpful agent."}]
    for turn in range(draw(st.integers(2, 6))):
        text = draw(_SENTENCES)
        if draw(st.booleans()):
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        else:
            messages.append({"role": "user", "content": text})
        if draw(st.booleans()):
            call_id = f"call_{turn}"
            command = draw(st.sampled_from([f"cat > notes_{turn}.txt <<'EOF'\nfirst line {turn}\nEOF",
                                            f"sed -i 's/a/b/' src/mod_{turn}.py", "ls -la src",
                                            f"rm -f build/out_{turn}.log"]))
            messages.append({"role": "assistant", "content": draw(_SENTENCES),
                             "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": "terminal",
                                                          "arguments": json.dumps({"command": command})}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(_SENTENCES)})
        messages.append({"role": "assistant", "content": draw(_SENTENCES)})
    return messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.data())
def test_generated_banks_keep_their_guarantees(messages, data):
    cut = data.draw(st.integers(2, len(messages) - 1))
    summary = {"role": "user", "content": "[summary] earlier turns were compacted"}
    compacted = [messages[0], summary, *messages[cut:]]
    removed = tuple(range(1, cut))
    compaction = EffectiveCompaction(index=0, call=0, records=(0,), before=messages, compacted=compacted,
                                     uncompacted=messages, removed=removed, retained_tokens=1, removed_tokens=1,
                                     ceiling_tokens=1)
    probes = bank_of("generated", compaction)
    for probe in probes:
        check_probe(compaction, probe)
    assert bank_of("generated", compaction) == probes
