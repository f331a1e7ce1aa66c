"""The compaction zoo: presets that compact the way other coding agents do, each read from its source.

Claude Code and Anthropic's API tool-result clearing are not open source:
their two presets follow Anthropic's published documentation instead, and
reproduce only what it states (``docs/presets.md`` says what it leaves out).

Each preset names a zoo strategy (``hermeslab.context.zoo``), which brings
both what the agent does at a compaction and its trigger rule
(``hermeslab.context.zoo_triggers``); ``compression.threshold`` is the one
fraction that rule uses. The sources, commits and the file and line of every
number are in ``docs/presets.md``. Fidelity is by reading those sources
(TypeScript and Rust that cannot run here), not by running them.

None of these agents switches compaction off after failures, so hermeslab's
anti-thrash breaker is set out of reach and the no-summary cooldown to zero;
each rebuilds its context in place, so the session is not rotated.
"""

from __future__ import annotations

from typing import Any

CODEX = "codex-cli-0100b10"
GEMINI = "gemini-cli-0.56.0-nightly.20260806"
OPENCODE = "opencode-1.1.59"
ROO = "roo-code-3.52.1"
CLAUDE_CODE = "claude-code-docs-2026-08-22"
CLEAR_TOOL_USES = "anthropic-clear-tool-uses-20250919"

#: The ``compression.strategy`` values these presets add (each a key of ``hermeslab.context.zoo.ZOO_STRATEGIES``).
STRATEGIES = ("codex_user_messages", "gemini_state_snapshot", "opencode_prune_summary", "roo_condense",
              "claude_code_summary", "anthropic_clear_tool_uses")

#: A breaker limit no conversation reaches.
NEVER_SWITCH_OFF = 1_000_000_000

_COMMON: dict[str, Any] = {
    "compression.min_threshold_tokens": 0,
    "compression.small_window_limit": None,
    "compression.min_saving": 0.0,
    "compression.ineffective_limit": NEVER_SWITCH_OFF,
    "compression.abort_cooldown_seconds": 0.0,
    "compression.in_place": True,
}

#: (strategy, trigger fraction) per preset.
_POLICIES: dict[str, tuple[str, float]] = {
    # Codex: compacts at (context_window * 9) / 10 tokens.
    CODEX: ("codex_user_messages", 0.9),
    # Gemini CLI: DEFAULT_COMPRESSION_TOKEN_THRESHOLD = 0.5 of the model's token limit.
    GEMINI: ("gemini_state_snapshot", 0.5),
    # opencode: the whole window less the output reserve.
    OPENCODE: ("opencode_prune_summary", 1.0),
    # Roo Code: autoCondenseContextPercent defaults to 100.
    ROO: ("roo_condense", 1.0),
    # Claude Code docs: with no auto-compact window set, it compacts when the conversation reaches the
    # model's context limit; the fraction stands for an auto-compact window set below it.
    CLAUDE_CODE: ("claude_code_summary", 1.0),
    # Anthropic API: the trigger is in tokens, not a share of the window (see _ABSOLUTE).
    CLEAR_TOOL_USES: ("anthropic_clear_tool_uses", 1.0),
}

#: Input tokens ``clear_tool_uses_20250919`` waits for the prompt to exceed by default (its ``trigger``).
CLEAR_TOOL_USES_TRIGGER = 100_000

#: Presets whose trigger is a token count, carried in ``compression.min_threshold_tokens``.
_ABSOLUTE: dict[str, int] = {CLEAR_TOOL_USES: CLEAR_TOOL_USES_TRIGGER}

#: Name → (where the policy comes from, one line on what it does), for ``hermeslab presets``.
PRESET_NOTES: dict[str, tuple[str, str]] = {
    "seed": ("hermeslab", "Hermes's four-phase summary pipeline with hermeslab's fixes; fires at 50% of the "
                          "window, floored at 64K tokens, never above 80% of the window."),
    "hermes-0.19": ("Hermes Agent 0.19.0 (hermes-agent on PyPI)",
                    "Hermes's own decisions, faults included: head, pruned middle summarised, token-budget tail."),
    CODEX: ("openai/codex @ 0100b103 (compact.rs), 8db07003 (openai_models.rs)",
            "at 90% of the window: keep the user's own messages up to 20,000 tokens, then the summary; "
            "drop everything else."),
    GEMINI: ("google-gemini/gemini-cli @ 5411f113",
             "at 50% of the window: shorten old tool outputs past 50,000 tokens, keep the newest ~30% from a "
             "user message on, summary as a user message plus an acknowledgement."),
    OPENCODE: ("anomalyco/opencode (sst/opencode) @ fd78ec63",
               "at the window less the output reserve: clear tool outputs past the newest 40,000 tokens "
               "(if over 20,000 freed), then replace everything with a summary."),
    ROO: ("RooCodeInc/Roo-Code @ cb836567",
          "at 100% of the window or past 90% less the output reserve: replace everything with one summary; "
          "if that fails, hide the older half of the messages."),
    CLAUDE_CODE: ("Anthropic's docs, code.claude.com/docs/en/model-config and context-window, 2026-08-22 "
                  "(Claude Code v2.1.240)",
                  "at the whole window: replace everything after the system prompt with one summary "
                  "(the documented clearing of older tool outputs first is left out: no rule published)."),
    CLEAR_TOOL_USES: ("Anthropic's docs, platform.claude.com/docs/en/build-with-claude/context-editing, "
                      "2026-08-22",
                      "once the prompt exceeds 100,000 tokens: replace every tool result but the newest 3 "
                      "with a placeholder; calls stay, nothing is summarised."),
}


def zoo_presets(seed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo presets as full override lists laid over ``seed``."""
    presets: dict[str, dict[str, Any]] = {}
    for name, (strategy, threshold) in _POLICIES.items():
        presets[name] = {**seed, **_COMMON, "compression.preset": name, "compression.strategy": strategy,
                         "compression.threshold": threshold}
        if name in _ABSOLUTE:
            presets[name]["compression.min_threshold_tokens"] = _ABSOLUTE[name]
    return presets


def describe_presets(presets: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(name, source, one line on its policy) for every preset, in the order given."""
    rows = []
    for name, values in presets.items():
        source, policy = PRESET_NOTES.get(name, ("", ""))
        if not policy:
            strategy = values.get("compression.strategy", "summary")
            events = values.get("compression.trigger_events")
            when = (f"past {events} events" if events else f"at {values.get('compression.threshold')} of the window")
            source = source or "see docs/presets.md"
            policy = f"strategy {strategy}, fires {when}"
        rows.append((name, source, policy))
    return rows
