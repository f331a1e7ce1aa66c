"""The policy registry: a module dropped into ``hermeslab.policies`` is listed, loaded, validated and run.

The sample module lives in ``tests/dropped_policy``; the test puts that folder
on the package's path (as if the file sat in ``hermeslab/policies/``) and
reads the registry again, so nothing in the package is touched.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import hermeslab.policies
from hermeslab.cli import _load_config, main
from hermeslab.context.rules import PIPELINE, StrategyRules
from hermeslab.core.config import Config, ConfigError
from hermeslab.policies.loading import config_from_yaml, load_config, preset_values, with_overrides
from hermeslab.policies.registry import BUILT_IN, build, refresh, registry
from hermeslab.policies.running import budgets_of, make_compactor, threshold_sentence
from hermeslab.eval.replay_compression import FixedSummariser

DROPPED = Path(__file__).resolve().parent / "dropped_policy"
SAMPLE = "sample-newest-request"
PROJECT_RECORDINGS = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


def _forget_module(name: str) -> None:
    sys.modules.pop(f"hermeslab.policies.{name}", None)


@pytest.fixture
def with_folder(monkeypatch):
    """Put folders on the package's path and read the registry again; undone after the test."""

    def add(folder: Path) -> None:
        monkeypatch.setattr(hermeslab.policies, "__path__", [*hermeslab.policies.__path__, str(folder)])
        refresh()

    yield add
    monkeypatch.undo()
    for path in DROPPED.glob("*.py"):
        _forget_module(path.stem)
    refresh()


def _conversation() -> list[dict]:
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "first request " * 50},
            {"role": "assistant", "content": "first answer " * 50},
            {"role": "user", "content": "second request"},
            {"role": "assistant", "content": "working on it"}]


def test_the_built_in_policies_are_all_usable():
    assert registry().problems == ()
    assert next(iter(registry().presets)) == "seed"
    assert all(entry.package == BUILT_IN for entry in registry().entries)


def test_a_dropped_module_is_listed_with_its_package_and_source(with_folder, capsys):
    with_folder(DROPPED)
    preset, entry = registry().presets[SAMPLE]
    assert entry.origin == "hermeslab.policies.sample_newest_request" and entry.package == BUILT_IN
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert (f"{SAMPLE}\n  agent: Sample agent\n  source: tests/dropped_policy (this repository)\n"
            f"  package: hermeslab (hermeslab.policies.sample_newest_request)\n  policy: {preset.summary}") in out


def test_a_dropped_preset_loads_by_name_in_a_spec_a_yaml_file_and_on_the_command_line(with_folder, tmp_path):
    with_folder(DROPPED)
    path = tmp_path / "sample.yaml"
    path.write_text(f"compression:\n  preset: {SAMPLE}\nmodel:\n  context_length: 20000\n", encoding="utf-8")
    configs = [load_config(SAMPLE), load_config(f"{SAMPLE},model.context_length=20000"), config_from_yaml(path),
               _load_config(SAMPLE), with_overrides(Config(), {"compression.preset": SAMPLE})]
    for config in configs:
        assert config.compression.preset == SAMPLE and config.compression.strategy == "sample_newest_request"
        assert config.compression.ineffective_limit == preset_values(SAMPLE)["compression.ineffective_limit"]
    # laid over seed's full list: what the preset leaves out is seed's
    assert configs[0].compression.protect_last_n == preset_values("seed")["compression.protect_last_n"]


def test_a_dropped_policy_validates_its_own_strategy(with_folder):
    with_folder(DROPPED)
    with pytest.raises(ConfigError, match="compression.in_place: sample_newest_request rebuilds its context in place"):
        load_config(f"{SAMPLE},compression.in_place=false")
    load_config("seed,compression.in_place=false")  # another strategy's config is not its business


def test_a_dropped_policy_brings_its_trigger_and_output_reserve(with_folder):
    with_folder(DROPPED)
    config = load_config(f"{SAMPLE},model.context_length=20000")
    assert budgets_of(config.compression, 20_000).threshold_tokens == 2_000
    assert threshold_sentence(config) == (
        f"compression fires at 2,000 tokens (0.10 of the 20,000-token window): the trigger rule of the {SAMPLE} "
        "strategy (sample_newest_request) decides, keeping 123 tokens for the reply (the agent's default, "
        "model.max_tokens being unset)")


def test_the_compactor_runs_a_dropped_strategy_with_its_memory(with_folder):
    with_folder(DROPPED)
    compactor = make_compactor(load_config(f"{SAMPLE},model.context_length=20000"), FixedSummariser("unused"))
    assert compactor.budgets.threshold_tokens == 2_000
    first = compactor.run(_conversation(), trigger="manual")
    assert first.strategy == "sample_newest_request" and first.result.record["compactions"] == 1
    assert [m["content"] for m in first.messages] == ["You are a coding agent.", "second request", "working on it"]
    second = compactor.run(first.messages + [{"role": "user", "content": "third"}], trigger="manual")
    assert second.result.record["compactions"] == 2
    assert [m["content"] for m in second.messages] == ["You are a coding agent.", "third"]


def test_a_dropped_preset_replays_a_recording_end_to_end(with_folder):
    from hermeslab.eval.ab import run_ab

    with_folder(DROPPED)
    frame = run_ab([PROJECT_RECORDINGS], {"sample": f"{SAMPLE},model.context_length=40000"}, executor="serial",
                   progress=False, limit=2)
    assert (frame["status"] == "ok").all() and frame["compressions"].sum() > 0


def test_a_config_naming_a_policy_strategy_cannot_run_without_its_rules():
    config = load_config("codex-cli-0100b10")
    from hermeslab.context.compactor import Compactor

    with pytest.raises(ConfigError, match="comes from a policy"):
        Compactor(config, FixedSummariser("x"))
    rules = registry().rules_for(config.compression)
    with pytest.raises(ConfigError, match="the rules given are for strategy 'codex_user_messages'"):
        Compactor(load_config("seed"), FixedSummariser("x"), rules=rules)
    assert registry().rules_for(load_config("seed").compression) is None


# ---------------------------------------------------------------- what is left out, in one line each


def _rules_policy(**changes):
    from hermeslab.policies.base import Policy, Preset

    sample = {"agent": "A", "source": "s @ 1", "presets": (Preset("p", {"compression.strategy": "x"}, "one line"),),
              "strategies": {"x": lambda messages, zoo, memory: None}}
    return Policy(**{**sample, **changes})


def test_each_unusable_policy_is_one_line_and_the_others_stay():
    from hermeslab.policies.base import Preset
    from hermeslab.policies.seed import POLICY as SEED

    found = build([
        ("seed module", BUILT_IN, SEED),
        ("good", "pkg-good", _rules_policy()),
        ("broken import", "pkg-a", ModuleNotFoundError("No module named 'nothing'")),
        ("not a policy", "pkg-b", {"agent": "A"}),
        ("clash", "pkg-c", _rules_policy(presets=(Preset("seed", {}, "again"),), strategies={"y": print})),
        ("bad key", "pkg-d", _rules_policy(presets=(Preset("q", {"compression.nope": 1}, "bad"),),
                                           strategies={"z": print})),
        ("bad value", "pkg-e", _rules_policy(presets=(Preset("r", {"compression.strategy": "w",
                                                                   "compression.threshold": 5}, "bad"),),
                                             strategies={"w": print})),
        ("stray trigger", "pkg-f", _rules_policy(presets=(), strategies={"v": print}, triggers={"u": print})),
        ("pipeline", "pkg-g", _rules_policy(presets=(), strategies={PIPELINE: print})),
        ("listed overrides", "pkg-h", _rules_policy(presets=(Preset("s", ["compression.threshold"], "a list"),),
                                                    strategies={"t": print})),
        ("malformed", "pkg-j", _rules_policy(presets=(), strategies={"n": print}, triggers=None)),
        ("crashing check", "pkg-i", _rules_policy(presets=(Preset("k", {"compression.strategy": "m"}, "x"),),
                                                  strategies={"m": print}, validate=lambda cfg: 1 / 0)),
    ])
    assert list(found.presets) == ["seed", "p"] and set(found.strategies) == {"x"}
    assert found.problems == (
        "broken import from pkg-a: cannot be loaded: ModuleNotFoundError: No module named 'nothing'",
        "not a policy from pkg-b: is a dict, not a hermeslab.policies.base.Policy",
        "clash from pkg-c: uses the name 'seed', which an earlier policy already has",
        "bad key from pkg-d: preset q: unknown config key 'compression.nope'",
        "stray trigger from pkg-f: has a trigger or output reserve for 'u', which is none of its strategies",
        "pipeline from pkg-g: redefines the strategy 'summary', which is the summary pipeline's",
        "listed overrides from pkg-h: preset s: its overrides are a list, not a mapping",
        "malformed from pkg-j: is malformed: TypeError: 'NoneType' object is not iterable",
        "bad value from pkg-e: preset r: compression.threshold: expected a fraction in (0, 1], got 5",
        "crashing check from pkg-i: preset k: ZeroDivisionError: division by zero",
    )
    assert isinstance(found.strategies["x"][0], StrategyRules)


def test_a_module_that_fails_to_import_is_listed_as_not_usable(with_folder, tmp_path, capsys):
    (tmp_path / "sample_broken.py").write_text("import no_such_module_here\n", encoding="utf-8")
    with_folder(tmp_path)
    try:
        assert main(["presets"]) == 0
        out = capsys.readouterr().out
        assert ("not usable: hermeslab.policies.sample_broken from hermeslab: cannot be loaded: "
                "ModuleNotFoundError: No module named 'no_such_module_here'") in out
        assert "\nseed\n" in f"\n{out}"
    finally:
        _forget_module("sample_broken")
