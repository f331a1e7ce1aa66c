"""The stepping both sides of ``benchmarks/hermes_eval_parity.py`` share, checked without Hermes's source.

Hermes's ``jev_arm.py`` is never in the checkout (``docs/presets.md``), so the
worker's side is exercised here with a small stand-in module of the same shape
written to a temporary folder: what is checked is the harness (the trigger,
the view, the fallback record, the marker check), not Hermes's decisions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermeslab.core.errors import ConfigError
from hermeslab.reference.hermes_eval_arms import (EVAL_COMMIT, JEV_ARM, MARKER, ours, read_source, threshold_tokens,
                                                  variants, view, wire)
from hermeslab.reference.zoo.worker import hermes_jev_steps

STAND_IN = '''
class JevOptions:
    def __init__(self, preserve_recent_messages=6):
        self.preserve_recent_messages = preserve_recent_messages

class JevCompactor:
    def __init__(self, asker=None, options=None):
        self.options = options

    def compress(self, messages, force=True):
        if any("too big" in str(m.get("content")) for m in messages):
            raise ValueError("history too large for Jev")
        keep = len(messages) - self.options.preserve_recent_messages
        return [m for i, m in enumerate(messages) if i == 0 or i >= keep or m["role"] in ("user", "system")]

def fake_asker():
    return None
'''


def _source(tmp_path: Path, commit: str = EVAL_COMMIT) -> Path:
    (tmp_path / JEV_ARM).parent.mkdir(parents=True)
    (tmp_path / JEV_ARM).write_text(STAND_IN, encoding="utf-8")
    (tmp_path / MARKER).write_text(json.dumps({"commit": commit}), encoding="utf-8")
    return tmp_path


def _session(rounds: int, text: str = "output " * 200) -> list[dict]:
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"}]
    for n in range(rounds):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": text}]
    return messages + [{"role": "assistant", "content": "done"}]


def test_the_source_folder_must_name_the_eval_commit(tmp_path):
    with pytest.raises(ConfigError, match="holds no"):
        read_source(tmp_path)
    with pytest.raises(ConfigError, match="names commit 'abc'"):
        read_source(_source(tmp_path, "abc"))


def test_wire_keys_every_message_and_counts_it_once():
    wired = wire(_session(2), "hermes-eval-jev")
    assert [m["key"] for m in wired] == [f"m{i}" for i in range(7)]
    assert all(m["tokens"] > 0 for m in wired) and wired[2]["tool_calls"][0]["id"] == "c0"
    assert wired[3]["tool_call_id"] == "c0" and "tool_calls" not in wired[1]


def test_a_cut_call_list_shows_in_the_view():
    original = {"m0": [], "m1": ["a", "b"]}
    history = [{"key": "m0", "role": "user"}, {"key": "m1", "role": "assistant",
                                              "tool_calls": [{"id": "b", "function": {"name": "x"}}]}]
    assert view(history, original) == ["m0", "m1:b"]
    assert hermes_jev_steps.view_entry(history[1], original) == "m1:b"


def test_the_jev_variants_fire_at_the_lean_trigger():
    runs = variants((8_000, 64_000))
    assert [(run["preset"], run["window"]) for run in runs] == [
        ("hermes-eval-jev", 8_000), ("hermes-eval-jev", 64_000),
        ("hermes-eval-jev-tail40", 8_000), ("hermes-eval-jev-tail40", 64_000)]
    assert all(run["threshold"] == threshold_tokens(run["preset"], run["window"]) for run in runs)
    assert threshold_tokens("hermes-eval-jev", 64_000) == threshold_tokens("hermes-eval-current", 64_000)


def test_both_sides_step_before_every_reply_and_agree_with_an_arm_that_drops_alike(tmp_path):
    source = _source(tmp_path)
    messages = _session(12)
    wired = wire(messages, "hermes-eval-jev")
    params = {"preset": "hermes-eval-jev", "window": 8_000, "threshold": 1_000}
    theirs = hermes_jev_steps.replay(wired, {"source": str(source), "threshold": 1_000, "pinned": 6})
    mine = ours(messages, params)
    assert [step["at"] for step in mine] == [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert any(step["compacted"] for step in mine)
    assert theirs == mine


def test_a_history_the_arm_cannot_fit_is_recorded_as_a_fallback(tmp_path):
    source = _source(tmp_path)
    wired = wire(_session(6, text="too big " * 200), "hermes-eval-jev")
    steps = hermes_jev_steps.replay(wired, {"source": str(source), "threshold": 1_000, "pinned": 6})
    fallen = [step for step in steps if "fallback" in step]
    assert fallen and not any(step["compacted"] for step in fallen)
