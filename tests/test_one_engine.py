"""One engine: the fast replay and the loop replay make the same calls and the same compressions.

The fast replay (recorded tool results appended directly, no events) exists
only to be cheap; it must never decide differently from the full loop (the
tool executor, the event bus, a subscriber on every event). Both go through
the agent's ``ContextDriver``, and this checks, on every recording the project
has and every session of the shared recordings, at three windows under both
presets, that nothing else creeps in: same compression positions and triggers,
same resulting message lists, same calls with the same prompt tokens, same
refusals and turn outcomes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config
from hermeslab.core.events import Event, EventBus
from hermeslab.eval.recording import Recording
from hermeslab.eval.replay import ReplayRun, replay
from hermeslab.eval.replay_compression import FixedSummariser

from shared_data import dataset

PROJECT_RECORDINGS = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"
SHARED = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl", "tau_bench_airline_gpt4o.jsonl")
WINDOWS = (8_000, 16_000, 32_000)
PRESETS = ("seed", "hermes-0.19")


def _load(path: Path) -> list[Recording]:
    with path.open(encoding="utf-8") as handle:
        return [Recording.from_dict(json.loads(line)) for line in handle if line.strip()]


def _config(preset: str, window: int) -> Config:
    return apply_preset(Config(), preset).with_overrides({"model.context_length": window})


def _trace(run: ReplayRun) -> dict:
    """Everything a replay decided, in a form two replays can be compared by."""
    return {
        "compressions": [(c.call, c.trigger, c.changed, c.ineffective, c.after) for c in run.compressions],
        "calls": [(c.reply_index, c.prompt_tokens, c.completion_tokens) for c in run.calls],
        "refusals": [(r.call, r.reply_index, r.prompt_tokens) for r in run.refusals],
        "statuses": run.statuses,
        "deviations": run.deviations,
    }


def _assert_same(recordings: list[Recording], preset: str, window: int) -> int:
    """Replays every recording both ways; returns how many compressions were compared."""
    config = _config(preset, window)
    compared = 0
    for recording in recordings:
        events: list[Event] = []
        bus = EventBus()
        bus.subscribe(events.append)  # the full path: every event is built and delivered
        looped = replay(recording, config, summariser=FixedSummariser(), bus=bus)
        fast = replay(recording, config, summariser=FixedSummariser(), fast=True)
        assert events, recording.id
        assert _trace(fast) == _trace(looped), (recording.id, preset, window)
        compared += len(looped.compressions)
    return compared


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("preset", PRESETS)
def test_the_fast_replay_decides_as_the_loop_on_the_project_recordings(preset, window):
    compared = _assert_same(_load(PROJECT_RECORDINGS), preset, window)
    if window == WINDOWS[0]:
        assert compared > 0  # the check saw compressions, not only calls


@pytest.mark.slow
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", SHARED)
def test_the_fast_replay_decides_as_the_loop_on_every_shared_session(name, preset, window):
    compared = _assert_same(_load(dataset(name)), preset, window)
    if window == WINDOWS[0]:
        assert compared > 0


def test_the_comparison_notices_a_replay_that_decides_differently():
    recording = _load(PROJECT_RECORDINGS)[0]
    wide, narrow = _config("seed", 32_000), _config("seed", 4_000)
    assert _trace(replay(recording, narrow, summariser=FixedSummariser(), fast=True)) != _trace(
        replay(recording, wide, summariser=FixedSummariser(), fast=True))
