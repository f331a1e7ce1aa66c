"""What compression does to a recording, call by call, with the defects of each output checked.

The replay is the agent loop itself (``hermeslab.eval.replay`` in its fast
mode: recorded tool results appended directly, no events), so every trigger,
the overflow handling and the anti-thrash verdicts are the live loop's. The
replay provider answers each call with the recorded reply and bills the
prompt in the config estimator's unit; a prompt over the window is refused as
an endpoint would refuse it, and the loop's overflow recovery runs (a turn it
cannot rescue fails, and its remaining recorded calls are not made).

Every compression is checked for the defects seen in Hermes 0.19.0: more than
one handoff summary in the output, the latest real user message no longer
present verbatim, a summarised range that held nothing but the previous
summary (which must be judged ineffective), and the task that opened the
session lost. A prompt refused as over the window counts against the config,
except when even the system prompt, the latest user message and the newest
assistant/tool group exceed the window: no compression can help there, so that
call gets an ``unfittable`` event instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from hermeslab.context.assemble import MISSING_RESULT_STUB, split_summary
from hermeslab.context.boundary import newest_group_tail
from hermeslab.context.pipeline import ORIGINAL_TASK_MAX_CHARS
from hermeslab.context.turns import is_real_user_message, is_synthetic, last_real_user_index
from hermeslab.context.types import Summariser, SummaryOutcome, SummaryRequest, summary_prefixes
from hermeslab.core.config import Config
from hermeslab.core.messages import MessageValidationError, text_of, validate_messages
from hermeslab.policies.running import budgets_of
from hermeslab.providers.replay import billed_prompt_tokens

from ..reference.worker.stub_summary import STUB_SUMMARY
from hermeslab.recordings import Recording
from .replay import SECONDS_PER_CALL, CompressionRecord, ReplayRun, replay

UNFITTABLE = "unfittable"


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
    """One model call the replay made and the prompt it was sent with (before and after compressing)."""

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
    #: The configured strategy, or ``fit_window`` (an overflow's last resort: oldest turns dropped, texts cut).
    strategy: str = "summary"
    #: Messages a fit cut to size (with a marker saying how much).
    cut_messages: int = 0


@dataclass(frozen=True)
class ReplayEvent:
    kind: str
    call: int
    message_index: int
    detail: str


@dataclass(frozen=True)
class RefusedCall:
    """A prompt the provider turned away as longer than the window."""

    call: int
    message_index: int
    prompt_tokens: int
    #: A compression ran for this call before the refusal (the compressed prompt still did not fit).
    after_compression: bool


@dataclass
class ReplayReport:
    session_id: str | None
    preset: str
    context_length: int
    threshold_tokens: int
    calls: list[ReplayCall] = field(default_factory=list)
    compressions: list[CompressionCheck] = field(default_factory=list)
    events: list[ReplayEvent] = field(default_factory=list)
    refusals: list[RefusedCall] = field(default_factory=list)
    #: Turns the loop could not finish (an overflow it could not rescue); their later recorded calls are not made.
    failed_turns: int = 0
    missed_calls: int = 0

    def unfittable_calls(self) -> set[int]:
        return {event.call for event in self.events if event.kind == UNFITTABLE}

    def totals(self) -> dict[str, int]:
        """Counts over the whole replay.

        The first seven keys are those of the Hermes reference's replay totals,
        with three refinements: a call over the window is one the provider
        refused (counted once however often it was refused), calls recorded as
        ``unfittable`` are not counted as over the window, and a summary merged
        ahead of a recorded message counts as that message (folding it does
        remove recorded text).
        """
        unfittable = self.unfittable_calls()
        over = {r.call for r in self.refusals if r.call not in unfittable}
        return {
            "calls": len(self.calls),
            "compress_calls": len(self.compressions),
            "ineffective_compress_calls": sum(1 for c in self.compressions if c.ineffective),
            "over_window_after_compress": len({r.call for r in self.refusals
                                               if r.after_compression and r.call in over}),
            "two_summary_outputs": sum(1 for c in self.compressions if c.summaries_in_output > 1),
            "missing_latest_user_outputs": sum(1 for c in self.compressions if c.latest_user_missing),
            "summary_only_compressions": sum(1 for c in self.compressions if c.summary_only),
            "summary_only_counted_as_progress": sum(1 for c in self.compressions
                                                    if c.summary_only and not c.ineffective),
            "original_task_lost": sum(1 for c in self.compressions if c.original_task_kept is False),
            "over_window_calls": len(over),
            "overflow_compressions": sum(1 for c in self.compressions if c.trigger == "overflow"),
            "unfittable_calls": len(unfittable),
            "fit_compressions": sum(1 for c in self.compressions if c.strategy == "fit_window" and c.condensed),
            "messages_cut_to_fit": sum(c.cut_messages for c in self.compressions),
            "failed_turns": self.failed_turns,
            "missed_calls": self.missed_calls,
        }

    def as_record(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "preset": self.preset, "context_length": self.context_length,
                "threshold_tokens": self.threshold_tokens, "totals": self.totals(),
                "calls": [asdict(c) for c in self.calls], "compressions": [asdict(c) for c in self.compressions],
                "refusals": [asdict(r) for r in self.refusals],
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
    """Handoff summaries a list holds, counting one merged into another message or quoted inside one, in any
    wording this process wrote (Hermes's own texts included); an opening that contains another counts once."""
    prefixes = sorted(set(summary_prefixes()), key=len, reverse=True)
    found = 0
    for message in messages:
        text = text_of(message)
        for prefix in prefixes:
            if prefix in text:
                found += text.count(prefix)
                text = text.replace(prefix, "\x00")
    return found


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
    sized = config.with_overrides({"model.context_length": context_length})
    run = replay(Recording(id=session_id or "session", messages=list(messages), tools=tools), sized,
                 summariser=summariser, fast=True, seconds_per_call=seconds_per_call)
    return report_of(run, messages, tools, sized, session_id)


def report_of(run: ReplayRun, messages: Sequence[dict], tools: list[dict] | None, config: Config,
              session_id: str | None = None) -> ReplayReport:
    """The call-by-call report of a replay of ``messages`` (its recording) under ``config``."""
    window = run.context_length
    budgets = budgets_of(config.compression, window, config.model.max_tokens)
    report = ReplayReport(session_id=session_id, preset=config.compression.preset, context_length=window,
                          threshold_tokens=budgets.threshold_tokens, failed_turns=run.statuses.count("failed"),
                          missed_calls=run.deviations.get("missed_calls", 0))
    replies = [index for index, message in enumerate(messages) if message.get("role") == "assistant"]
    task = next((text_of(m) for m in messages if is_real_user_message(m)), None)
    by_call: dict[int, list[CompressionRecord]] = {}
    for record in run.compressions:
        by_call.setdefault(record.call, []).append(record)
        report.compressions.append(_check(record, run, tools, task))
    for number, served in enumerate(run.calls):
        records = by_call.get(number, [])
        before = billed_prompt_tokens(run.counter, records[0].before, tools) if records else served.prompt_tokens
        report.calls.append(ReplayCall(replies[served.reply_index], before, served.prompt_tokens,
                                       tuple(r.trigger for r in records)))
    for refusal in run.refusals:
        position = replies[min(refusal.reply_index, len(replies) - 1)]
        compressed = any(r.changed for r in by_call.get(refusal.call, []))
        report.refusals.append(RefusedCall(refusal.call, position, refusal.prompt_tokens, compressed))
        needed = billed_prompt_tokens(run.counter, minimal_context(refusal.messages), tools)
        if needed > window and refusal.call not in report.unfittable_calls():
            report.events.append(ReplayEvent(
                UNFITTABLE, refusal.call, position,
                f"the system prompt, the latest user message and the newest assistant/tool group alone need "
                f"{needed:,} tokens (tool schemas included), more than the {window:,}-token window"))
    return report


def _check(record: CompressionRecord, run: ReplayRun, tools: list[dict] | None, task: str | None) -> CompressionCheck:
    """The invariants of one compression's output."""
    result, output = record.result, record.after
    plan = getattr(result, "plan", None)
    start = end = None
    window: list[dict] = []
    if plan is not None and not plan.boundary.empty:
        start, end = plan.boundary.start, plan.boundary.end
        window = plan.pruned[start:end]
    removed = sum(1 for m in window if _is_recorded(m))
    fit = (getattr(result, "record", None) or {}) if record.strategy == "fit_window" else None
    if fit is not None:  # a fit drops and cuts instead of summarising
        removed = len(fit["dropped_indices"]) + len(fit["cut_messages"])
    needle = task[:ORIGINAL_TASK_MAX_CHARS] if task else None
    return CompressionCheck(
        call=record.call,
        trigger=record.trigger,
        outcome="fit" if fit is not None else str(getattr(result, "record", {}).get(
            "outcome", "compressed" if record.changed else "none")),
        start=start,
        end=end,
        messages_before=len(record.before),
        messages_after=len(output),
        prompt_before=billed_prompt_tokens(run.counter, record.before, tools),
        prompt_after=billed_prompt_tokens(run.counter, output, tools),
        condensed=int(getattr(result, "condensed", 0)),
        removed_recorded=removed,
        ineffective=record.ineffective,
        summaries_in_output=summaries_in(output),
        latest_user_missing=record.latest_user is not None and not holds_user_message(
            output, {"content": record.latest_user}),
        summary_only=bool(window) and removed == 0 and summaries_in(window) > 0,
        original_task_kept=None if needle is None else any(needle in text_of(m) for m in output),
        strategy=record.strategy,
        cut_messages=len(fit["cut_messages"]) if fit is not None else 0,
    )


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
