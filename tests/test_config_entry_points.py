"""Every way of naming a configuration resolves to the same effective values and the same hash.

A preset named in a YAML file, in a ``BASE,key=value`` spec, in an override,
on the command line or in the notebook settings must give the engine that
preset describes, with the explicit values on top; and the logged hash must
follow the values, never the label.
"""

from __future__ import annotations

import pytest
import yaml

from hermeslab.cli import _load_config
from hermeslab.core.config import Config, ConfigError
from hermeslab.policies.loading import (apply_preset, config_from_dict, config_from_yaml, load_config, preset_values,
                                       with_overrides)
from hermeslab.notebook.settings import Hermes

SETTINGS = {"compression": {"preset": "hermes-0.19", "threshold": 0.6}, "model": {"context_length": 16_000}}
SPEC = "hermes-0.19,compression.threshold=0.6,model.context_length=16000"
OVERRIDES = {"compression.threshold": 0.6, "compression.preset": "hermes-0.19", "model.context_length": 16_000}


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "hermes.yaml"
    path.write_text(yaml.safe_dump(SETTINGS), encoding="utf-8")
    return path


def test_every_entry_point_gives_the_same_effective_config(config_file):
    expected = apply_preset(Config(), "hermes-0.19").with_overrides(
        {"compression.threshold": 0.6, "model.context_length": 16_000})
    resolved = {
        "config_from_yaml": config_from_yaml(config_file),
        "config_from_dict": config_from_dict(SETTINGS),
        "with_overrides": with_overrides(Config(), OVERRIDES),
        "load_config(path)": load_config(config_file),
        "load_config(str path)": load_config(str(config_file)),
        "load_config(spec)": load_config(SPEC),
        "load_config(file spec)": load_config(f"{config_file},model.context_length=16000"),
        "cli --config file": _load_config(str(config_file)),
        "cli --config spec": _load_config(SPEC),
        "notebook config_file": Hermes(config_file=str(config_file)).build_config(),
        "notebook spec": Hermes(config_file="hermes-0.19", context_length=16_000).build_config(
            {"compression.threshold": 0.6}),
    }
    for name, config in resolved.items():
        assert config.to_dict() == expected.to_dict(), name
        assert config.digest() == expected.digest(), name
    assert expected.compression.estimator == "rough" and expected.compression.in_place is True


def test_a_preset_in_a_file_supplies_every_compression_value_the_file_leaves_out(config_file):
    loaded = config_from_yaml(config_file)
    for dotted, value in preset_values("hermes-0.19").items():
        if dotted != "compression.threshold":
            assert getattr(loaded.compression, dotted.split(".")[1]) == value, dotted


def test_an_override_naming_a_preset_applies_it_before_the_other_keys_whatever_their_order():
    first = with_overrides(Config(), {"compression.preset": "hermes-0.19", "compression.in_place": False})
    last = with_overrides(Config(), {"compression.in_place": False, "compression.preset": "hermes-0.19"})
    assert first.compression.in_place is last.compression.in_place is False
    assert first.compression.estimator == last.compression.estimator == "rough"


def test_the_hash_follows_the_values_not_the_preset_label():
    seed = load_config("seed")
    relabelled = seed.with_overrides({})
    relabelled.compression.preset = "hermes-0.19"  # the label alone, with seed's values
    assert relabelled.digest() == seed.digest()
    assert load_config("hermes-0.19").digest() != seed.digest()


def test_the_cli_takes_preset_names_and_specs_where_it_took_files():
    assert _load_config("seed").compression.preset == "seed"
    assert _load_config("hermes-0.19").compression.estimator == "rough"
    with pytest.raises(SystemExit, match="neither a preset"):
        _load_config("no-such-thing")


@pytest.mark.parametrize("source, message", [
    ({"compression": {"preset": "hermes-9"}}, "unknown compression preset 'hermes-9'"),
    ({"compression": {"preset": "seed", "nope": 1}}, "unknown config key 'compression.nope'"),
])
def test_a_bad_preset_or_key_in_settings_is_named(source, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(source)


def test_an_out_of_range_value_is_refused_when_the_config_is_resolved(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("compression:\n  threshold: 5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"compression.threshold: expected a fraction in \(0, 1\], got 5"):
        load_config(path)
