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


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; names the dotted key."""


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


@dataclass
class CompressionConfig:
    """Every knob of the compression pipeline, so an A/B run can name what it changed.

    The defaults are the ``seed`` preset; ``hermeslab.context.presets`` holds the
    ``hermes-0.19`` values that reproduce Hermes Agent 0.19.0's decisions. Fields
    below the "behaviour switches" line choose between Hermes's behaviour and a
    fix for one of its known faults; each names the fault it addresses.
    """

    enabled: bool = True
    #: Named preset the other values started from (``seed`` or ``hermes-0.19``).
    preset: str = "seed"
    #: Fraction of the effective window at which automatic compression fires.
    threshold: float = 0.50
    #: Threshold floor in tokens (64K in both presets); see context.budget for the small-window rule.
    min_threshold_tokens: int = 64_000
    #: Windows below this get their threshold raised to ``small_window_threshold`` (None: no such rule).
    small_window_limit: int | None = None
    small_window_threshold: float = 0.75
    #: When the floor would reach the whole window, trigger at this share of it instead.
    min_trigger_ratio: float = 0.85
    #: Share of the threshold kept verbatim as the tail (clamped to 0.10..0.80).
    target_ratio: float = 0.20
    #: The tail walk may overshoot the tail budget by this factor before it stops.
    soft_tail_factor: float = 1.5
    #: Non-system messages at the head kept verbatim on the first compression.
    protect_first_n: int = 3
    #: Message-count floor of the region the prune phase leaves alone.
    protect_last_n: int = 20
    #: Cap on the message-count floor of the verbatim tail.
    tail_floor_cap: int = 8
    #: ``tiktoken`` (cl100k counts) or ``rough`` (Hermes's chars/4 estimates) for every budget decision.
    estimator: str = "tiktoken"
    #: Prune: tool results shorter than this are never deduplicated or described in one line.
    prune_min_chars: int = 200
    #: Prune: tool-call arguments longer than this get their long string leaves shortened ...
    shrink_args_over: int = 500
    #: ... to this many characters each.
    shrink_leaf_chars: int = 200
    #: Summary budget = clamp(summary_ratio * summarised tokens, summary_min_tokens, cap) where
    #: cap = min(summary_context_share * context_length, summary_max_tokens).
    summary_ratio: float = 0.20
    summary_min_tokens: int = 2_000
    summary_max_tokens: int = 12_000
    summary_context_share: float = 0.05
    #: Optional separate model for summaries (falls back to the main model once).
    summary_model: str | None = None
    #: ``llm`` (the conversation's provider) or ``extractive`` (deterministic, no call).
    summariser: str = "llm"
    #: A compression saving less than this share is ineffective.
    min_saving: float = 0.10
    #: Consecutive ineffective compressions that switch automatic compression off.
    ineffective_limit: int = 2
    #: Seconds automatic compression waits after a compression that produced no summary.
    abort_cooldown_seconds: float = 60.0
    #: Compressions a hard context overflow may trigger within one user turn.
    max_overflow_attempts: int = 3
    #: True: archive rows in place; False: rotate to a child session.
    in_place: bool = False
    #: ``summary`` (the 4-phase pipeline), ``observation_masking`` or ``sliding_window``.
    strategy: str = "summary"
    #: Keep a pinned list of entities from every compressed span.
    anchors: bool = False
    #: Redact secrets in summaries and in the log.
    redact: bool = True

    # ---- behaviour switches (seed value first; hermes-0.19 reproduces the fault)
    #: Look for an existing handoff summary before sizing the protected head, so it is
    #: folded into the new summary instead of kept beside it (Hermes fault: two summaries).
    summary_aware_head: bool = True
    #: Keep the last assistant reply in the tail only when that fits the soft tail budget
    #: (Hermes fault: an old reply pulls a whole tool-only run into the tail).
    cap_reply_anchor: bool = True
    #: The tail's message-count floor and the latest-user anchor give way to the soft token
    #: budget; only the newest assistant/tool group is kept whatever it costs, and a latest
    #: user message left out is re-inserted after the summary (Hermes fault: an 8-message
    #: floor or an old user message can hold more than a small window).
    fit_tail_to_budget: bool = True
    #: When the latest real user message sits right after the head, keep it in the head
    #: rather than summarising it with its turn (Hermes drops it from the verbatim context).
    keep_latest_user: bool = True
    #: Prune passes may rewrite the protected head (Hermes) or leave it byte-identical.
    prune_head: bool = False
    #: An aborted compression returns the input untouched (Hermes returns the pruned copy).
    abort_keeps_original: bool = True
    #: Quote the task that opened the conversation in every summary that would lose it.
    keep_original_task: bool = True
    #: Tool calls whose results fell out of the context: ``stub`` (answer them with a
    #: pointer to the summary) or ``drop`` (remove the call, as Hermes does).
    missing_results: str = "stub"
    #: Append a note about the compaction to the system prompt (Hermes); off keeps the
    #: system prompt byte-identical for prompt caching.
    system_note: bool = False
    #: Replace images in every message before the last image-bearing user message (Hermes).
    strip_old_images: bool = False
    #: Re-serialise long tool-call arguments even when no value was cut (Hermes): it only
    #: changes whitespace, and lengthens compact JSON.
    rewrite_unshrunk_args: bool = False
    #: Deduplication back-references name the later call that holds the output; off, they
    #: say only "a later call" and are as long as Hermes's, which its budget walk counts.
    name_duplicate_source: bool = True


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
    #: The lab database. None: ``.hermeslab/lab.duckdb`` under the current directory.
    path: str | None = None
    enabled: bool = True


@dataclass
class MemoryConfig:
    memory_enabled: bool = True
    user_profile_enabled: bool = True
    memory_char_limit: int = 2_200
    user_char_limit: int = 1_375
    nudge_interval: int = 10


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
    #: Failed attempts at an overloaded, timing-out or rate-limited provider before a fallback takes over.
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
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)

    # ------------------------------------------------------------ loading

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Config":
        return _build(cls, data or {}, "")

    @classmethod
    def from_yaml(cls, path: str | Path) -> "Config":
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        """A copy with dotted keys replaced, e.g. ``{"compression.threshold": 0.6}``."""
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
        data["store"] = {}
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


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
