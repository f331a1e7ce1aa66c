"""Replay a recording's context under a compression config, without the agent loop.

Each recorded assistant message is one model call. Before it, the context is
the current (possibly compressed) list plus the recorded messages that arrived
since the previous call; the compression triggers then run as the agent runs
them, through the same ``Compactor`` and ``CompressionPolicy``:

* ``preflight`` when a new user message arrived (or before the very first
  call), up to three passes, stopping when a pass changes nothing or makes no
  progress;
* ``turn`` after tool results, on the previous call's prompt reading, then
  ``pressure`` on the estimate of the prompt about to be sent;
* ``overflow`` when the prompt still exceeds the window: the provider would
  reject the call, and the agent compresses and retries (never blocked by the
  anti-thrash breaker, at most ``max_overflow_attempts`` per user turn).

The estimate of each sent prompt (config estimator, tool schemas included) is
fed back to the policy as the provider's reading, so the anti-thrash verdicts
work as they would live. Time is simulated (each call advances the policy's
clock by ``seconds_per_call``), so cooldowns last the same number of calls on
any machine. Nothing is sent anywhere, so a replay is fast enough to run
thousands of times.

Every compression is checked for the defects seen in Hermes 0.19.0: a prompt
still above the window, more than one handoff summary in the output, the
latest real user message no longer present verbatim, a summarised range that
held nothing but the previous summary (which must be judged ineffective), and
the task that opened the session lost. When even the system prompt, the
latest user message and the newest assistant/tool group exceed the window, no
compression can help; that call gets an ``unfittable`` event instead of
counting as a failure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from hermeslab.compaction import Compaction, Compactor
from hermeslab.context.assemble import MISSING_RESULT_STUB, split_summary
from hermeslab.context.boundary import newest_group_tail
from hermeslab.context.pipeline import ORIGINAL_TASK_MAX_CHARS
from hermeslab.context.policy import PREFLIGHT_PASSES, made_progress
from hermeslab.context.turns import is_real_user_message, is_synthetic, last_real_user_index
from hermeslab.context.types import LEGACY_SUMMARY_PREFIX, SUMMARY_PREFIX, Summariser, SummaryOutcome, SummaryRequest
from hermeslab.core.config import Config
from hermeslab.core.messages import MessageValidationError, text_of, validate_messages

from .hermes_worker import STUB_SUMMARY

UNFITTABLE = "unfittable"
#: Simulated duration of one model call, which is what a cooldown is measured against.
SECONDS_PER_CALL = 10.0


class FixedSummariser:
    """Answers every request with the same text and no delay.

    With the summary's content fixed, two compression engines differ only in
    what they decide to keep, and timing measures the engine, not a model.
    The default text is the one the Hermes reference worker answers with.
    """

    def __init__(self, text: str = STUB_SUMMARY):
        if not isinstance(text, str) or not text.strip():
            raise ValueError("FixedSummariser needs a non-empty summary text")
        self.text = text

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        return SummaryOutcome(body=self.text)


@dataclass(frozen=True)
class ReplayCall:
    """One recorded model call and the prompt it would have been sent with."""

    #: Index of the recorded assistant message this call produced.
    message_index: int
    prompt_before: int
    prompt_after: int
    #: Triggers whose compression ran before this call, in order.
    triggers: tuple[str, ...]

    @property
    def compressed(self) -> bool:
        return bool(self.triggers)


@dataclass(frozen=True)
class CompressionCheck:
    """One compression attempt during a replay and the invariants of its output."""

    call: int
    trigger: str
    outcome: str
    start: int | None
    end: int | None
    messages_before: int
    messages_after: int
    prompt_before: int
    prompt_after: int
    #: Messages the summary replaced, as the pipeline counts them (what the anti-thrash verdict reads).
    condensed: int
    #: Recorded messages (not summaries, not pipeline stubs) inside the summarised range.
    removed_recorded: int
    ineffective: bool
    summaries_in_output: int
    latest_user_missing: bool
    #: The summarised range held nothing but an earlier handoff summary.
    summary_only: bool
    #: The opening task is in the output, verbatim or quoted; None before any user message.
    original_task_kept: bool | None


@dataclass(frozen=True)
class ReplayEvent:
    kind: str
    call: int
    message_index: int
    detail: str


@dataclass
class ReplayReport:
    session_id: str | None
    preset: str
    context_length: int
    threshold_tokens: int
    calls: list[ReplayCall] = field(default_factory=list)
    compressions: list[CompressionCheck] = field(default_factory=list)
    events: list[ReplayEvent] = field(default_factory=list)

    def unfittable_calls(self) -> set[int]:
        return {event.call for event in self.events if event.kind == UNFITTABLE}

    def totals(self) -> dict[str, int]:
        """Counts over the whole replay.

        The first seven keys are those of the Hermes reference's replay totals,
        with two refinements: calls recorded as ``unfittable`` are not counted
        as over the window, and a summary merged ahead of a recorded message
        counts as that message (folding it does remove recorded text).
        """
        unfittable = self.unfittable_calls()
        over = [i for i, call in enumerate(self.calls) if call.prompt_after > self.context_length]
        compressed_calls = {check.call for check in self.compressions}
        return {
            "calls": len(self.calls),
            "compress_calls": len(self.compressions),
            "ineffective_compress_calls": sum(1 for c in self.compressions if c.ineffective),
            "over_window_after_compress": sum(1 for i in over if i in compressed_calls and i not in unfittable),
            "two_summary_outputs": sum(1 for c in self.compressions if c.summaries_in_output > 1),
            "missing_latest_user_outputs": sum(1 for c in self.compressions if c.latest_user_missing),
            "summary_only_compressions": sum(1 for c in self.compressions if c.summary_only),
            "summary_only_counted_as_progress": sum(1 for c in self.compressions
                                                    if c.summary_only and not c.ineffective),
            "original_task_lost": sum(1 for c in self.compressions if c.original_task_kept is False),
            "over_window_calls": sum(1 for i in over if i not in unfittable),
            "overflow_compressions": sum(1 for c in self.compressions if c.trigger == "overflow"),
            "unfittable_calls": len(unfittable),
        }

    def as_record(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "preset": self.preset, "context_length": self.context_length,
                "threshold_tokens": self.threshold_tokens, "totals": self.totals(),
                "calls": [asdict(c) for c in self.calls], "compressions": [asdict(c) for c in self.compressions],
                "events": [asdict(e) for e in self.events]}


def sum_totals(reports: Sequence[ReplayReport]) -> dict[str, int]:
    """Totals of many replays, key by key."""
    summed: dict[str, int] = {}
    for report in reports:
        for key, value in report.totals().items():
            summed[key] = summed.get(key, 0) + value
    return summed


# ---------------------------------------------------------------- invariants of one output


def summaries_in(messages: Sequence[dict]) -> int:
    """Handoff summaries a list holds, counting one merged into another message or quoted inside one."""
    return sum(text_of(m).count(SUMMARY_PREFIX) + text_of(m).count(LEGACY_SUMMARY_PREFIX) for m in messages)


def holds_user_message(messages: Sequence[dict], target: dict) -> bool:
    """True when a user message carries ``target``'s content unchanged (a summary merged ahead of it allowed)."""
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if content == target.get("content") or split_summary(message)[1] == target.get("content"):
            return True
    return False


def _is_recorded(message: dict) -> bool:
    """A message of the recording (a summary merged ahead of one counts), not pipeline scaffolding."""
    if is_synthetic(message):
        return False
    if summaries_in([message]):
        return split_summary(message)[1] is not None
    return not (message.get("role") == "tool" and message.get("content") == MISSING_RESULT_STUB)


def minimal_context(messages: Sequence[dict]) -> list[dict]:
    """What no compression may drop: the leading system messages, the latest real user message and the
    newest group (the last assistant message and everything after it, as the seed's tail floor keeps it)."""
    keep = set()
    index = 0
    while index < len(messages) and messages[index].get("role") == "system":
        keep.add(index)
        index += 1
    user = last_real_user_index(messages)
    if user is not None:
        keep.add(user)
    keep.update(range(len(messages) - newest_group_tail(messages, index), len(messages)))
    return [messages[i] for i in sorted(keep)]


# ---------------------------------------------------------------- the replay


class SimulatedClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class _Replay:
    """The mutable state of one replay: context, compactor, last reading, findings."""

    def __init__(self, recording: list[dict], tools: list[dict] | None, compactor: Compactor, report: ReplayReport,
                 clock: SimulatedClock, seconds_per_call: float):
        self.recording = recording
        self.compactor = compactor
        self.tools = tools
        self.report = report
        self.clock = clock
        self.seconds_per_call = seconds_per_call
        # The schemas cost the same in every request, so they are counted once.
        self.tool_tokens = compactor.estimate_request([], tools) - compactor.estimate_request([], None)
        self.context: list[dict] = []
        self._context_tokens: int | None = None
        self.last_reading: int | None = None
        self.latest_user: dict | None = None
        self.task: str | None = None

    def estimate(self, messages: Sequence[dict]) -> int:
        return self.compactor.estimate_request(messages, None) + self.tool_tokens

    def prompt(self) -> int:
        """The estimate of the current context as a request (computed once per change)."""
        if self._context_tokens is None:
            self._context_tokens = self.estimate(self.context)
        return self._context_tokens

    def feed(self, messages: Sequence[dict]) -> bool:
        """Append recorded messages; True when a real user message arrived."""
        self.context.extend(messages)
        self._context_tokens = None
        arrived = False
        for message in messages:
            if is_real_user_message(message):
                arrived = True
                self.latest_user = message
                if self.task is None:
                    self.task = text_of(message)
        return arrived

    def compress(self, trigger: str, call: int) -> bool:
        """One compression attempt through the compactor; True when it changed the context."""
        before = self.context
        prompt_before = self.prompt()
        compaction = self.compactor.run(before, trigger=trigger, tools=self.tools)
        if compaction is None:
            return False
        self.context, self._context_tokens = compaction.messages, None
        self.report.compressions.append(self.check(compaction, call, len(before), prompt_before))
        if compaction.changed:
            self.last_reading = None
        return compaction.changed

    def check(self, compaction: Compaction, call: int, messages_before: int, prompt_before: int) -> CompressionCheck:
        """The invariants of one compression's output."""
        result, output = compaction.result, compaction.messages
        plan = getattr(result, "plan", None)
        start = end = None
        window: list[dict] = []
        if plan is not None and not plan.boundary.empty:
            start, end = plan.boundary.start, plan.boundary.end
            window = plan.pruned[start:end]
        removed = sum(1 for m in window if _is_recorded(m))
        needle = self.task[:ORIGINAL_TASK_MAX_CHARS] if self.task else None
        return CompressionCheck(
            call=call,
            trigger=compaction.trigger,
            outcome=str(getattr(result, "record", {}).get("outcome", "compressed" if compaction.changed else "none")),
            start=start,
            end=end,
            messages_before=messages_before,
            messages_after=len(output),
            prompt_before=prompt_before,
            prompt_after=self.prompt(),
            condensed=int(getattr(result, "condensed", 0)),
            removed_recorded=removed,
            ineffective=bool(compaction.verdict.get("ineffective")),
            summaries_in_output=summaries_in(output),
            latest_user_missing=self.latest_user is not None and not holds_user_message(output, self.latest_user),
            summary_only=bool(window) and removed == 0 and summaries_in(window) > 0,
            original_task_kept=None if needle is None else any(needle in text_of(m) for m in output),
        )

    def preflight(self, call: int, triggers: list[str]) -> None:
        """Start of a user turn: up to three passes, stopping when one changes nothing or makes no progress."""
        self.compactor.policy.begin_turn()
        for _ in range(PREFLIGHT_PASSES):
            tokens, count = self.prompt(), len(self.context)
            if not self.compactor.policy.should_compress(tokens, "preflight"):
                return
            triggers.append("preflight")
            if not self.compress("preflight", call):
                return
            if not made_progress(count, tokens, len(self.context), self.prompt()):
                return

    def within_turn(self, call: int, triggers: list[str]) -> None:
        """After tool results: the previous reading (``turn``), then the prompt about to go out (``pressure``)."""
        policy = self.compactor.policy
        if self.last_reading is not None and policy.should_compress(self.last_reading, "turn"):
            triggers.append("turn")
            self.compress("turn", call)
        if policy.should_compress(self.prompt(), "pressure"):
            triggers.append("pressure")
            self.compress("pressure", call)

    def recover_from_overflow(self, call: int, triggers: list[str]) -> None:
        """Compress while the provider would reject the prompt as too long."""
        policy = self.compactor.policy
        while self.prompt() > self.report.context_length and policy.should_compress(self.prompt(), "overflow"):
            triggers.append("overflow")
            if not self.compress("overflow", call):
                return

    def run(self) -> ReplayReport:
        fed = 0
        for position, message in enumerate(self.recording):
            if message.get("role") != "assistant":
                continue
            call = len(self.report.calls)
            new_turn = self.feed(self.recording[fed:position]) or call == 0
            fed = position
            before = self.prompt()
            triggers: list[str] = []
            if new_turn:
                self.preflight(call, triggers)
            else:
                self.within_turn(call, triggers)
            self.recover_from_overflow(call, triggers)
            after = self.prompt()
            self.report.calls.append(ReplayCall(position, before, after, tuple(triggers)))
            if after > self.report.context_length:
                self.check_fit(call, position)
            self.compactor.policy.observe_prompt_tokens(after)
            self.last_reading = after
            self.clock.advance(self.seconds_per_call)
        return self.report

    def check_fit(self, call: int, position: int) -> None:
        """Record an ``unfittable`` event when not even the minimal context fits the window."""
        needed = self.estimate(minimal_context(self.context))
        if needed > self.report.context_length:
            self.report.events.append(ReplayEvent(
                UNFITTABLE, call, position,
                f"the system prompt, the latest user message and the newest assistant/tool group alone need "
                f"{needed:,} tokens (tool schemas included), more than the {self.report.context_length:,}-token window",
            ))


def replay_session(messages: list[dict], tools: list[dict] | None = None, *, config: Config,
                   summariser: Summariser, context_length: int, session_id: str | None = None,
                   seconds_per_call: float = SECONDS_PER_CALL) -> ReplayReport:
    """Replay one recording at ``context_length`` under ``config``'s compression settings.

    ``config`` is used as given (apply a preset first); only its window is
    replaced. Raises ValueError for a window that is not a positive integer
    and for messages that are not a valid conversation.
    """
    if isinstance(context_length, bool) or not isinstance(context_length, int) or context_length <= 0:
        raise ValueError(f"context_length must be a positive integer, got {context_length!r}")
    if isinstance(seconds_per_call, bool) or not isinstance(seconds_per_call, (int, float)) or seconds_per_call < 0:
        raise ValueError(f"seconds_per_call must be a non-negative number, got {seconds_per_call!r}")
    if not isinstance(config, Config):
        raise TypeError(f"config must be a hermeslab Config, got {type(config).__name__}")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise ValueError("tools must be a list of tool schema objects or None")
    try:
        validate_messages(messages)
    except MessageValidationError as exc:
        raise ValueError(f"the recording is not a valid conversation: {exc}") from None
    clock = SimulatedClock()
    compactor = Compactor(config.with_overrides({"model.context_length": context_length}), summariser, clock=clock)
    report = ReplayReport(session_id=session_id, preset=config.compression.preset, context_length=context_length,
                          threshold_tokens=compactor.budgets.threshold_tokens)
    return _Replay(list(messages), tools, compactor, report, clock, seconds_per_call).run()


def replay_recordings(sessions: Sequence[dict], *, config: Config, summariser: Summariser,
                      context_length: int) -> list[ReplayReport]:
    """Replay recordings in the shared JSONL shape (``{"id", "messages", "tools"}``), one report each."""
    reports = []
    for index, session in enumerate(sessions):
        if not isinstance(session, dict) or not isinstance(session.get("messages"), list):
            raise ValueError(f"session {index} must be an object with a 'messages' list")
        reports.append(replay_session(session["messages"], session.get("tools"), config=config,
                                      summariser=summariser, context_length=context_length,
                                      session_id=session.get("id")))
    return reports
