"""When to compress one conversation: the triggers of the live loop, in one place.

The agent asks the driver at fixed points of a turn and applies what it gets
back; every replay runs through the agent, so a replay's compressions are the
live loop's by construction. The points, in the order a turn meets them:

* ``preflight`` — before the turn's first call, asked again after each applied
  pass until it answers None: at most ``PREFLIGHT_PASSES`` passes, stopping
  when a pass changed nothing or made no progress;
* ``before_call`` — the pressure check before every later call, on the size of
  the prompt about to be sent. It needs more than one message and waits, after
  any compression, for the provider's reading of the compressed prompt (the
  same content must not be compressed twice on an estimate); with
  ``compression.trigger_events`` set, a context holding more events than that
  is compressed before any call, the turn's first too, without waiting;
* ``after_tools`` — the per-turn check on the provider's reported prompt
  tokens of the call that asked for the tools;
* with ``compression.usage_anchor`` (lean-era Hermes) every automatic check
  compares the usage anchor instead: the latest reading's prompt and
  completion tokens plus an estimate of only the messages added since; with
  no anchor (the first request, or the first after a compaction) it waits one
  request for a reading, unless the provider has shown it reports no usage;
* ``before_send`` — right before every call, a prompt the count already puts
  over the window is made to fit (oldest turns dropped, then the longest
  texts cut, each counted) instead of being sent to be refused;
* ``overflow`` — the provider refused the prompt as too large: lower the
  window to the stated limit, compress past the automatic gate, make it fit
  as above if compressing could not, and say whether asking again can help.

Under ``hermes-0.19`` some of these rules are Hermes's own, each a named
switch of ``CompressionConfig``: the pressure check also runs before a turn's
first call and shares one allowance per turn with overflow
(``pressure_every_call``, ``pressure_counts_against_overflow``), a reading is
awaited by Hermes's deferral rule (``defer_to_real_usage``), preflight has
Hermes's cheap gate (``preflight_gate``), and nothing is fitted
(``fit_on_overflow`` off).

The driver measures prompts in the unit its thresholds use (tiktoken counts
corrected by the provider's readings, or Hermes's chars/4) and keeps those
readings; it never touches a session or emits an event.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.rough import rough_messages_tokens, rough_tool_schema_tokens
from ..core.tokens import REPLY_PRIMING, RunningCount, TokenCounter, UsageCalibration, default_counter
from .compactor import Compaction, Compactor
from .error_limits import parse_prompt_tokens
from .policy import AUTOMATIC_TRIGGERS, PREFLIGHT_PASSES, made_progress
from .request_normalise import normalised_request

Message = dict[str, Any]
#: Share of the computed room a fit fills, so rounding and the calibration's drift cannot push it over.
FIT_MARGIN = 0.98


@dataclass(frozen=True)
class OverflowStep:
    """What to do after a refusal as too large: ``compress``, ``strip_images``, ``retry`` or ``give_up``."""

    action: str
    attempt: int
    #: The compressions that ran (changed or not), in order, for the caller to apply and log.
    compactions: tuple[Compaction, ...] = ()
    #: The window the provider stated, when it was smaller than the one in use.
    lowered_window: int | None = None
    reason: str = ""


class ContextDriver:
    """Decides when and how to compress one logical conversation; the caller applies each decision."""

    def __init__(self, compactor: Compactor | None, *, context_length: int,
                 counter: TokenCounter = default_counter):
        #: None runs without context management (``compression.enabled: false``).
        self.compactor = compactor
        self.counter = counter
        self.calibration = UsageCalibration()
        #: The server's chat template drops the tool schemas (it said so): a request's size leaves them out,
        #: and the calibration learns the ratio of what the model reads, not an offset taken for one.
        self.tools_dropped = False
        self._history_tokens = RunningCount(counter)
        self._context_length = context_length
        #: Prompt tokens the provider reported for the latest call (None after a compression, or before any).
        self.last_prompt_tokens: int | None = None
        #: A compression changed the context and no call has been answered since.
        self.awaiting_reading = False
        self._passes = 0
        self._last_pass: tuple[int, int, bool] | None = None  # messages, tokens before it, whether it changed
        # Hermes's deferral baselines (``defer_to_real_usage``): the latest positive reading, the
        # request estimate right after the last compression, and the one a fitting reading proved.
        self._last_real = 0
        self._rough_after_compression = 0
        self._rough_when_fit = 0
        #: The history an automatic compression last found nothing to summarise in (its length and last
        #: message): the same history is not tried again (``strike_when_nothing_to_summarise`` off).
        self._idle: tuple[int, int] | None = None
        #: The usage anchor (``usage_anchor``): the provider's prompt plus completion tokens of the latest
        #: answered call and the length of the history it was sent with; None when there is none to trust.
        self._anchor: tuple[int, int] | None = None
        #: The latest answer came without usage: with no anchor to wait for, the estimate decides.
        self._usage_missing = False

    @property
    def window(self) -> int:
        return self.compactor.window if self.compactor is not None else self._context_length

    # ------------------------------------------------------------ measuring

    def count_request(self, messages: Sequence[Message], tools: Sequence[dict] | None,
                      history: Sequence[Message] = ()) -> int:
        """Local token count of a request; a ``messages`` that extends ``history`` counts only the extension anew."""
        if messages is history or (history and len(messages) >= len(history)
                                   and messages[len(history) - 1] is history[-1]):
            counted = self._history_tokens.total(history)
            if len(messages) > len(history):  # a scaffold after the history
                counted += sum(self.counter.count_message(m) for m in messages[len(history):])
        else:
            counted = sum(self.counter.count_message(m) for m in messages)
        return counted + REPLY_PRIMING + (0 if self.tools_dropped else self.counter.count_tools(tools))

    def estimate(self, messages: Sequence[Message], tools: Sequence[dict] | None,
                 history: Sequence[Message] = ()) -> int:
        """The local count corrected by what the provider reported so far."""
        return self.calibration.apply(self.count_request(messages, tools, history))

    def measure(self, history: Sequence[Message], tools: Sequence[dict] | None) -> int:
        """The next request's size in the unit the compression thresholds use."""
        if self.compactor is not None and self.compactor.cfg.estimator == "rough":
            return self.compactor.estimate_request(history, tools)
        return self.estimate(history, tools, history)

    def wire(self, history: list[Message]) -> list[Message]:
        """The history as the next request carries it (``normalise_requests``: as Hermes sends it)."""
        if self.compactor is not None and self.compactor.cfg.normalise_requests:
            return normalised_request(history)
        return history

    def request_rough(self, history: Sequence[Message], tools: Sequence[dict] | None) -> int:
        """Hermes's request estimate: the messages without the system message, its text's chars/4, the tools."""
        system = ""
        if history and history[0].get("role") == "system":
            system, history = history[0].get("content") or "", history[1:]
        text = system if isinstance(system, str) else str(system)
        return rough_messages_tokens(history) + (len(text) + 3) // 4 + rough_tool_schema_tokens(tools)

    def anchored(self, history: Sequence[Message]) -> int | None:
        """The usage anchor's measure of ``history``: the anchored reading plus an estimate of the messages
        added since, leaving out the reply the completion tokens already count; None without an anchor."""
        if self._anchor is None or len(history) < self._anchor[1]:
            return None
        tokens, length = self._anchor
        added = list(history[length:])
        if added and added[0].get("role") == "assistant":
            added = added[1:]
        if not added:
            return tokens
        if self.compactor is not None and self.compactor.cfg.estimator == "rough":
            return tokens + self.compactor.estimate_request(added, None)
        return tokens + self.calibration.apply(sum(self.counter.count_message(m) for m in added))

    def _anchored_or_waits(self, history: Sequence[Message], tools: Sequence[dict] | None) -> int | None:
        """The measure an automatic trigger compares (``usage_anchor``), or None when it waits one request
        for a reading: no anchor, and the provider has not shown that it reports no usage."""
        tokens = self.anchored(history)
        if tokens is not None:
            return tokens
        return self.measure(history, tools) if self._usage_missing else None

    def _defer(self, rough: int) -> bool:
        """Hermes's deferral of an estimate known to be noisy (``defer_to_real_usage``)."""
        threshold = self.compactor.budgets.threshold_tokens
        if rough < threshold:
            return False
        if self.awaiting_reading:
            return True
        if self._last_real <= 0 or self._last_real >= threshold:
            return False
        baseline = self._rough_when_fit or self._rough_after_compression
        if baseline <= 0 or max(0, rough - baseline) > max(4096, int(threshold * 0.05)):
            return False
        self._rough_when_fit = max(baseline, rough)
        return True

    def observe(self, counted: int, reported: int | None, *, completion: int | None = None,
                history_length: int | None = None) -> None:
        """One answered call: its local count and the provider's reading (None when it reported no usage);
        with ``usage_anchor``, the reply's completion tokens and the history's length anchor later measures."""
        awaited, self.awaiting_reading = self.awaiting_reading, False
        if reported and history_length is not None:
            self._anchor, self._usage_missing = (reported + max(completion or 0, 0), history_length), False
        elif not reported:
            self._anchor, self._usage_missing = None, True
        if self.compactor is not None and self.compactor.cfg.defer_to_real_usage and reported:
            self._last_real = reported
            if reported < self.compactor.budgets.threshold_tokens:
                if awaited and self._rough_after_compression > 0:
                    self._rough_when_fit = self._rough_after_compression
            else:
                self._rough_when_fit = 0
        if self.compactor is not None and self.compactor.cfg.overflow_allowance_per_call:
            self.compactor.policy.overflow_attempts = 0
        if reported is None:
            if awaited and self.compactor is not None and self.compactor.cfg.usage_gap_settles_verdict:
                self.last_prompt_tokens = 0  # no reading of the compacted prompt: the per-turn check estimates
                self.compactor.policy.observe_prompt_tokens(None)
            return
        self.calibration.observe(counted, reported)
        self.last_prompt_tokens = reported
        if self.compactor is not None:
            self.compactor.policy.observe_prompt_tokens(reported)

    def too_large(self, messages: Sequence[Message], history: Sequence[Message],
                  tools: Sequence[dict] | None) -> str | None:
        """Why a user message cannot be sent at all (it alone, with the system prompt and the tool schemas, is over
        the window), in one sentence for the user; None when every message could fit.

        ``messages`` are the user messages as they would enter the history, so
        the counts taken here are the ones the history's later counts reuse.
        """
        system = list(history[:1]) if history and history[0].get("role") == "system" else []
        fixed = self.measure(system, tools)
        for message in messages:
            tokens = self.calibration.apply(self.counter.count_message(message))
            if fixed + tokens > self.window:
                return (f"Your message alone is {tokens:,} tokens; with the system prompt and tool schemas "
                        f"({fixed:,} tokens) it cannot fit the {self.window:,}-token window, so it was not sent and "
                        f"the conversation is unchanged. Shorten it, or save it to a file and ask for it to be read.")
        return None

    # ------------------------------------------------------------ the triggers

    def begin_turn(self, task: str | None) -> None:
        """A user turn starts: the overflow allowance and the preflight passes start again."""
        self._passes, self._last_pass = 0, None
        if self.compactor is not None:
            self.compactor.policy.begin_turn()
            if self.compactor.state.original_task is None and task is not None:
                self.compactor.state.original_task = task

    def preflight(self, history: list[Message], tools: Sequence[dict] | None) -> Compaction | None:
        """The next preflight pass, or None when the turn may start (ask again after applying each pass)."""
        if self.compactor is None or self._passes >= PREFLIGHT_PASSES:
            return None
        cfg = self.compactor.cfg
        if self._last_pass is None and cfg.preflight_gate:
            body = history[1:] if history and history[0].get("role") == "system" else history
            if (len(body) <= cfg.protect_first_n + cfg.protect_last_n + 1
                    and rough_messages_tokens(body) < self.compactor.budgets.threshold_tokens):
                self._passes = PREFLIGHT_PASSES
                return None
        if cfg.usage_anchor:
            anchored = self._anchored_or_waits(history, tools)
            if anchored is None:
                self._passes = PREFLIGHT_PASSES
                return None
            tokens = anchored
        else:
            tokens = (self.request_rough(history, tools) if cfg.preflight_system_as_text
                      else self.measure(history, tools))
        if self._last_pass is None and cfg.defer_to_real_usage and self._defer(tokens):
            self._passes = PREFLIGHT_PASSES
            return None
        if self._last_pass is not None:
            count, before, changed = self._last_pass
            if not changed or not made_progress(count, before, len(history), tokens):
                self._passes = PREFLIGHT_PASSES
                return None
        if not self.compactor.policy.should_compress(tokens, "preflight"):
            self._passes = PREFLIGHT_PASSES
            return None
        compaction = self.run(history, "preflight", tools)
        self._passes += 1
        self._last_pass = (len(history), tokens, compaction is not None and compaction.changed)
        return compaction

    def before_call(self, history: list[Message], tools: Sequence[dict] | None, *,
                    first: bool = False) -> Compaction | None:
        """The pressure check before a call that is not the turn's first (every call: ``pressure_every_call``)."""
        if self.compactor is None:
            return None
        if self.compactor.policy.over_events(history):  # counted in events, before every call
            return self.run(history, "pressure", tools)
        cfg = self.compactor.cfg
        if first and not cfg.pressure_every_call:
            return None
        body = len(history) - (1 if history and history[0].get("role") == "system" else 0)
        if body <= 1 if cfg.defer_to_real_usage else len(history) <= 1:
            return None
        policy = self.compactor.policy
        if cfg.pressure_counts_against_overflow and policy.overflow_attempts >= cfg.max_overflow_attempts:
            return None
        if cfg.usage_anchor:
            anchored = self._anchored_or_waits(self.wire(history), tools)
            if anchored is None:
                return None
            tokens = anchored
        else:
            tokens = self.measure(self.wire(history), tools)
        if cfg.defer_to_real_usage:
            if self._defer(tokens):
                return None
        elif self.awaiting_reading and not cfg.usage_anchor:
            return None
        if policy.should_compress(tokens, "pressure"):
            if cfg.pressure_counts_against_overflow:
                policy.overflow_attempts += 1
            return self.run(history, "pressure", tools)
        return None

    def before_send(self, history: list[Message], tools: Sequence[dict] | None) -> Compaction | None:
        """Right before any call: a prompt our count already puts over the window is made to fit first
        (``fit_on_overflow``), rather than sent to be refused."""
        if self.compactor is None or not self.compactor.cfg.fit_on_overflow:
            return None
        if self.measure(history, tools) <= self.compactor.window:
            return None
        return self._fit(history, tools)

    def after_tools(self, history: list[Message], tools: Sequence[dict] | None) -> Compaction | None:
        """The per-turn check once tool results are in, on the reading of the call that asked for them."""
        if self.compactor is None:
            return None
        if self.compactor.cfg.usage_anchor and (anchored := self.anchored(history)) is not None:
            if self.compactor.policy.should_compress(anchored, "turn"):
                return self.run(history, "turn", tools)
            return None
        if self.last_prompt_tokens is None:
            return None
        tokens = self.last_prompt_tokens
        if tokens == 0:  # a compaction's prompt went unread (``usage_gap_settles_verdict``): Hermes's estimate
            body = history[1:] if history and history[0].get("role") == "system" else history
            tokens = rough_messages_tokens(body) + rough_tool_schema_tokens(tools)
        if self.compactor.policy.should_compress(tokens, "turn"):
            return self.run(history, "turn", tools)
        return None

    def lower_window_from(self, error_text: str) -> int | None:
        """The window an overflow refusal states, when smaller than the one in use: every budget follows it."""
        if self.compactor is None:
            return None
        limit = self.compactor.policy.overflow_limit(error_text, self.compactor.window)
        if limit is not None:
            self.compactor.lower_window(limit)
        return limit

    def overflow(self, history: list[Message], tools: Sequence[dict] | None, error_text: str, *,
                 payload_too_large: bool, images_stripped: bool) -> OverflowStep:
        """The provider refused the prompt as too large: what to do before asking again.

        Gives up when the turn's overflow compressions are spent, or when
        nothing changed and the count agrees that the prompt does not fit.
        When the count says it fits, the refusal was not about this prompt's
        size and one more try is worth it (``retry_overflow_that_fits``; Hermes
        ends the turn instead of compressing the same history again) — unless the refusal states the
        prompt's size (``fit_on_overflow``): that is a reading, and a count
        below it is the tokenizers' difference, so the fit goes by the reading.
        """
        if self.compactor is None:
            return OverflowStep("give_up", 1, reason="compression is disabled (compression.enabled: false)")
        policy = self.compactor.policy
        attempt = policy.overflow_attempts + 1
        blocked = policy.blocked_reason("overflow")
        if blocked is not None:
            return OverflowStep("give_up", attempt, reason=blocked)
        limit = self.lower_window_from(error_text)
        stated = parse_prompt_tokens(error_text) if self.compactor.cfg.fit_on_overflow else None
        ratio = None
        if stated is not None:
            counted = self.count_request(history, tools, history)
            ratio = max(self.calibration.ratio, stated / max(counted, 1))
        tokens, count = self.measure(history, tools), len(history)
        compaction = self.run(history, "overflow", tools)
        ran = (compaction,) if compaction is not None else ()
        current = compaction.messages if compaction is not None and compaction.changed else history
        after = self.measure(current, tools)
        read = max(after, stated) if stated is not None and current is history else after
        if read > self.compactor.window and self.compactor.cfg.fit_on_overflow:
            fitted = self._fit(current, tools, ratio)
            if fitted is not None:
                return OverflowStep("compress", attempt, ran + (fitted,), limit)
        changed = compaction is not None and compaction.changed
        if changed and made_progress(count, tokens, len(compaction.messages), after):
            return OverflowStep("compress", attempt, ran, limit)
        if payload_too_large and not images_stripped:
            return OverflowStep("strip_images", attempt, ran, limit)
        if limit is None and (after > self.compactor.window or not self.compactor.cfg.retry_overflow_that_fits):
            return OverflowStep("give_up", attempt, ran, limit, reason="the conversation cannot be compressed further")
        return OverflowStep("retry", attempt, ran, limit)

    def _fit(self, history: list[Message], tools: Sequence[dict] | None,
             ratio: float | None = None) -> Compaction | None:
        """Drop and cut until the request fits (``fit_on_overflow``); None when nothing could change.

        The target is the compression threshold (capped by the window), so the
        next calls have the same room to grow as after any compression. The
        budget is for the messages alone, in the counter's unit: the target less
        what the tool schemas and reply priming cost, corrected by the
        provider's readings (``ratio``: a refusal's reading, when it says more),
        with a small margin for rounding.
        """
        target = min(self.compactor.window, self.compactor.budgets.threshold_tokens)
        if ratio is None:
            ratio = self.calibration.ratio if self.compactor.cfg.estimator != "rough" else 1.0
        budget = int((target - self.measure([], tools)) / max(ratio, 1e-9) * FIT_MARGIN)
        fitted = self.compactor.fit(history, budget_tokens=max(budget, 1))
        if not fitted.changed:
            return None
        self.last_prompt_tokens, self.awaiting_reading, self._anchor = None, True, None
        return fitted

    def manual(self, history: list[Message], tools: Sequence[dict] | None, focus: str | None) -> Compaction | None:
        """/compress [focus]: past the automatic gate, with the anti-thrash breaker cleared."""
        if self.compactor is None:
            raise RuntimeError("this agent has no compactor (compression is disabled)")
        self.compactor.policy.reset_manual()
        return self.run(history, "manual", tools, focus)

    def run(self, history: list[Message], trigger: str, tools: Sequence[dict] | None,
            focus: str | None = None) -> Compaction | None:
        """One compression attempt; a changed context waits for the provider's reading of it."""
        mark = (len(history), id(history[-1]) if history else 0)
        if trigger in AUTOMATIC_TRIGGERS and self._idle == mark:
            return None
        compaction = self.compactor.run(history, trigger=trigger, focus=focus, tools=tools)
        outcome = (getattr(compaction.result, "record", None) or {}).get("outcome") if compaction else None
        nothing = outcome == "nothing_to_summarise"
        self._idle = mark if nothing and not self.compactor.cfg.strike_when_nothing_to_summarise else None
        if compaction is not None and compaction.changed:
            self.last_prompt_tokens = None
            self.awaiting_reading = True
            self._anchor = None
            if self.compactor.cfg.defer_to_real_usage:
                self._rough_after_compression = self.request_rough(compaction.messages, tools)
        return compaction

    def fork(self) -> None:
        """/branch: the branch goes on with its own copy of the compression state."""
        if self.compactor is not None:
            self.compactor.state = copy.deepcopy(self.compactor.state)
            self.compactor.policy.state = self.compactor.state

    def reset(self) -> None:
        """A new logical conversation (/new, /resume): no readings, a fresh compression state."""
        self.last_prompt_tokens = None
        self.awaiting_reading = False
        self._idle = None
        self._anchor, self._usage_missing = None, False
        if self.compactor is not None:
            self.compactor.reset()
