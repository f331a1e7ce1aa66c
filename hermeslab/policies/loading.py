"""Configs resolved with their presets: every way of naming a configuration goes through here.

``hermeslab.core.config`` knows the schema; which presets and strategies exist
is the registry's. A ``compression.preset`` named anywhere (a YAML file, a
``BASE,key=value`` spec, an override) supplies every compression value the
settings leave out, and the result is checked against the schema and against
the policy whose strategy it names.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

import yaml

from hermeslab.context.rules import StrategyRules
from hermeslab.core.compression_config import CompressionConfig
from hermeslab.core.config import Config, ConfigError, merged, read_yaml_settings, yaml_problem

from .registry import registry

#: The settings key that names a preset.
PRESET_KEY = "compression.preset"


def preset_values(name: Any) -> dict[str, Any]:
    """Preset ``name`` as a full list of dotted compression values; ConfigError naming the known presets."""
    return registry().preset_values(name)


def preset_names() -> list[str]:
    """Every usable preset, built-in ones first, in the order the registry read them."""
    return list(registry().presets)


def validate_compression_config(cfg: CompressionConfig) -> None:
    """Raise ConfigError naming the first compression value the schema or its strategy's policy refuses."""
    registry().validate(cfg)


def strategy_rules(cfg: CompressionConfig) -> StrategyRules | None:
    """What ``cfg.strategy`` runs and when it fires (None: the summary pipeline and the Hermes-style trigger)."""
    return registry().rules_for(cfg)


def config_from_dict(data: Mapping[str, Any] | None) -> Config:
    """A Config from nested settings; ``compression.preset`` supplies every compression value not given."""
    data = data or {}
    compression = data.get("compression")
    preset = compression.get("preset") if isinstance(compression, Mapping) else None
    if preset is None:
        return Config.from_dict(data)
    Config.from_dict(data)  # a bad key or value is reported against the settings as written
    return Config.from_dict(merged(_preset_settings(preset), data))


def config_from_yaml(path: str | Path) -> Config:
    return config_from_dict(read_yaml_settings(path))


def with_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    """A copy with dotted keys replaced; a ``compression.preset`` among them is applied first, whatever the order."""
    preset = overrides.get(PRESET_KEY)
    if preset is not None:
        config = Config.from_dict(merged(config.to_dict(), _preset_settings(preset)))
    return config.with_overrides({key: value for key, value in overrides.items() if key != PRESET_KEY})


def apply_preset(config: Config, name: str) -> Config:
    """A copy of ``config`` with every compression value taken from preset ``name``."""
    updated = with_overrides(config, {PRESET_KEY: name})
    validate_compression_config(updated.compression)
    return updated


def load_config(source: "Config | str | Path | None" = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """The one way a configuration is resolved, from whatever names it, with ``overrides`` applied last.

    ``source`` is a Config, a YAML file, a preset name (``seed``, ``hermes-0.19``,
    or any listed by ``hermeslab presets``), or ``BASE,key=value,...`` text: at
    most one comma-separated part without ``=`` is the base (a preset or a
    file), the others dotted overrides read as YAML scalars. None means the
    defaults (the ``seed`` preset).
    """
    if isinstance(source, Config):
        config = source
    elif source is None:
        config = Config()
    elif isinstance(source, Path):
        config = _from_yaml_file(source)
    elif isinstance(source, str) and source.strip():
        config = _from_spec(source)
    else:
        raise ConfigError(f"a config must be a Config, a YAML path, a preset name or key=value text, got {source!r}")
    config = with_overrides(config, overrides) if overrides else config
    validate_compression_config(config.compression)
    return config


def _preset_settings(name: Any) -> dict[str, Any]:
    """The compression section preset ``name`` gives: its values over the schema's defaults, every key set."""
    values = {key.partition(".")[2]: value for key, value in preset_values(name).items()}
    return {"compression": {**dataclasses.asdict(CompressionConfig()), **values}}


def _from_spec(spec: str) -> Config:
    if "," not in spec and "=" not in spec and Path(spec.strip()).suffix in (".yaml", ".yml"):
        return _from_yaml_file(Path(spec.strip()))
    base: str | None = None
    overrides: dict[str, Any] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise ConfigError(f"config {spec!r} has an empty part")
        if "=" in part:
            key, _, value = part.partition("=")
            try:
                overrides[key.strip()] = yaml.safe_load(value) if value.strip() else None
            except yaml.YAMLError as exc:
                raise ConfigError(f"config {spec!r}: cannot read the value of {key.strip()!r}: "
                                  f"{yaml_problem(exc)}") from None
        elif base is None:
            base = part
        else:
            raise ConfigError(f"config {spec!r} names two bases ({base!r} and {part!r}); give one preset or file")
    known = registry().presets
    if base is None or base in known:
        config = with_overrides(Config(), {PRESET_KEY: base or "seed"})
    elif Path(base).is_file():
        config = _from_yaml_file(Path(base))
    else:
        raise ConfigError(f"config {spec!r}: {base!r} is neither a preset ({', '.join(known)}) nor a YAML file")
    return with_overrides(config, overrides)


def _from_yaml_file(path: Path) -> Config:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    return config_from_yaml(path)


def preset_table() -> dict[str, dict[str, Any]]:
    """Every usable preset's full dotted list, by name."""
    return {name: preset_values(name) for name in preset_names()}
