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
class CompressionConfig:
    """Every knob of the compression pipeline, so an A/B run can name what it changed.

    The defaults are the ``seed`` preset; ``hermeslab.core.presets`` holds the
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
    #: Also compress before any call whose context holds more than this many events (a tool call, a
    #: tool result or any other message counts one; OpenHands' ``max_size``); None: tokens alone decide.
    trigger_events: int | None = None
    #: Events at the head the ``openhands_*`` strategies never forget (OpenHands' ``keep_first``).
    keep_first_events: int = 0
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
    #: rather than summarising it with its turn (Hermes drops it from the verbatim context);
    #: a request behind a summary merged ahead of it counts as the latest one (Hermes looks
    #: past it to an older request), and a request put back after a user-role summary is
    #: merged into it rather than left as a second user message in a row.
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
    #: Size the verbatim tail from the threshold minus what every request carries anyway
    #: (system prompt, tool schemas); Hermes sizes it from the whole threshold, so with a
    #: large fixed cost its compressions leave the prompt at the threshold.
    tail_after_fixed_cost: bool = True
    #: Messages between the head and an earlier summary inside the summarised range are
    #: summarised with the rest (Hermes summarises only what follows that summary, so those
    #: messages leave the context without a trace).
    summarise_whole_span: bool = True
    #: When the provider refuses a prompt and compressing cannot bring it under the window,
    #: drop the oldest turns, then cut the longest texts with a marker, so the turn goes on
    #: (Hermes ends the turn: "cannot compress further").
    fit_on_overflow: bool = True
    #: ``max_overflow_attempts`` counts refusals since the last answered call, so a long turn
    #: that outgrows the window again later gets its allowance back (Hermes: per user turn).
    overflow_allowance_per_call: bool = True
    #: The system message goes through the pipeline as the head's first message (it can take a
    #: note, and with an empty head the summary is merged into the next message); off, it is
    #: held apart and put back unchanged, as Hermes's agent never hands it to compress().
    system_in_pipeline: bool = True
    #: A latest real user message the boundary summarised is put back after the summary; off,
    #: only a result left with no real user message at all gets the latest one back, before
    #: the first assistant message not already preceded by a user turn (Hermes's agent wrapper).
    reinsert_latest_user: bool = True
    #: A compression whose estimate is not below its input's is refused (the input, or its
    #: pruned copy, comes back); off, it is applied as Hermes applies any compress() output.
    refuse_no_gain: bool = True
    #: The anti-thrash breaker and the no-summary cooldown also refuse overflow compressions,
    #: so a refused prompt then ends the turn (Hermes's wrapper gates every automatic entry);
    #: off, an overflow is always compressed, since ending the turn is worse than a strike.
    overflow_obeys_breaker: bool = False
    #: A provider reading under the threshold re-arms automatic compression after the breaker
    #: tripped (Hermes: its ineffective count resets); off, it stays off until /compress or /new.
    breaker_rearms: bool = False
    #: Frame summaries with hermeslab's short opening and closing line; on, with the longer
    #: ones sized like Hermes's (1,632 + 84 characters against 673 + 67), so a summary costs
    #: what Hermes's costs in every later budget decision (the wording stays hermeslab's).
    long_summary_frame: bool = False
    #: Replace the summary's "Historical Task Snapshot" section with the newest real user
    #: request of the summarised span, quoted, up to 1,400 characters (Hermes grounds every
    #: model summary this way; seed leaves the section as the summariser wrote it).
    ground_task_snapshot: bool = False
    #: Apply a result exactly when it differs from its input (Hermes): a pruned copy with nothing to
    #: summarise too, and one equal to its input is no compaction; off, when it summarised messages.
    apply_any_change: bool = False
    #: Strike at once a compaction that removed no message or saved under ``min_saving``; off, one that
    #: inserted a summary is judged by the next prompt reading alone (Hermes).
    judge_by_estimate: bool = True
    #: A summary merged into a message goes behind its own text, under a header (Hermes's layout, our
    #: words at its length); off, ahead of it, so its closing line points at the text to answer.
    merged_summary_last: bool = False
    #: A reply without usage right after a compaction settles its verdict unjudged, and the per-turn
    #: check then uses the rough estimate of messages and tool schemas (Hermes); off, both wait.
    usage_gap_settles_verdict: bool = False
    #: The summary fits the window it must live in: its budget is at most half the span it
    #: replaces and half the room the threshold leaves beside the fixed cost and the tail; the
    #: summariser is told the window, caps its output by what its prompt leaves, and a refusal of
    #: its own request as too large shortens its input and asks again (Hermes: a budget of at
    #: least 2,000 tokens whatever the window, and an overflow is an ordinary failure that cools
    #: the route down).
    summary_fits_window: bool = True
    #: When no summary can make a compression gain (the room is below a useful summary, the
    #: summary would not shrink the context, or none could be had at the size the window allows),
    #: the summarised range is dropped instead, counted in the record (``dropped_oldest``), rather
    #: than the attempt refused (Hermes applies whatever compress() returns).
    drop_when_summary_cannot_fit: bool = True
    #: A compression that found nothing to summarise counts as ineffective for the anti-thrash
    #: breaker (Hermes strikes every no-op, so fixed costs over the threshold switch automatic
    #: compression off for the conversation); off, it is logged and only repeated once the
    #: history has changed.
    strike_when_nothing_to_summarise: bool = False
    #: A turn that failed before any answer takes its user messages back out of the context (the
    #: log keeps them), so the next turn does not follow them with a second user message (Hermes
    #: keeps them, and compresses them with the next turn's).
    withdraw_unanswered_input: bool = True
    # ---- trigger switches (seed value first; hermes-0.19 sets Hermes's agent behaviour)
    #: After a compression the pressure check waits for the provider's reading of the compressed
    #: prompt; on, the preflight and pressure checks defer as Hermes does instead: while that
    #: reading is awaited, and while the last reading fit under the threshold and the rough
    #: estimate grew at most max(4,096, 5% of the threshold) since the prompt it measured.
    defer_to_real_usage: bool = False
    #: The pressure check also runs before the turn's first call (Hermes checks every call).
    pressure_every_call: bool = False
    #: Pressure compressions use the turn's overflow allowance (``max_overflow_attempts``),
    #: the one per-turn counter Hermes's agent shares between them and the overflow path.
    pressure_counts_against_overflow: bool = False
    #: Preflight estimates only when the history is longer than protect_first_n +
    #: protect_last_n + 1 messages or its messages alone reach the threshold (Hermes's cheap check).
    preflight_gate: bool = False
    #: Preflight counts the system prompt as its text's chars/4, apart from the messages
    #: (Hermes's request estimate), rather than as one more message of the list.
    preflight_system_as_text: bool = False
    #: The summariser also gets the span before pruning and the messages that stay, so the facts
    #: it keeps come from whole tool results and skip those still in the context (Hermes hands it
    #: the pruned span alone).
    summary_fact_context: bool = True


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
        """A Config from nested settings; ``compression.preset`` supplies every compression value not given."""
        data = data or {}
        preset = _preset_of(data)
        if preset is None:
            return _build(cls, data, "")
        _build(cls, data, "")  # a bad key or value is reported against the settings as written
        return _build(cls, _merged(_preset_values(preset), data), "")

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
        """A copy with dotted keys replaced, e.g. ``{"compression.threshold": 0.6}``.

        A ``compression.preset`` among them is applied first (every compression
        value from that preset), then the other keys, whatever their order.
        """
        data = self.to_dict()
        preset = overrides.get("compression.preset")
        if preset is not None:
            data = _merged(data, {"compression": _preset_values(preset)["compression"]})
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


def load_config(source: "Config | str | Path | None" = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """The one way a configuration is resolved, from whatever names it, with ``overrides`` applied last.

    ``source`` is a Config, a YAML file, a preset name (``seed``, ``hermes-0.19``),
    or ``BASE,key=value,...`` text: at most one comma-separated part without
    ``=`` is the base (a preset or a file), the others dotted overrides read as
    YAML scalars. None means the defaults (the ``seed`` preset).
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
    config = config.with_overrides(overrides) if overrides else config
    from .presets import validate_compression_config

    validate_compression_config(config.compression)
    return config


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
            raise ConfigError(f"the value of {key} is not valid YAML: {exc}") from None
    return overrides


def _from_spec(spec: str) -> Config:
    from .presets import PRESETS

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
                raise ConfigError(f"config {spec!r}: cannot read the value of {key.strip()!r}: {exc}") from None
        elif base is None:
            base = part
        else:
            raise ConfigError(f"config {spec!r} names two bases ({base!r} and {part!r}); give one preset or file")
    if base is None or base in PRESETS:
        config = Config().with_overrides({"compression.preset": base or "seed"})
    elif Path(base).is_file():
        config = _from_yaml_file(Path(base))
    else:
        raise ConfigError(f"config {spec!r}: {base!r} is neither a preset ({', '.join(PRESETS)}) nor a YAML file")
    return config.with_overrides(overrides)


def _from_yaml_file(path: Path) -> Config:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    return Config.from_yaml(path)


def _preset_of(data: Mapping[str, Any]) -> str | None:
    compression = data.get("compression")
    return compression.get("preset") if isinstance(compression, Mapping) else None


def _preset_values(name: Any) -> dict[str, Any]:
    """The nested settings preset ``name`` gives, over the defaults; ConfigError naming the known ones."""
    from .presets import PRESETS

    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"unknown compression preset {name!r} (known: {', '.join(sorted(PRESETS))})")
    data = dataclasses.asdict(Config())
    for dotted, value in PRESETS[name].items():
        section, key = dotted.split(".")
        data[section][key] = value
    return data


def _merged(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` laid over ``base``, section by section."""
    out = dict(base)
    for key, value in top.items():
        out[key] = _merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
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
