"""The compression pipeline's settings: every knob, and the switches between Hermes's behaviour and a fix.

Kept apart from the rest of the configuration because it is the part a study
varies: presets (``hermeslab.policies``) are full lists of these values. Which
strategies exist is the policies' business; the checks here are the schema's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError


@dataclass
class CompressionConfig:
    """Every knob of the compression pipeline, so an A/B run can name what it changed.

    The defaults are the ``seed`` preset; ``hermeslab.policies.hermes`` holds the
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
    min_trigger_ratio: float = 0.80
    #: The trigger never sits above this share of the effective window (None: no ceiling, as in
    #: Hermes, whose 64K floor fires at up to 98% of windows just above it).
    max_trigger_ratio: float | None = 0.80
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
    summary_context_share: float = 0.10
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
    #: ``summary`` (the 4-phase pipeline) or a strategy a policy brings (``hermeslab presets`` lists them).
    strategy: str = "summary"
    #: Also compress before any call whose context holds more than this many events (a tool call, a
    #: tool result or any other message counts one); None: tokens alone decide.
    trigger_events: int | None = None
    #: Events at the head that strategies counting events never forget.
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
    #: user message left out is re-inserted after the summary; a walk that would leave less to
    #: summarise than the smallest summary keeps the plain budget instead (Hermes fault: an
    #: 8-message floor or an old user message can hold more than a small window).
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
    #: After a refusal as too large that compressing did not change, ask once more when the count
    #: says the prompt fits (the refusal may not have been about this prompt's size); off, the turn
    #: ends there, as Hermes ends it ("cannot compress further") without compressing the same
    #: history again.
    retry_overflow_that_fits: bool = True
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
    #: Write Hermes 0.19.0's own texts (summary frame, merged-summary lines, duplicate and
    #: removed-call markers, tool one-liners, task-snapshot line) where hermes-agent 0.19.0 is
    #: installed, read from it at run time (``hermeslab.context.hermes_texts``); without it, or
    #: off, hermeslab's wording. Reports name the wording a run used (``hermes_texts``).
    hermes_texts: bool = False
    #: Send, and estimate before sending (the pressure check), the conversation as Hermes does:
    #: every text content stripped of surrounding white space and tool-call arguments
    #: re-serialised as compact JSON with sorted keys (the transcript itself keeps them as they
    #: were); off, the transcript is sent as it is, the model's own bytes.
    normalise_requests: bool = False
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
    # ---- lean-era Hermes switches (seed value first; each is off or absent in seed and hermes-0.19)
    #: ``ratio`` (the tail is ``target_ratio`` of the trigger) or ``lean`` (2.5% of the window, clamped to
    #: 10,000..25,000 tokens, ``context.lean_tail``), Hermes's ``compression.tail_mode``.
    tail_mode: str = "ratio"
    #: The verbatim tail, and how far the tail walk may overshoot it, never take more than this share of the
    #: window (None: no such cap); Hermes caps both tail modes at 0.20.
    tail_max_context_share: float | None = None
    #: The trigger never sits above this many tokens (nor above the window): Hermes's
    #: ``compression.threshold_tokens`` cap; None: the fractions alone decide.
    max_threshold_tokens: int | None = None
    #: When the ``min_threshold_tokens`` floor is what sets the trigger, it is lowered to this share of
    #: the window, but never below the fraction's own value (Hermes's later 85% rule); None: no such rule.
    floor_trigger_ratio: float | None = None
    #: Every summary ends with the anchor index, the summarised turns' user messages verbatim and a pointer
    #: to the session's history (``context.lean_summary``).
    lean_summary_sections: bool = False
    #: A summariser input over 160,000 characters is sampled evenly, whole records from every region with
    #: the gaps marked (``context.record_sampling``), rather than cut per message only.
    summary_input_sampling: bool = False
    #: Long tool results in the verbatim tail older than its newest six rounds of tool calls become a stub.
    demote_stale_tail_tools: bool = False
    #: Cooldowns (seconds) after the 1st, 2nd, 3rd and later consecutive compactions without a summary,
    #: the streak kept in ``CompressionState``; None: ``abort_cooldown_seconds`` after each.
    failure_cooldown_ladder: list[float] | None = None
    #: When the summary call fails: ``always`` takes the summariser's deterministic fallback summary;
    #: ``after_repeated_stall`` keeps the transcript instead on a terminal failure (auth, quota, network,
    #: overload, empty answer) and on a first stall, and takes the fallback on a stall after a stall or any
    #: other failure (``context.failure_ladder``).
    fallback_summary_rule: str = "always"
    #: Measure the prompt for every automatic trigger as the provider's last reading (prompt plus
    #: completion) plus an estimate of only the messages added since; with no such reading, an estimate
    #: over the threshold waits one request for one (unless the provider reports no usage).
    usage_anchor: bool = False
    #: A verbatim tail of exactly this many tokens instead of the derived one: neither ``tail_mode`` nor
    #: ``tail_max_context_share`` sizes it, and the walk's overshoot, capped at that share, never falls
    #: below it (Hermes's eval sets ``tail_token_budget`` on the compressor this way); None: derived.
    fixed_tail_tokens: int | None = None
    #: Lean summaries end with the pointer to the session's history and lean tail stubs name
    #: ``session_search``; off, neither is written (Hermes writes both only when the compressor knows its
    #: session id, which its eval's ``current`` arm does not).
    history_pointers: bool = True


_CHOICES = {
    "estimator": ("tiktoken", "rough"),
    "missing_results": ("stub", "drop"),
    "summariser": ("llm", "extractive"),
    "tail_mode": ("ratio", "lean"),
    "fallback_summary_rule": ("always", "after_repeated_stall"),
}


def validate_values(cfg: CompressionConfig) -> None:
    """Raise ConfigError naming the first value no strategy can use (the strategy's own needs are its policy's)."""
    for key, allowed in _CHOICES.items():
        value = getattr(cfg, key)
        if value not in allowed:
            raise ConfigError(f"compression.{key}: expected one of {', '.join(allowed)}, got {value!r}")
    if not isinstance(cfg.strategy, str) or not cfg.strategy:
        raise ConfigError(f"compression.strategy: expected a strategy name, got {cfg.strategy!r}")
    for key in ("threshold", "small_window_threshold", "min_trigger_ratio", "target_ratio", "summary_ratio",
                "summary_context_share"):
        value = getattr(cfg, key)
        if not 0 < value <= 1:
            raise ConfigError(f"compression.{key}: expected a fraction in (0, 1], got {value!r}")
    ceiling = cfg.max_trigger_ratio
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float))
                                or not 0 < ceiling <= 1):
        raise ConfigError(f"compression.max_trigger_ratio: expected a fraction in (0, 1] or null, got {ceiling!r}")
    if not 0 <= cfg.min_saving < 1:
        raise ConfigError(f"compression.min_saving: expected a fraction in [0, 1), got {cfg.min_saving!r}")
    if cfg.soft_tail_factor < 1:
        raise ConfigError(f"compression.soft_tail_factor: must be at least 1, got {cfg.soft_tail_factor!r}")
    for key in ("protect_first_n", "protect_last_n", "tail_floor_cap", "min_threshold_tokens", "prune_min_chars",
                "shrink_args_over", "shrink_leaf_chars", "summary_min_tokens", "summary_max_tokens",
                "max_overflow_attempts"):
        value = getattr(cfg, key)
        if value < 0:
            raise ConfigError(f"compression.{key}: must not be negative, got {value!r}")
    limit = cfg.trigger_events
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"compression.trigger_events: expected a positive integer or null, got {limit!r}")
    if cfg.keep_first_events < 0:
        raise ConfigError(f"compression.keep_first_events: must not be negative, got {cfg.keep_first_events!r}")
    if cfg.ineffective_limit < 1:
        raise ConfigError(f"compression.ineffective_limit: must be at least 1, got {cfg.ineffective_limit!r}")
    if cfg.small_window_limit is not None and (isinstance(cfg.small_window_limit, bool)
                                               or not isinstance(cfg.small_window_limit, int)):
        raise ConfigError(f"compression.small_window_limit: expected an integer or null, got {cfg.small_window_limit!r}")
    _validate_lean_values(cfg)


def _validate_lean_values(cfg: CompressionConfig) -> None:
    """The lean-era switches: shares in (0, 1] or null, positive token counts or null, a non-empty ladder of waits."""
    for key in ("tail_max_context_share", "floor_trigger_ratio"):
        value = getattr(cfg, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1):
            raise ConfigError(f"compression.{key}: expected a fraction in (0, 1] or null, got {value!r}")
    for key in ("max_threshold_tokens", "fixed_tail_tokens"):
        value = getattr(cfg, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"compression.{key}: expected a positive integer or null, got {value!r}")
    ladder = cfg.failure_cooldown_ladder
    if ladder is not None and (not isinstance(ladder, (list, tuple)) or not ladder or any(
            isinstance(step, bool) or not isinstance(step, (int, float)) or step < 0 for step in ladder)):
        raise ConfigError(f"compression.failure_cooldown_ladder: expected a non-empty list of non-negative "
                          f"seconds or null, got {ladder!r}")
