"""When to compress: thresholds, the anti-thrash breaker, cooldowns and hard overflows.

A pure state machine: it reads token counts and compression results and
answers yes or no. Time comes from an injected clock, and everything that must
outlive a session (streak, breaker, cooldown, pending verdict) lives in the
conversation's CompressionState, so rotating to a child session cannot reset
the breaker (Hermes resets it at every session boundary, so it never trips).

Triggers: ``preflight`` (start of a turn), ``pressure`` (before a model call),
``turn`` (after tool results), ``manual`` (/compress), ``overflow`` (the
provider rejected the prompt as too long). The automatic ones are gated;
``manual`` and ``overflow`` are never blocked by the breaker or a cooldown —
a hard overflow that is not compressed ends the turn, which is worse than a
compression judged ineffective (``overflow_obeys_breaker`` gates ``overflow``
as Hermes does; ``breaker_rearms`` lets a fitting reading re-arm the breaker).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from hermeslab.core.config import CompressionConfig

from .budget import Budgets
from .error_limits import parse_context_limit
from .failure_ladder import rung
from .openhands_view import event_count
from .pipeline import CompressionState

AUTOMATIC_TRIGGERS = frozenset({"preflight", "pressure", "turn"})
TRIGGERS = AUTOMATIC_TRIGGERS | {"manual", "overflow"}
#: A pass that leaves at least this share of the tokens made no progress.
PROGRESS_RATIO = 0.95
#: Compression passes one preflight may run.
PREFLIGHT_PASSES = 3


class CompactionOutcome(Protocol):
    """What the policy reads from a compression (CompressionResult and the baselines' results)."""

    messages: list[dict]
    tokens_before: int
    tokens_after: int
    aborted: bool
    condensed: int


@dataclass(frozen=True)
class PreflightPass:
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    progressed: bool
    result: Any


def made_progress(messages_before: int, tokens_before: int, messages_after: int, tokens_after: int) -> bool:
    """Fewer messages, or tokens under 95% of before: worth another pass or a retry."""
    return messages_after < messages_before or tokens_after < PROGRESS_RATIO * tokens_before


# ---------------------------------------------------------------- the policy


class CompressionPolicy:
    """Decides whether and when to compress one conversation."""

    def __init__(self, cfg: CompressionConfig, budgets: Budgets, state: CompressionState,
                 clock: Callable[[], float] = time.monotonic):
        self.cfg = cfg
        self.budgets = budgets
        self.state = state
        self.clock = clock
        #: Overflow compressions in the current user turn.
        self.overflow_attempts = 0
        #: Latest provider-reported prompt tokens (None before the first reading).
        self.last_prompt_tokens: int | None = None

    # ------------------------------------------------------------ gates

    def blocked_reason(self, trigger: str = "preflight") -> str | None:
        """Why ``trigger`` may not compress now, or None when it may."""
        if trigger not in TRIGGERS:
            raise ValueError(f"unknown trigger {trigger!r}; expected one of {', '.join(sorted(TRIGGERS))}")
        if not self.cfg.enabled:
            return "compression disabled"
        if trigger == "manual":
            return None
        if trigger == "overflow":
            if self.overflow_attempts >= self.cfg.max_overflow_attempts:
                return f"{self.overflow_attempts} overflow compressions already this turn"
            if not self.cfg.overflow_obeys_breaker:
                return None
        if self.state.auto_disabled:
            return "automatic compression switched off after repeated ineffective compressions"
        if self.state.cooldown_until is not None and self.clock() < self.state.cooldown_until:
            return "cooling down after a compression without a summary"
        return None

    def allows(self, trigger: str) -> bool:
        return self.blocked_reason(trigger) is None

    def should_compress(self, tokens: int, trigger: str = "preflight") -> bool:
        """True when ``tokens`` reach the threshold and ``trigger`` is not blocked (overflow: always the limit)."""
        if trigger == "overflow":
            return self.allows(trigger)
        return tokens >= self.budgets.threshold_tokens and self.allows(trigger)

    def over_events(self, messages: Sequence[dict]) -> bool:
        """True when ``messages`` hold more than ``trigger_events`` events and automatic compression may run."""
        limit = self.cfg.trigger_events
        return limit is not None and event_count(messages) > limit and self.allows("pressure")

    def begin_turn(self) -> None:
        """A new user turn: the overflow allowance starts again."""
        self.overflow_attempts = 0

    def reset_manual(self) -> None:
        """/compress or /new: the user takes over, so the breaker, streak and cooldown clear."""
        self.state.ineffective_streak = 0
        self.state.auto_disabled = False
        self.state.cooldown_until = None
        self.state.awaiting_usage = False
        self.state.failure_streak = self.state.stall_streak = 0
        self.state.user_asked = True

    # ------------------------------------------------------------ verdicts

    def _strike(self) -> None:
        self.state.ineffective_streak += 1
        if self.state.ineffective_streak >= self.cfg.ineffective_limit:
            self.state.auto_disabled = True

    def observe_prompt_tokens(self, prompt_tokens: int | None) -> None:
        """One provider reading of the prompt just sent (cache reads and writes included).

        Completion tokens are deliberately not counted: reasoning tokens are billed
        as completion but never replayed, so counting them would make thinking
        models compress early; replayed output shows up in the next prompt reading.
        A reading still at or above the threshold right after a compression is a
        strike; any reading below the threshold clears the streak.
        """
        awaited = self.state.awaiting_usage
        self.state.awaiting_usage = False
        if prompt_tokens is None or prompt_tokens <= 0:
            return
        self.last_prompt_tokens = prompt_tokens
        if prompt_tokens >= self.budgets.threshold_tokens:
            if awaited:
                self._strike()
        else:
            self.state.ineffective_streak = 0
            if self.cfg.breaker_rearms:
                self.state.auto_disabled = False

    def record(self, result: CompactionOutcome, trigger: str, *, changed: bool | None = None) -> dict:
        """Judge one finished compression; returns the verdict for the log.

        Ineffective: it replaced no message, or saved less than ``min_saving`` of
        the tokens. An effective one is judged again by the next prompt reading.
        Without ``judge_by_estimate`` a compaction that inserted a summary is
        judged by that reading alone, and ``changed`` False (the caller found the
        output equal to its input) arms no verdict at all (Hermes).
        An abort (no summary) starts a cooldown instead of counting as a strike:
        the cause is the summariser, not the conversation; with
        ``failure_cooldown_ladder`` each consecutive abort waits the next rung. Nor does an attempt
        that found nothing to summarise strike, unless ``strike_when_nothing_to_summarise``
        (Hermes): fixed costs over the threshold are no sign that compressing fails.
        """
        if trigger not in TRIGGERS:
            raise ValueError(f"unknown trigger {trigger!r}; expected one of {', '.join(sorted(TRIGGERS))}")
        if trigger == "overflow":
            self.overflow_attempts += 1
        reasons = []
        outcome = (getattr(result, "record", None) or {}).get("outcome")
        if outcome == "nothing_to_summarise" and not self.cfg.strike_when_nothing_to_summarise:
            return {"trigger": trigger, "ineffective": False, "reasons": ["nothing to summarise"],
                    "streak": self.state.ineffective_streak, "auto_disabled": self.state.auto_disabled}
        if result.aborted:
            self.state.failure_streak += 1
            stalled = ((getattr(result, "record", None) or {}).get("summary") or {}).get("failure_kind") == "stall"
            self.state.stall_streak = self.state.stall_streak + 1 if stalled else 0
            ladder = self.cfg.failure_cooldown_ladder
            wait = rung(self.state.failure_streak, ladder) if ladder else self.cfg.abort_cooldown_seconds
            self.state.cooldown_until = self.clock() + wait
            reasons.append("aborted")
        else:
            if result.condensed > 0:  # a compaction went through: the failure ladder starts again
                self.state.failure_streak = self.state.stall_streak = 0
            saved = result.tokens_before - result.tokens_after
            if outcome == "too_small_to_rotate":
                would_save = (result.record.get("summary") or {}).get("would_save", 0)
                reasons.append(f"would have saved {would_save} of {result.tokens_before} tokens; not rotated")
            elif result.condensed <= 0 and (self.cfg.judge_by_estimate or outcome != "compressed"):
                reasons.append("removed no message")
            elif self.cfg.judge_by_estimate and (saved <= 0 or saved < self.cfg.min_saving * result.tokens_before):
                reasons.append(f"saved {saved} of {result.tokens_before} tokens")
            if reasons:
                self._strike()
            elif changed is not False:
                self.state.awaiting_usage = True
        return {"trigger": trigger, "ineffective": bool(reasons) and not result.aborted, "reasons": reasons,
                "streak": self.state.ineffective_streak, "auto_disabled": self.state.auto_disabled}

    # ------------------------------------------------------------ limits and preflight

    def overflow_limit(self, error_text: str, current_window: int) -> int | None:
        """The window a context-overflow error states, when it is smaller than ``current_window``."""
        limit = parse_context_limit(error_text)
        return limit if limit is not None and limit < current_window else None

    def preflight(self, messages: list[dict], *, estimate_fn: Callable[[Sequence[dict]], int],
                  compress_fn: Callable[[list[dict]], CompactionOutcome],
                  max_passes: int = PREFLIGHT_PASSES) -> tuple[list[dict], list[PreflightPass]]:
        """Compress at the start of a turn until under the threshold, at most ``max_passes`` times.

        Stops early when a pass makes no progress (same message count and at least
        95% of the tokens): another pass would only repeat it.
        """
        passes: list[PreflightPass] = []
        current = messages
        for _ in range(max_passes):
            tokens = estimate_fn(current)
            if not self.should_compress(tokens, "preflight"):
                break
            result = compress_fn(current)
            self.record(result, "preflight")
            after = estimate_fn(result.messages)
            progressed = made_progress(len(current), tokens, len(result.messages), after)
            passes.append(PreflightPass(tokens, after, len(current), len(result.messages), progressed, result))
            current = result.messages
            if not progressed:
                break
        return current, passes
