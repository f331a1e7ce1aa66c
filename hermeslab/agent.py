"""The agent loop: user text in, model calls and tool runs, a TurnResult out.

The loop knows nothing about DuckDB or widgets. It emits typed events on a bus
and whoever cares subscribes. One user turn is an outer loop over model calls
(each possibly followed by tool runs) bounded by ``agent.max_iterations``.
Failed model calls and unusable replies are handed to ``hermeslab.recovery``,
which decides what to try next; the loop applies its decisions and logs each one.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .compaction import Compaction, Compactor, next_title, title_from
from .context.policy import PREFLIGHT_PASSES, made_progress
from .core.config import Config
from .core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    ErrorEvent,
    Event,
    EventBus,
    MessageAdded,
    Notice,
    RecoveryEvent,
    SessionEnded,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from .core.messages import repair_tool_arguments, strip_surrogates, tool_calls_of
from .core.tokens import REPLY_PRIMING, RunningCount, TokenCounter, UsageCalibration, count_text, default_counter
from .providers.base import ChatRequest, ChatResponse, Provider, ProviderError, StreamDelta, Usage
from .recovery import (
    EMPTY_MARKER,
    RECOVERED,
    CallState,
    Classification,
    CredentialRefresh,
    Decision,
    EmptyContext,
    EmptyRecovery,
    ProviderSlot,
    RecoveryAction,
    RecoveryChain,
    RecoveryFailed,
    RecoveryLog,
    SessionSize,
    classify,
    complete_truncated,
    has_inline_thinking,
    is_empty,
    is_truncated,
    malformed_tool_calls,
    nudge_messages,
    prefill_message,
    prior_housekeeping_text,
    recent_tool_result,
    repair_message_encoding,
    repair_surrogates,
    repaired_request,
)
from .recovery.repair import read_tool_arguments
from .session import Session, new_trace_id
from .tools.executor import ToolResult, execute_tool_calls
from .tools.registry import ToolRegistry

if TYPE_CHECKING:
    from .memory.manager import Memory

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant working in a local workspace through tools. "
    "Use a tool when the answer depends on files, commands or saved notes; answer directly otherwise. "
    "Report tool errors plainly and never invent file contents or command output."
)

SELF_CHECK_PROMPT = (
    "Before you finish: check your answer against the conversation and the tool results above. "
    "If something is wrong or unsupported, correct it; otherwise repeat the answer unchanged."
)

#: Failures of a model call that the recovery chain classifies; anything else is a bug and propagates.
RECOVERABLE_ERRORS = (ProviderError, UnicodeError, OSError)
#: Backoff waits are slept in slices this long, so a stop request is honoured within one slice.
WAIT_SLICE_SECONDS = 0.2


class TurnInterrupted(Exception):
    """Raised inside the loop when the user asked to stop."""


class ContextTooLarge(Exception):
    """The provider refused the prompt as too large; the loop compresses and asks again."""

    def __init__(self, fault: Classification):
        super().__init__(fault.message)
        self.fault = fault


@dataclass
class TurnResult:
    text: str
    #: ``completed``, ``interrupted``, ``max_iterations`` or ``failed``.
    status: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    error: str | None = None


class Agent:
    """One conversation with one provider and one tool registry."""

    def __init__(
        self,
        provider: Provider,
        *,
        config: Config | None = None,
        tools: ToolRegistry | None = None,
        bus: EventBus | None = None,
        session: Session | None = None,
        source: str = "cli",
        counter: TokenCounter = default_counter,
        sleep: Callable[[float], None] = time.sleep,
        compactor: Compactor | None = None,
        fallbacks: Sequence[ProviderSlot] = (),
        refresh_credentials: CredentialRefresh | None = None,
        rng: random.Random | None = None,
        run_id: str | None = None,
        config_hash: str | None = None,
        memory: Memory | None = None,
    ):
        self.config = config or Config()
        #: Memory files, skills, background review and memory provider; None runs without them.
        self.memory = memory
        #: What to try when a call fails: retries, repairs, a credential refresh, the fallback providers.
        self.recovery = RecoveryChain(self.config.recovery, ProviderSlot(provider, self.config.model.name), fallbacks,
                                      max_retries=max(0, self.config.agent.api_max_retries),
                                      refresh=refresh_credentials, rng=rng)
        self._recovery_log = RecoveryLog(self._report_recovery)
        self._empty = EmptyRecovery(self.config.recovery)
        #: Messages sent after the history for the next call only (an empty-reply nudge, a thinking prefill).
        self._scaffold: list[dict[str, Any]] = []
        #: Text of a stream that broke, with the length of the message list it answered.
        self._partial: tuple[int, str] | None = None
        self._argument_retries = 0
        self.tools = tools or ToolRegistry()
        self.bus = bus or EventBus()
        prompt = self.config.agent.system_prompt or DEFAULT_SYSTEM_PROMPT
        self.session = session or Session(system_prompt=memory.fresh_prompt(prompt) if memory else prompt,
                                          source=source)
        if memory is not None:
            memory.attach(self.bus)
        self.counter = counter
        self.history_tokens = RunningCount(counter)
        self.calibration = UsageCalibration()
        self._sleep = sleep
        self._stop = threading.Event()
        self._turn_lock = threading.Lock()
        self._trace_id = ""
        self._api_calls = 0
        #: Prompt tokens the provider reported for the latest call, and the history length it covered.
        self.last_prompt_tokens: int | None = None
        self.last_prompt_messages = 0
        #: Compression at the right moments; None runs without context management.
        self.compactor = compactor
        self._turn_added: list[dict[str, Any]] = []
        self._warned_repeated_compression = False
        #: The latest reply's parsed tool-call arguments, with the message they belong to.
        self._parsed_reply: tuple[dict[str, Any] | None, list[dict[str, Any] | ValueError]] = (None, [])
        #: Stamped on every event, so the rows of a replay or an A/B run can be told apart.
        self.run_id = run_id
        #: What SessionStarted reports as the config's hash, when not its own (a replay reports the config
        #: it was given, not the one it adjusted to fit the recording).
        self.config_hash = config_hash

    # ------------------------------------------------------------ public API

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.session.messages

    @property
    def provider(self) -> Provider:
        """The primary provider (a refreshed credential replaces it; fallbacks live in ``recovery``)."""
        return self.recovery.primary.provider

    @provider.setter
    def provider(self, provider: Provider) -> None:
        self.recovery.primary.provider = provider

    def interrupt(self) -> None:
        """Ask the running turn to stop at the next safe point (thread-safe)."""
        self._stop.set()

    def close(self, reason: str = "agent_close") -> None:
        if self.session.started:
            self._emit(SessionEnded, end_reason=reason)
            self.session.started = False

    def chat(self, text: str) -> TurnResult:
        """Run one user turn to its end. Concurrent calls wait for each other."""
        return self.run_turn([text])

    def run_turn(self, texts: Sequence[str] = ()) -> TurnResult:
        """Append ``texts`` as user messages, then run the turn to its end.

        No text lets the model speak on the history as it stands (an agent that
        greets first, or one that goes on after its own reply); several are
        messages that arrived while nobody answered. Recorded sessions have both.
        """
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("run_turn() takes a list of user texts (use chat() for a single one)")
        with self._turn_lock:
            self._stop.clear()
            return self._run_turn(list(texts))

    def compress(self, focus: str | None = None) -> Compaction | None:
        """/compress [focus]: compress now, past the automatic gate; clears the anti-thrash breaker."""
        if self.compactor is None:
            raise RuntimeError("this agent has no compactor (compression is disabled)")
        with self._turn_lock:
            self._start_session()
            self.compactor.policy.reset_manual()
            return self._compress("manual", focus)

    def new_session(self) -> str:
        """/new: end this conversation and start an empty one (a new logical conversation)."""
        with self._turn_lock:
            old, prompt = self.session.id, self.session.system_prompt
            self.close("new_session")
            self.session = Session(system_prompt=self.memory.fresh_prompt(prompt) if self.memory else prompt,
                                   source=self.session.source)
            self._reset_context()
            self._switched(old)
            return self.session.id

    def branch(self) -> str:
        """/branch: continue in a child session with the same history; the parent stays as it was."""
        with self._turn_lock:
            self._start_session()
            parent = self.session
            self.close("branched")
            self.session = Session.with_history(
                list(parent.messages), parent_session_id=parent.id, reason="branch", source=parent.source,
                title=next_title(parent.title, title_from(self._first_user_text(parent))), turns=parent.turns)
            if self.compactor is not None:
                self.compactor.state = copy.deepcopy(self.compactor.state)
                self.compactor.policy.state = self.compactor.state
            self._start_session()
            self._switched(parent.id)
            return self.session.id

    def resume(self, session_id: str, messages: list[dict[str, Any]], *, next_seq: int, turns: int = 0) -> None:
        """/resume: continue a logged session from its stored history (already in the log)."""
        with self._turn_lock:
            old = self.session.id
            self.close("resumed_other")
            self.session = Session.with_history(messages, id=session_id, reason="resume", source=self.session.source,
                                                next_seq=next_seq, logged=len(messages), turns=turns)
            self._reset_context()
            self._start_session()
            self._switched(old)

    # ------------------------------------------------------------ the turn

    def _run_turn(self, texts: list[str]) -> TurnResult:
        text = "\n\n".join(texts)
        if texts and not self.session.started and self.session.title is None and self.session.reason == "new":
            self.session.title = title_from(texts[0])
        self._start_session()
        self.session.turns += 1
        self._trace_id = new_trace_id()
        self._api_calls = 0
        self._turn_added = []
        self._begin_recovery()
        result = TurnResult(text="", status="completed")
        self._emit(TurnStarted, user_text=text)
        recalled = self.memory.recall(text, self.session.id) if self.memory is not None and texts else None
        if recalled is not None:
            self._add_message(recalled, None)
        parent = self.session.message_ids[-1] if not texts and self.session.message_ids else None
        for part in texts:
            parent = self._add_message({"role": "user", "content": strip_surrogates(part)}, parent)
        try:
            if self.compactor is not None:
                self.compactor.policy.begin_turn()
                if self.compactor.state.original_task is None and texts:
                    self.compactor.state.original_task = texts[0]
                self._preflight()
            result.text, result.status = self._loop(parent, result)
        except (TurnInterrupted, KeyboardInterrupt):
            result.status = "interrupted"
            last = self.messages[-1]
            result.text = (last.get("content") or "") if last.get("_interrupted") else ""
        except ProviderError as exc:
            result.status, result.error = "failed", str(exc)
            self._emit(ErrorEvent, error_class=exc.error_type or "provider_error", message=exc.message,
                       status_code=exc.status, fatal=True)
            final = exc.final_text if isinstance(exc, RecoveryFailed) else None
            result.text = final or f"The model call failed and the turn stopped: {exc}"
        self._recovery_log.settle(f"turn {result.status}")
        self._close_open_tool_calls()
        result.messages = list(self._turn_added)
        result.api_calls = self._api_calls
        self._emit(TurnFinished, status=result.status, final_text=result.text, api_calls=result.api_calls,
                   prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens,
                   error=result.error)
        if self.memory is not None:
            self.memory.end_turn(self, result)
        return result

    def _loop(self, parent: str, result: TurnResult) -> tuple[str, str]:
        self_check_pending = self.config.agent.self_check
        for iteration in range(self.config.agent.max_iterations):
            self._check_stop()
            if iteration and self.compactor is not None:
                self._maybe_compress("pressure", self._context_tokens())
            response = self._next_response(self.messages + self._scaffold, result)
            if response is None:
                continue
            if response.message.get("_interrupted"):
                self._add_message(response.message, parent)
                raise TurnInterrupted
            if is_empty(response):
                final = self._recover_empty(response, parent)
                if final is None:
                    continue
                return final, "completed"
            self._reply_was_usable()
            calls = tool_calls_of(response.message)
            if not calls and self_check_pending:
                self_check_pending = False
                draft = dict(response.message)
                checked = self._next_response(
                    self.messages + [draft, {"role": "user", "content": SELF_CHECK_PROMPT}], result)
                if checked is None:
                    continue
                if not checked.message.get("_interrupted") and not is_empty(checked):
                    response = checked
                calls = tool_calls_of(response.message)
            arguments = self._tool_arguments(response.message)
            assistant = self._clean_assistant(response.message, arguments)
            assistant_id = self._add_message(assistant, parent)
            if not calls:
                return assistant["content"], "completed"
            self._run_tools(calls, assistant_id, arguments)
            parent = assistant_id
            if self.compactor is not None and self.last_prompt_tokens is not None:
                self._maybe_compress("turn", self.last_prompt_tokens)
        return "Stopped: the turn used its whole iteration budget.", "max_iterations"

    # ------------------------------------------------------------ model calls

    def _next_response(self, messages: list[dict[str, Any]], result: TurnResult) -> ChatResponse | None:
        """A reply to ``messages`` (cut replies continued, text repaired), or None when the loop must ask again."""
        try:
            response = self._repaired_reply(self._call_model(messages, result))
            if is_truncated(response) and not response.message.get("_interrupted"):
                response = self._complete_truncated(messages, response, result)
        except ContextTooLarge as signal:
            self._recover_from_overflow(signal.fault)
            return None
        if not response.message.get("_interrupted") and self._retry_malformed(response):
            return None
        return response

    def _call_model(self, messages: list[dict[str, Any]], result: TurnResult, *,
                    max_tokens: int | None = None) -> ChatResponse:
        """One model call; each failed attempt goes to the recovery chain until a response arrives or it gives up."""
        call_index = self._api_calls
        self._api_calls += 1
        call = CallState()
        attempt = 0
        while True:
            attempt += 1
            slot = self.recovery.active
            request = ChatRequest(
                messages=repaired_request(list(messages), slot.repairs),
                model=slot.model,
                tools=self.tools.schemas() or None,
                max_tokens=max_tokens or self.config.model.max_tokens,
                temperature=self.config.model.temperature,
            )
            counted = self._count_request(messages, request.tools)
            estimate = self.calibration.apply(counted)
            self._emit(ApiCallStarted, call_index=call_index, attempt=attempt,
                       estimated_prompt_tokens=estimate, message_count=len(messages))
            started = time.perf_counter()
            try:
                response = self._receive(request, slot.provider)
            except RECOVERABLE_ERRORS as exc:
                fault = classify(exc, self._size(estimate, len(messages)))
                self._emit(ApiCallFinished, call_index=call_index, attempt=attempt, model=request.model,
                           estimated_prompt_tokens=estimate, latency_ms=_ms_since(started),
                           error_class=fault.name, error_message=fault.message, status_code=fault.status)
                self._recovery_log.settle(f"failed: {fault.name}")
                if fault.partial_text:
                    self._partial = (len(messages), fault.partial_text)
                messages = self._follow(self.recovery.after_failure(fault, call), fault, attempt, messages)
                continue
            usage, estimated = self._usage_of(response, request, estimate)
            if not estimated:
                self.calibration.observe(counted, usage.prompt_tokens)
                self.last_prompt_tokens, self.last_prompt_messages = usage.prompt_tokens, len(messages)
                if self.compactor is not None:
                    self.compactor.policy.observe_prompt_tokens(usage.prompt_tokens)
            _add_usage(result.usage, usage)
            self._emit(ApiCallFinished, call_index=call_index, attempt=attempt, model=response.model or request.model,
                       estimated_prompt_tokens=estimate, prompt_tokens=usage.prompt_tokens,
                       completion_tokens=usage.completion_tokens, cache_read_tokens=usage.cache_read_tokens,
                       cache_write_tokens=usage.cache_write_tokens, reasoning_tokens=usage.reasoning_tokens,
                       usage_estimated=estimated, latency_ms=_ms_since(started),
                       finish_reason=response.finish_reason)
            return response

    def _receive(self, request: ChatRequest, provider: Provider) -> ChatResponse:
        """Stream a response, publishing deltas; a stop request keeps the partial text."""
        if not self.config.agent.stream:
            return provider.complete(request)
        parts: list[str] = []
        stream = provider.stream(request)
        try:
            for item in stream:
                if isinstance(item, ChatResponse):
                    return item
                if isinstance(item, StreamDelta):
                    if item.text:
                        parts.append(item.text)
                        self._emit(TextDelta, text=repair_surrogates(item.text))
                    if item.reasoning:
                        self._emit(TextDelta, text=repair_surrogates(item.reasoning), reasoning=True)
                if self._stop.is_set():
                    partial = "".join(parts)
                    return ChatResponse(
                        message={"role": "assistant", "content": partial, "_interrupted": True},
                        finish_reason="interrupted", usage=None, model=request.model,
                    )
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        raise ProviderError("the stream ended without a final response", error_type="invalid_response")

    def _count_request(self, messages: list[dict[str, Any]], tools: list[dict] | None) -> int:
        """Local token count of a request; the session history part is counted incrementally."""
        history = self.session.messages
        if messages is history or (history and len(messages) >= len(history) and messages[len(history) - 1] is history[-1]):
            extra = messages[len(history):]
            counted = self.history_tokens.total(history) + sum(self.counter.count_message(m) for m in extra)
        else:
            counted = sum(self.counter.count_message(m) for m in messages)
        return counted + REPLY_PRIMING + self.counter.count_tools(tools)

    def _usage_of(self, response: ChatResponse, request: ChatRequest, estimate: int) -> tuple[Usage, bool]:
        """The provider's usage, or our estimate (flagged) when it reported none."""
        if response.usage is not None:
            return response.usage, False
        message = response.message
        completion = count_text(message.get("content") or "") + sum(
            count_text(c["function"].get("arguments", "")) for c in tool_calls_of(message)
        )
        return Usage(prompt_tokens=estimate, completion_tokens=completion), True

    # ------------------------------------------------------------ context

    def _context_tokens(self) -> int:
        """The next request's size in the unit the compression thresholds use."""
        tools = self.tools.schemas() or None
        if self.compactor.cfg.estimator == "rough":
            return self.compactor.estimate_request(self.messages, tools)
        return self.calibration.apply(self._count_request(self.messages, tools))

    def _preflight(self) -> None:
        """Before the turn's first call: compress until under the threshold, at most three passes."""
        for _ in range(PREFLIGHT_PASSES):
            tokens, count = self._context_tokens(), len(self.messages)
            if not self.compactor.policy.should_compress(tokens, "preflight"):
                return
            compaction = self._compress("preflight")
            if compaction is None or not compaction.changed:
                return
            if not made_progress(count, tokens, len(self.messages), self._context_tokens()):
                return

    def _maybe_compress(self, trigger: str, tokens: int) -> None:
        if self.compactor.policy.should_compress(tokens, trigger):
            self._compress(trigger)

    def _compress(self, trigger: str, focus: str | None = None) -> Compaction | None:
        """Run the compactor and apply what it produced: rotation or in-place, always logged."""
        compaction = self.compactor.run(self.messages, trigger=trigger, focus=focus, tools=self.tools.schemas() or None)
        if compaction is None:
            return None
        result, in_place = compaction.result, self.compactor.cfg.in_place
        mode = ("in_place" if in_place else "rotation") if compaction.changed else "none"
        if mode != "none" and self.memory is not None:  # the rebuilt context shows memory as it is now
            compaction.messages = self.memory.refreshed(compaction.messages)
        child: Session | None = None
        if mode == "rotation":
            child = Session.with_history(
                compaction.messages, parent_session_id=self.session.id, reason="compression",
                source=self.session.source, turns=self.session.turns,
                title=next_title(self.session.title, title_from(self._first_user_text(self.session))))
        record = getattr(result, "record", {}) or {}
        plan = getattr(result, "plan", None)
        summary = result.summary_text or ""
        self._emit(CompressionEvent, trigger=trigger, strategy=self.compactor.cfg.strategy,
                   tokens_before=result.tokens_before, tokens_after=result.tokens_after,
                   messages_before=len(self.messages), messages_after=len(compaction.messages),
                   compress_start=plan.boundary.start if plan else None,
                   compress_end=plan.boundary.end if plan else None,
                   summary_tokens=self.counter.count_message({"role": "user", "content": summary}) if summary else 0,
                   duration_ms=compaction.duration_ms, effective=not compaction.verdict.get("ineffective", False),
                   fallback_used=result.fallback_used, mode=mode, new_session_id=child.id if child else None,
                   archived_before_seq=self.session.next_seq if mode == "in_place" else None,
                   details={**record, "verdict": compaction.verdict, "window": compaction.window})
        if mode == "rotation":
            parent_id = self.session.id
            self.close("compression")
            self.session = child
            self._start_session()
            self._switched(parent_id)
        elif mode == "in_place":
            self.session.replace_history(compaction.messages)
            self._announce(range(len(self.session.messages)))
        if mode != "none":
            self.last_prompt_tokens = None
            count = self.compactor.state.compression_count
            if count >= 2 and not self._warned_repeated_compression:
                self._warned_repeated_compression = True
                self._emit(Notice, level="warning",
                           text=f"the context was compressed {count} times; details from early turns may be lost")
        return compaction

    def _reset_context(self) -> None:
        self.last_prompt_tokens = None
        self._warned_repeated_compression = False
        if self.compactor is not None:
            self.compactor.reset()

    @staticmethod
    def _first_user_text(session: Session) -> str:
        return next((m.get("content") for m in session.messages
                     if m.get("role") == "user" and isinstance(m.get("content"), str)), "") or ""

    # ------------------------------------------------------------ recovery

    def _begin_recovery(self) -> None:
        self.recovery.begin_turn()
        self._empty.reset()
        self._scaffold, self._partial, self._argument_retries = [], None, 0

    def _reply_was_usable(self) -> None:
        self._scaffold, self._partial = [], None
        self._empty.reset()
        self._recovery_log.settle(RECOVERED)

    def _report_recovery(self, action: RecoveryAction, outcome: str) -> None:
        self._emit(RecoveryEvent, fault_class=action.fault, action=action.action, attempt=action.attempt,
                   delay_s=action.delay_s, outcome=outcome)

    def _size(self, estimate: int, count: int) -> SessionSize:
        window = self.compactor.window if self.compactor is not None else self.config.model.context_length
        return SessionSize(tokens=max(self.last_prompt_tokens or 0, estimate), messages=count, window=window)

    def _follow(self, decision: Decision, fault: Classification, attempt: int,
                messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Carry out the chain's decision; returns the messages to send next (repaired when needed)."""
        if decision.action == "compress":
            raise ContextTooLarge(fault)
        if decision.action == "give_up":
            self._recovery_log.record(fault.name, "give_up", attempt, decision.reason)
            raise RecoveryFailed(fault.name, decision.reason, status=fault.status)
        name = {"repair": decision.repair, "refresh": "refresh_credentials"}.get(decision.action, decision.action)
        self._recovery_log.open(fault.name, name, attempt, decision.delay)
        if decision.action == "retry":
            self._wait(decision.delay)
        elif decision.action == "fallback":
            self._emit(Notice, level="warning", text=f"falling back: {decision.reason}")
        elif decision.repair == "repair_encoding":
            return self._repair_encoding(messages)
        elif decision.action == "repair":
            self.recovery.active.repairs.add(decision.repair)
        return messages

    def _wait(self, seconds: float) -> None:
        """Sleep in slices so that a stop request ends the wait."""
        remaining = seconds
        while remaining > 0:
            self._check_stop()
            step = min(remaining, WAIT_SLICE_SECONDS)
            self._sleep(step)
            remaining -= step
        self._check_stop()

    def _repair_encoding(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Fix unencodable text in the history for good, and in the pending request."""
        history = self.session.messages
        replaced: dict[int, dict[str, Any]] = {}
        for index, message in enumerate(history):
            fixed = repair_message_encoding(message)
            if fixed is not None:
                replaced[id(message)] = history[index] = fixed
        return [replaced.get(id(m)) or repair_message_encoding(m) or m for m in messages]

    def _repaired_reply(self, response: ChatResponse) -> ChatResponse:
        fixed = repair_message_encoding(response.message)
        if fixed is None:
            return response
        self._recovery_log.record("codec_error", "repair_encoding", 1, "repaired the reply's text")
        return dataclasses.replace(response, message=fixed)

    def _complete_truncated(self, messages: list[dict[str, Any]], response: ChatResponse,
                            result: TurnResult) -> ChatResponse:
        """A reply cut by the output limit, continued or asked again (see ``recovery.truncation``)."""
        def ask(extra: list[dict[str, Any]], cap: int) -> ChatResponse:
            return self._repaired_reply(self._call_model(messages + extra, result, max_tokens=cap))

        limit = self.config.recovery.max_continuations
        response, still_cut = complete_truncated(response, ask, self._recovery_log, limit=limit,
                                                 cap=self.config.model.max_tokens)
        if still_cut:
            self._emit(Notice, level="warning", text=f"the answer was still cut off after {limit} continuations")
        return response

    def _retry_malformed(self, response: ChatResponse) -> bool:
        """Tool calls whose arguments are not JSON: ask again (within budget) before any tool runs."""
        if not malformed_tool_calls(response.message, self._tool_arguments(response.message)):
            return False
        if self._argument_retries >= self.config.recovery.max_argument_retries:
            self._recovery_log.record("malformed_tool_arguments", "give_up", self._argument_retries,
                                      "the tools report the broken arguments to the model")
            return False
        self._argument_retries += 1
        self._recovery_log.settle("failed: malformed_tool_arguments")
        self._recovery_log.open("malformed_tool_arguments", "retry", self._argument_retries)
        return True

    def _recover_empty(self, response: ChatResponse, parent: str) -> str | None:
        """An empty reply: take the next step of the empty-response ladder; a str is the turn's final text."""
        self._recovery_log.settle("failed: empty")
        asked = len(self.messages) + len(self._scaffold)
        partial = self._partial[1] if self._partial and self._partial[0] == asked else ""
        step = self._empty.next_step(EmptyContext(
            partial_text=partial, prior_text=prior_housekeeping_text(self._turn_added),
            recent_tool_result=recent_tool_result(self.messages), inline_thinking=has_inline_thinking(response.message),
            reasoning=bool(response.reasoning), fallback_available=self.recovery.has_fallback))
        attempt = self._empty.attempt(step)
        self._scaffold = []
        if step == "partial_stream":
            self._recovery_log.record("empty", step, attempt, "kept the text of the broken stream")
            self._add_message({"role": "assistant", "content": repair_surrogates(partial)}, parent)
            return repair_surrogates(partial)
        if step == "previous_content":
            self._recovery_log.record("empty", step, attempt, "answered with the text sent with the tool calls")
            return prior_housekeeping_text(self._turn_added)
        if step == "terminal":
            self._recovery_log.record("empty", step, attempt, "gave up")
            raise RecoveryFailed("empty", "the model returned no visible content after every recovery step",
                                 final_text=EMPTY_MARKER)
        if step == "nudge":
            self._scaffold = nudge_messages()
        elif step == "prefill":
            self._scaffold = [prefill_message(response)]
        elif step == "fallback":
            self.recovery.fall_back()
            self._emit(Notice, level="warning",
                       text=f"falling back to {self.recovery.active.label} after empty replies")
        self._recovery_log.open("empty", step, attempt)
        return None

    def _recover_from_overflow(self, fault: Classification) -> None:
        """The prompt is too large: learn the real window, compress past the gate, and let the loop ask again.

        Gives up when the turn's overflow attempts are spent, or when nothing
        changed and our own count agrees that the prompt does not fit. When our
        count says it fits, the refusal was not about this prompt and one more
        try is worth it.
        """
        if self.compactor is None:
            self._give_up_overflow(fault, "compression is disabled (compression.enabled: false)", 1)
        policy = self.compactor.policy
        attempt = policy.overflow_attempts + 1
        blocked = policy.blocked_reason("overflow")
        if blocked is not None:
            self._give_up_overflow(fault, blocked, attempt)
        limit = policy.overflow_limit(fault.text, self.compactor.window)
        if limit is not None:
            self.compactor.lower_window(limit)
            self._emit(Notice, level="warning", text=f"the provider's window is {limit:,} tokens; budgets lowered")
            self._recovery_log.open(fault.name, "lower_window", attempt)
        tokens, count = self._context_tokens(), len(self.messages)
        compaction = self._compress("overflow")
        after = self._context_tokens()
        progressed = compaction is not None and compaction.changed and made_progress(count, tokens, len(self.messages),
                                                                                   after)
        if progressed:
            self._recovery_log.open(fault.name, "compress", attempt)
        elif fault.name == "payload_too_large" and "strip_images" not in self.recovery.active.repairs:
            self.recovery.active.repairs.add("strip_images")
            self._recovery_log.open(fault.name, "strip_images", attempt)
        elif limit is None and after >= self.compactor.window:
            self._give_up_overflow(fault, "the conversation cannot be compressed further", attempt)
        else:
            self._recovery_log.open(fault.name, "retry", attempt)
        self._empty.reset()

    def _give_up_overflow(self, fault: Classification, why: str, attempt: int) -> None:
        self._recovery_log.record(fault.name, "give_up", attempt, why)
        raise RecoveryFailed(fault.name, f"{fault.describe()}; {why}", status=fault.status)

    # ------------------------------------------------------------ tools

    def _tool_arguments(self, message: dict[str, Any]) -> list[dict[str, Any] | ValueError]:
        """The reply's tool-call arguments, parsed once for the malformed check, the history copy and the tools."""
        parsed_for, arguments = self._parsed_reply
        if parsed_for is not message:
            arguments = read_tool_arguments(message)
            self._parsed_reply = (message, arguments)
        return arguments

    def _run_tools(self, calls: list[dict], assistant_id: str,
                   arguments: list[dict[str, Any] | ValueError] | None = None) -> None:
        """Run one assistant message's tool calls and append their results in call order.

        The model's raw arguments go to the tools (so a broken argument becomes the
        tool's error); the history keeps the repaired copy so it stays sendable.
        """
        def started(call: dict) -> None:
            function = call.get("function") or {}
            self._emit(ToolCallStarted, tool_call_id=call.get("id", ""), name=function.get("name", ""),
                       arguments=function.get("arguments", ""))

        def finished(outcome: ToolResult) -> None:
            self._emit(ToolCallFinished, tool_call_id=outcome.tool_call_id, name=outcome.name,
                       arguments=outcome.arguments, result=outcome.content, is_error=outcome.is_error,
                       duration_ms=outcome.duration_ms, attempts=outcome.attempts)

        outcomes = execute_tool_calls(
            calls, self.tools, on_start=started, on_finish=finished, should_stop=self._stop.is_set,
            idempotent_retries=self.config.tools.idempotent_retries, parsed_arguments=arguments,
        )
        for outcome in outcomes:
            self._add_message(outcome.message(), assistant_id)
        self._check_stop()

    def _close_open_tool_calls(self) -> None:
        """After an interruption, give calls that never ran a result so history stays valid."""
        answered: set[Any] = set()  # the results after the latest assistant message: only its calls can be open
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.get("role") == "tool":
                answered.add(message.get("tool_call_id"))
            elif message.get("role") == "assistant":
                for call in tool_calls_of(message):
                    if call.get("id") not in answered:
                        self._add_message({"role": "tool", "tool_call_id": call["id"],
                                           "content": "interrupted before running"},
                                          self.session.message_ids[index])
                return
            if message.get("role") == "user":
                return

    @staticmethod
    def _clean_assistant(message: dict[str, Any],
                         arguments: list[dict[str, Any] | ValueError] | None = None) -> dict[str, Any]:
        """The assistant message as it enters history: text fixed, arguments valid JSON.

        ``arguments`` is ``read_tool_arguments(message)`` when already known: arguments
        that parsed are kept as sent, and only broken ones are repaired.
        """
        text = message.get("content") or ""
        clean: dict[str, Any] = {"role": "assistant",
                                 "content": text if isinstance(text, str) and text.isascii() else strip_surrogates(text)}
        calls = tool_calls_of(message)
        if calls:
            if arguments is None:
                arguments = read_tool_arguments(message)
            clean["tool_calls"] = [
                {
                    "id": call.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": (call.get("function") or {}).get("name", ""),
                        "arguments": _history_arguments((call.get("function") or {}).get("arguments"), parsed),
                    },
                }
                for call, parsed in zip(calls, arguments, strict=True)
            ]
        return clean

    # ------------------------------------------------------------ bookkeeping

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise TurnInterrupted

    def _switched(self, old_id: str) -> None:
        """Tell the memory provider the conversation now continues in ``self.session``."""
        if self.memory is not None:
            self.memory.session_switched(old_id, self.session.id, self.session.reason, self.session.turns)

    def _start_session(self) -> None:
        if self.session.started:
            return
        self.session.started = True
        s = self.session
        self._emit(SessionStarted, parent_session_id=s.parent_session_id, source=s.source,
                   model=self.config.model.name, title=s.title, system_prompt=s.system_prompt,
                   config_hash=self.config_hash or self.config.digest(),
                   context_length=self.config.model.context_length,
                   reason=s.reason)
        self._announce(range(s.logged, len(s.messages)))

    def _announce(self, indices: range) -> None:
        """Log history messages that entered the session other than through a turn (a new or rewritten history)."""
        s = self.session
        parent = None
        if not self.bus.wants(MessageAdded):
            return
        for index in indices:
            message, message_id = s.messages[index], s.message_ids[index]
            self._emit(MessageAdded, message_id=message_id, parent_id=parent, seq=s.seq_of(index), message=message,
                       tokens=self.counter.count_message(message))
            parent = message_id if message.get("role") != "tool" else parent

    def _add_message(self, message: dict[str, Any], parent_id: str | None) -> str:
        message_id, seq = self.session.append(message)
        self._turn_added.append(message)
        if self.bus.wants(MessageAdded):  # counting the message is for the log only
            self._emit(MessageAdded, message_id=message_id, parent_id=parent_id, seq=seq, message=message,
                       tokens=self.counter.count_message(message))
        return message_id

    def _emit(self, event_type: type[Event], **fields: Any) -> None:
        if not self.bus.wants(event_type):
            return
        self.bus.publish(event_type(session_id=self.session.id, turn=self.session.turns,
                                    trace_id=self._trace_id, run_id=self.run_id, **fields))


def _history_arguments(raw: str | None, parsed: dict[str, Any] | ValueError) -> str:
    """``repair_tool_arguments(raw)`` given the parse of ``raw``: text that parsed needs no second parse."""
    if isinstance(parsed, ValueError):
        return repair_tool_arguments(raw)
    return raw if raw and raw.strip() else "{}"


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _add_usage(total: Usage, usage: Usage) -> None:
    total.prompt_tokens += usage.prompt_tokens
    total.completion_tokens += usage.completion_tokens
    total.cache_read_tokens += usage.cache_read_tokens
    total.cache_write_tokens += usage.cache_write_tokens
    total.reasoning_tokens += usage.reasoning_tokens
