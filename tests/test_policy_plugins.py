"""A package that declares an entry point in ``hermeslab.policies`` adds its presets, as a built-in module does.

The package in ``tests/sample_plugin`` is copied to a temporary folder, built
and installed there by pip (``--target``, offline, with the backend that ships
beside it), and that folder is put on ``sys.path`` for the test alone, so
nothing is installed into the environment the other tests see.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermeslab.cli import _load_config, main
from hermeslab.core.config import Config, ConfigError
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.policies.loading import apply_preset, load_config, preset_names
from hermeslab.policies.registry import GROUP, refresh, registry
from hermeslab.policies.running import make_compactor

TEMPLATE = Path(__file__).resolve().parent / "sample_plugin"
PRESET = "plugin-newest-half"
PACKAGE = "hermeslab-sample-plugin"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The sample plug-in built and installed by pip into a folder of its own."""
    source = tmp_path_factory.mktemp("plugin") / "sample_plugin"
    shutil.copytree(TEMPLATE, source, ignore=shutil.ignore_patterns("__pycache__"))
    target = source.parent / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "--target", str(target), str(source)],
                   check=True, capture_output=True, timeout=300)
    return target


@pytest.fixture
def installed(site, monkeypatch):
    """The plug-in's folder on ``sys.path`` and the registry read again; both undone afterwards."""
    monkeypatch.syspath_prepend(str(site))
    refresh()
    yield
    monkeypatch.undo()
    for name in ("hermeslab_sample_plugin", "hermeslab_sample_plugin_broken"):
        sys.modules.pop(name, None)
    refresh()


def test_the_plugin_is_installed_as_a_distribution_with_its_entry_points(site):
    text = next(site.glob("*.dist-info")).joinpath("entry_points.txt").read_text(encoding="utf-8")
    assert f"[{GROUP}]" in text and "sample = hermeslab_sample_plugin:POLICY" in text


def test_an_installed_plugin_is_listed_with_its_package_and_a_broken_one_in_one_line(installed, capsys):
    preset, entry = registry().presets[PRESET]
    assert entry.package == PACKAGE and entry.origin == "entry point sample (hermeslab_sample_plugin:POLICY)"
    assert PRESET in preset_names()
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert (f"{PRESET}\n  agent: Sample plug-in agent\n  source: hermeslab-sample-plugin @ 0.1\n"
            f"  package: {PACKAGE} (entry point sample (hermeslab_sample_plugin:POLICY))\n") in out
    [broken] = [line for line in out.splitlines() if line.startswith("not usable:")]
    assert broken == (f"not usable: entry point broken (hermeslab_sample_plugin_broken:POLICY) from {PACKAGE}: "
                      "cannot be loaded: ImportError: hermeslab-sample-plugin needs a package that is not installed")
    assert "\nseed\n" in f"\n{out}" and "\nhermes-0.19\n" in out


def test_an_installed_plugin_preset_is_a_config_like_a_built_in_one(installed):
    config = _load_config(f"{PRESET},model.context_length=10000")
    assert config.compression.strategy == "plugin_newest_half" and config.compression.threshold == 0.6
    with pytest.raises(ConfigError, match=r"compression.threshold: expected a fraction in \(0, 1\], got 2"):
        load_config(f"{PRESET},compression.threshold=2")
    compactor = make_compactor(config, FixedSummariser("unused"))
    messages = [{"role": "system", "content": "s"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(8)]
    compaction = compactor.run(messages, trigger="manual")
    assert compaction.strategy == "plugin_newest_half"
    assert [m["content"] for m in compaction.messages] == ["s", "message 4", "message 5", "message 6", "message 7"]


def test_without_the_plugin_its_preset_is_unknown():
    assert PRESET not in registry().presets
    with pytest.raises(ConfigError, match=f"unknown compression preset '{PRESET}'"):
        apply_preset(Config(), PRESET)
