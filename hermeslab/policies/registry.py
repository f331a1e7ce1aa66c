"""Every compaction policy hermeslab can run: the package's own modules and installed plug-ins, read alike.

A module of ``hermeslab.policies`` that exports ``POLICY`` is a built-in policy;
an installed package adds one by declaring an entry point in the group
``hermeslab.policies`` that loads to a ``Policy``. Each is checked as it is
read (its presets must build a config its strategy accepts); one that cannot
be used is left out and described in one line (``Registry.problems``), so a
broken plug-in never stops the others from being listed or run.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Iterator, Mapping

from hermeslab.context.rules import PIPELINE, StrategyRules
from hermeslab.core.compression_config import CompressionConfig, validate_values
from hermeslab.core.errors import ConfigError

from .base import Policy, Preset

#: The entry-point group a plug-in package declares its policy in.
GROUP = "hermeslab.policies"
#: The package whose modules are the built-in policies.
PACKAGE = "hermeslab.policies"
#: Where the built-in policies come from, in the listing's "package" column.
BUILT_IN = "hermeslab"
#: The preset every other preset's overrides are laid over.
BASE_PRESET = "seed"

_COMPRESSION_KEYS = frozenset(f.name for f in dataclasses.fields(CompressionConfig))


@dataclass(frozen=True)
class Entry:
    """One policy and where it came from."""

    policy: Policy
    #: The module (built-in) or entry point (plug-in) it was read from.
    origin: str
    #: The distribution that brought it: ``hermeslab`` for the built-in ones.
    package: str


@dataclass(frozen=True)
class Registry:
    """The usable policies, their presets and strategies by name, and one line per policy left out."""

    entries: tuple[Entry, ...]
    presets: Mapping[str, tuple[Preset, Entry]]
    strategies: Mapping[str, tuple[StrategyRules, Entry]]
    problems: tuple[str, ...]

    def preset_values(self, name: Any) -> dict[str, Any]:
        """Preset ``name``'s full dotted list: its overrides over the base preset's; ConfigError naming the known."""
        if not isinstance(name, str) or name not in self.presets:
            raise ConfigError(f"unknown compression preset {name!r} (known: {', '.join(sorted(self.presets))})")
        return _laid_over_base(self.presets[name][0], self.presets.get(BASE_PRESET))

    def rules_for(self, cfg: CompressionConfig) -> StrategyRules | None:
        """The rules ``cfg.strategy`` runs with (None: the summary pipeline); ConfigError for an unknown strategy."""
        if cfg.strategy == PIPELINE:
            return None
        if cfg.strategy not in self.strategies:
            known = ", ".join([PIPELINE, *sorted(self.strategies)])
            raise ConfigError(f"compression.strategy: expected one of {known}, got {cfg.strategy!r}")
        return self.strategies[cfg.strategy][0]

    def validate(self, cfg: CompressionConfig) -> None:
        """Raise ConfigError naming the first compression value the schema or the strategy's policy refuses."""
        validate_values(cfg)
        self.rules_for(cfg)
        owner = self.strategies.get(cfg.strategy)
        if owner is not None and owner[1].policy.validate is not None:
            owner[1].policy.validate(cfg)


def _laid_over_base(preset: Preset, base: tuple[Preset, Entry] | None) -> dict[str, Any]:
    values = dict(base[0].overrides) if base is not None else {}
    values.update(preset.overrides)
    values["compression.preset"] = preset.name
    return values


# ---------------------------------------------------------------- reading the policies


def _builtin() -> Iterator[tuple[str, str, Any]]:
    """(origin, package, what the module exports as POLICY, or the import error) per public module of the package
    that has one (``base``, ``loading`` and the like export none)."""
    package = importlib.import_module(PACKAGE)
    # The base preset's module first: every listing starts from the preset the others are laid over.
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: (info.name != BASE_PRESET, info.name)):
        if info.name.startswith("_"):
            continue
        origin = f"{PACKAGE}.{info.name}"
        try:
            module = importlib.import_module(origin)
        except Exception as exc:  # a module that cannot be imported is one line, not a crash of every listing
            yield origin, BUILT_IN, exc
            continue
        if hasattr(module, "POLICY"):
            yield origin, BUILT_IN, module.POLICY


def _plugins() -> Iterator[tuple[str, str, Any]]:
    """(origin, package, what the entry point loads to, or its error) per entry point of the group."""
    for point in sorted(entry_points(group=GROUP), key=lambda point: point.name):
        package = point.dist.name if point.dist is not None else "an unknown package"
        origin = f"entry point {point.name} ({point.value})"
        try:
            yield origin, package, point.load()
        except Exception as exc:
            yield origin, package, exc


def _shape_problem(found: Any) -> str | None:
    """Why ``found`` is not a usable Policy, or None."""
    if isinstance(found, Exception):
        return f"cannot be loaded: {type(found).__name__}: {found}"
    if not isinstance(found, Policy):
        return f"is a {type(found).__name__}, not a hermeslab.policies.base.Policy"
    if not found.agent or not found.source:
        return "names no agent or no source"
    if not found.presets and not found.strategies:
        return "has neither presets nor strategies"
    if not all(isinstance(preset, Preset) for preset in found.presets):
        return "has a preset that is not a Preset"
    for preset in found.presets:
        if not isinstance(preset.overrides, Mapping):
            return f"preset {preset.name}: its overrides are a {type(preset.overrides).__name__}, not a mapping"
        unknown = [key for key in preset.overrides
                   if not key.startswith("compression.") or key.partition(".")[2] not in _COMPRESSION_KEYS]
        if unknown:
            return f"preset {preset.name}: unknown config key {unknown[0]!r}"
    extra = (set(found.triggers) | set(found.output_reserves)) - set(found.strategies)
    if extra:
        return f"has a trigger or output reserve for {sorted(extra)[0]!r}, which is none of its strategies"
    if PIPELINE in found.strategies:
        return f"redefines the strategy {PIPELINE!r}, which is the summary pipeline's"
    return None


def _rules(policy: Policy, name: str) -> StrategyRules:
    return StrategyRules(strategy=name, run=policy.strategies[name], trigger=policy.triggers.get(name),
                         output_reserve=policy.output_reserves.get(name), reinjects_todos=policy.reinjects_todos)


def build(found: list[tuple[str, str, Any]]) -> Registry:
    """The registry of ``found`` (origin, package, policy or error), in order: the first to claim a name keeps it."""
    problems: list[str] = []
    entries: list[Entry] = []
    presets: dict[str, tuple[Preset, Entry]] = {}
    strategies: dict[str, tuple[StrategyRules, Entry]] = {}
    for origin, package, policy in found:
        try:
            problem = _shape_problem(policy)
        except Exception as exc:  # a malformed plug-in is one line too, whatever it trips over
            problem = f"is malformed: {type(exc).__name__}: {exc}"
        if problem is None:
            taken = [name for name in (*(p.name for p in policy.presets), *policy.strategies)
                     if name in presets or name in strategies]
            if taken:
                problem = f"uses the name {taken[0]!r}, which an earlier policy already has"
        if problem is not None:
            problems.append(f"{origin} from {package}: {problem}")
            continue
        entry = Entry(policy, origin, package)
        entries.append(entry)
        presets.update((preset.name, (preset, entry)) for preset in policy.presets)
        strategies.update((name, (_rules(policy, name), entry)) for name in policy.strategies)
    registry = Registry(tuple(entries), presets, strategies, ())
    usable = [entry for entry in entries if _preset_problem(registry, entry) is None]
    problems += [f"{entry.origin} from {entry.package}: {_preset_problem(registry, entry)}"
                 for entry in entries if entry not in usable]
    return Registry(tuple(usable),
                    {name: value for name, value in presets.items() if value[1] in usable},
                    {name: value for name, value in strategies.items() if value[1] in usable},
                    tuple(problems))


def _preset_problem(registry: Registry, entry: Entry) -> str | None:
    """Why one of ``entry``'s presets does not give a config its strategy accepts, or None."""
    for preset in entry.policy.presets:
        try:
            values = registry.preset_values(preset.name)
            cfg = CompressionConfig(**{key.partition(".")[2]: value for key, value in values.items()})
            registry.validate(cfg)
        except ConfigError as exc:
            return f"preset {preset.name}: {exc}"
        except Exception as exc:  # its own check failed rather than refused
            return f"preset {preset.name}: {type(exc).__name__}: {exc}"
    return None


@cache
def registry() -> Registry:
    """The policies of this installation, read once per process (``refresh`` reads them again)."""
    return build([*_builtin(), *_plugins()])


def refresh() -> Registry:
    """Read the policies again: after installing a plug-in, or adding a module to the package's path."""
    registry.cache_clear()
    return registry()
