"""Configuration as dataclasses, loadable from YAML with Hermes's key names.

``model.context_length``, ``compression.threshold``, ``compression.target_ratio``
and friends mean what they mean in Hermes's ``config.yaml``; unknown keys are
errors (a typo must not silently fall back to a default in an experiment).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .compression_config import CompressionConfig
from .errors import ConfigError
from .mcp_config import MCPServerConfig


@dataclass
class ModelConfig:
    #: Model name sent to the provider. ``offline`` is the embedded deterministic model.
    name: str = "hermeslab-offline"
    #: OpenAI-compatible endpoint. None with no api_key means: start the local server.
    base_url: str | None = None
    api_key: str | None = None
    #: Context window in tokens.
    context_length: int = 65_536
    #: Output cap sent with each request (None: provider default).
    max_tokens: int | None = None
    temperature: float | None = None
    #: Seconds before the HTTP client gives up on one call.
    timeout: float = 120.0
    #: ``tool_choice`` sent when tools are offered: auto, none or required; null (or omit) sends none, leaving
    #: the server's default, which at some servers means the tools are ignored.
    tool_choice: str | None = "auto"

    def __post_init__(self) -> None:
        if self.tool_choice not in (None, "auto", "none", "required", "omit"):
            raise ConfigError(f"model.tool_choice: expected auto, none, required or omit (null), "
                              f"got {self.tool_choice!r}")


@dataclass
class TerminalConfig:
    enabled: bool = False
    timeout: float = 30.0
    max_output_chars: int = 20_000


@dataclass
class ToolsConfig:
    #: Root that file tools are confined to (None: the current directory).
    workspace: str | None = None
    terminal: TerminalConfig = field(default_factory=TerminalConfig)
    #: Retries for tools declared idempotent when they fail transiently.
    idempotent_retries: int = 2


@dataclass
class AgentConfig:
    #: Model calls allowed in one user turn before the loop stops.
    max_iterations: int = 30
    #: Plain retries of a failed API call.
    api_max_retries: int = 3
    #: Ask the model to check its answer against the context before finishing.
    self_check: bool = False
    system_prompt: str | None = None
    stream: bool = True


@dataclass
class StoreConfig:
    #: The lab database. None: ``lab.duckdb`` in ``$HERMESLAB_HOME``, else in ``.hermeslab`` here (``hermeslab.home``).
    path: str | None = None
    enabled: bool = True


@dataclass
class MemoryConfig:
    """MEMORY.md / USER.md, the background review and the external memory provider (``hermeslab.memory``)."""

    memory_enabled: bool = True
    user_profile_enabled: bool = True
    memory_char_limit: int = 2_200
    user_char_limit: int = 1_375
    #: User turns between background memory reviews (0: no review).
    nudge_interval: int = 10
    #: Folder of MEMORY.md and USER.md (None: the lab database's folder).
    path: str | None = None
    #: Model calls the background review may make.
    review_max_iterations: int = 16
    #: External memory provider: None, or ``lab`` (recall from other sessions in the lab database).
    provider: str | None = None
    #: Seconds the provider may take to recall context before a turn.
    prefetch_timeout: float = 8.0

    def __post_init__(self) -> None:
        if self.provider not in (None, "lab"):
            raise ConfigError(f"memory.provider: unknown provider {self.provider!r} (expected lab, or null for none)")
        for name in ("memory_char_limit", "user_char_limit", "review_max_iterations", "prefetch_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"memory.{name}: must be positive, got {getattr(self, name)}")
        if self.nudge_interval < 0:
            raise ConfigError(f"memory.nudge_interval: must be 0 (off) or positive, got {self.nudge_interval}")


@dataclass
class SkillsConfig:
    """Skills: Markdown procedures the agent saves and the system prompt lists."""

    enabled: bool = True
    #: Folder of the skill files (None: ``skills/`` beside the memory files).
    path: str | None = None
    #: Model calls between background skill reviews (0: no review).
    creation_nudge_interval: int = 10
    #: Longest skill body in characters.
    max_chars: int = 20_000

    def __post_init__(self) -> None:
        if self.creation_nudge_interval < 0:
            raise ConfigError("skills.creation_nudge_interval: must be 0 (off) or positive, "
                              f"got {self.creation_nudge_interval}")
        if self.max_chars <= 0:
            raise ConfigError(f"skills.max_chars: must be positive, got {self.max_chars}")


@dataclass
class RecoveryConfig:
    """How a failed or unusable model call is recovered (see ``hermeslab.recovery``).

    Retries per call come from ``agent.api_max_retries``; overflow compressions
    per turn from ``compression.max_overflow_attempts``.
    """

    #: Models tried in order when the primary cannot answer, each ``{model, base_url, api_key}``.
    fallback_providers: list[dict[str, Any]] = field(default_factory=list)
    #: Jittered exponential backoff: ``min(base * 2**(n-1), cap)`` plus up to half of that again.
    backoff_base: float = 2.0
    backoff_cap: float = 60.0
    #: Longest ``Retry-After`` honoured, in seconds.
    retry_after_cap: float = 600.0
    #: Failed attempts at an overloaded, timing-out or unreachable provider before a fallback takes over (a rate
    #: limit falls back at the first failure once no credential refresh is left, as Hermes does).
    fallback_after: int = 2
    #: Continuation requests for a reply cut by the output limit (``finish_reason == "length"``).
    max_continuations: int = 3
    #: Re-requests of a reply whose tool-call arguments are not valid JSON.
    max_argument_retries: int = 2
    #: Empty replies: plain retries, and thinking-only replies continued as a prefill.
    max_empty_retries: int = 3
    max_prefills: int = 2

    def __post_init__(self) -> None:
        if self.fallback_providers is None:
            self.fallback_providers = []
        if not isinstance(self.fallback_providers, list):
            raise ConfigError("recovery.fallback_providers: expected a list of {model, base_url, api_key} entries")
        self.fallback_providers = [self._fallback_entry(entry, i) for i, entry in enumerate(self.fallback_providers)]
        for name in ("backoff_base", "backoff_cap", "retry_after_cap", "fallback_after", "max_continuations",
                     "max_argument_retries", "max_empty_retries", "max_prefills"):
            if getattr(self, name) < 0:
                raise ConfigError(f"recovery.{name}: must be zero or positive, got {getattr(self, name)}")

    @staticmethod
    def _fallback_entry(entry: Any, index: int) -> dict[str, Any]:
        where = f"recovery.fallback_providers[{index}]"
        keys = ("model", "base_url", "api_key")
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected a mapping with model, base_url and api_key, "
                              f"got {type(entry).__name__}")
        unknown = sorted(set(entry) - set(keys))
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected model, base_url, api_key)")
        if not isinstance(entry.get("model"), str) or not entry["model"]:
            raise ConfigError(f"{where}.model: a model name is required")
        for key in ("base_url", "api_key"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise ConfigError(f"{where}.{key}: expected text, got {entry[key]!r}")
        return {key: entry.get(key) for key in keys}


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)
    #: MCP servers by name; their tools join the built-in ones as ``<name>__<tool>``.
    mcp_servers: dict[str, MCPServerConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        servers = self.mcp_servers if self.mcp_servers is not None else {}
        if not isinstance(servers, Mapping):
            raise ConfigError(f"mcp_servers: expected a mapping of server names to settings, got {servers!r}")
        self.mcp_servers = {name: MCPServerConfig.from_mapping(name, entry) for name, entry in servers.items()}

    # ------------------------------------------------------------ loading

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Config":
        """A Config from nested settings, exactly as given: ``compression.preset`` is only a label here
        (``hermeslab.policies.loading`` lays a preset's values under the settings)."""
        return _build(cls, data or {}, "")

    @classmethod
    def from_yaml(cls, path: str | Path) -> "Config":
        return cls.from_dict(read_yaml_settings(path))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        """A copy with dotted keys replaced, e.g. ``{"compression.threshold": 0.6}``.

        A preset is more than its label: ``compression.preset`` is refused here
        and applied by ``hermeslab.policies.loading.with_overrides``.
        """
        if "compression.preset" in overrides:
            raise ConfigError("compression.preset names a preset: apply it with hermeslab.policies.loading "
                              "(apply_preset, with_overrides or load_config)")
        data = self.to_dict()
        for dotted, value in overrides.items():
            node = data
            parts = dotted.split(".")
            for part in parts[:-1]:
                if not isinstance(node.get(part), dict):
                    raise ConfigError(f"unknown config key {dotted!r}")
                node = node[part]
            if parts[-1] not in node:
                raise ConfigError(f"unknown config key {dotted!r}")
            node[parts[-1]] = value
        return Config.from_dict(data)

    def digest(self) -> str:
        """A short stable hash of the settings that change behaviour (secrets excluded)."""
        data = self.to_dict()
        data["model"].pop("api_key", None)
        for entry in data["recovery"]["fallback_providers"]:
            entry.pop("api_key", None)
        for server in data["mcp_servers"].values():
            server.pop("env")
            server.pop("headers")
        data["store"] = {}
        data["compression"].pop("preset")  # the values decide the engine; the name is only where they started
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def parse_overrides(words: list[str]) -> dict[str, Any]:
    """``["compression.threshold=0.6", "agent.stream=false"]`` → dotted keys with YAML-read values (commands)."""
    overrides: dict[str, Any] = {}
    for word in words:
        key, sep, raw = word.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"config expects key=value pairs such as compression.threshold=0.6, got {word!r}")
        try:
            overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"the value of {key} is not valid YAML: {yaml_problem(exc)}") from None
    return overrides


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A parser error in one line: where (line, column, counted from 1) and what, without the excerpt dump."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    started = (f" ({context} that starts at line {context_mark.line + 1}, column {context_mark.column + 1})"
               if context and context_mark is not None else "")
    return " ".join(f"{where}{problem}{started}".split())


def read_yaml_settings(path: str | Path) -> dict[str, Any]:
    """The settings in a YAML file (empty for an empty file); ConfigError for bad YAML or a top level not a mapping."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {yaml_problem(exc)}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data or {}


def merged(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` laid over ``base``, section by section."""
    out = dict(base)
    for key, value in top.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


_ALIASES = {"model.default": "name", "model.model": "name", "agent.max_turns": "max_iterations"}


def _build(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _ALIASES.get(f"{prefix}{raw_key}", raw_key)
        dotted = f"{prefix}{raw_key}"
        if key not in fields:
            raise ConfigError(f"unknown config key {dotted!r}")
        default = _default_of(fields[key])
        if dataclasses.is_dataclass(default):
            kwargs[key] = _build(type(default), value or {}, f"{dotted}.")
        else:
            kwargs[key] = _coerce(value, default, dotted)
    return cls(**kwargs)


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _coerce(value: Any, default: Any, dotted: str) -> Any:
    """Accept a value of the default's type (ints where floats go; None for optional keys)."""
    if value is None or default is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"{dotted}: expected true or false, got {value!r}")
    if isinstance(default, int):
        try:
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        except (TypeError, ValueError):
            raise ConfigError(f"{dotted}: expected an integer, got {value!r}") from None
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{dotted}: expected a number, got {value!r}") from None
    if isinstance(default, str):
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{dotted}: expected text, got {value!r}")
        return str(value)
    return value
