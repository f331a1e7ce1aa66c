"""The agent loop: user text in, model calls and tool runs, a TurnResult out.

One user turn is a loop over model calls, each possibly followed by tool runs,
bounded by ``agent.max_iterations``. Three collaborators make the decisions
and the loop applies them: the ``ContextDriver`` says when and how to
compress, ``TurnRecovery`` says what to do about a failed or unusable call,
and the ``SessionManager`` moves the conversation between sessions. The loop
knows nothing about DuckDB or widgets: it emits typed events on a bus.
"""

from __future__ import annotations

import random
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .calls import ModelCalls
from .context.compactor import Compaction, Compactor
from .context.driver import ContextDriver
from .core.config import Config
from .core.events import (ApiCallFinished, ErrorEvent, Event, EventBus, MessagesWithdrawn, Notice, RecoveryEvent,
                          TurnFinished, TurnStarted)
from .core.messages import open_tool_calls, strip_surrogates, tool_calls_of
from .core.provider import Provider, ProviderError, Usage
from .core.tokens import TokenCounter, count_text, default_counter
from .recovery import Classification, CredentialRefresh, ProviderSlot, RecoveryAction, RecoveryFailed, is_empty
from .recovery.repair import history_copy, read_tool_arguments
from .recovery.turn import TurnRecovery
from .session import Session, SessionManager, new_trace_id, title_from
from .tools.executor import execute_tool_calls, tool_events
from .tools.registry import ToolRegistry
from .turn import TurnInterrupted, TurnResult

if TYPE_CHECKING:
    from .memory.manager import Memory

__all__ = ["Agent", "TurnInterrupted", "TurnResult"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant working in a local workspace through tools. "
    "Use a tool when the answer depends on files, commands or saved notes; answer directly otherwise. "
    "Report tool errors plainly and never invent file contents or command output."
)
SELF_CHECK_PROMPT = (
    "Before you finish: check your answer against the conversation and the tool results above. "
    "If something is wrong or unsupported, correct it; otherwise repeat the answer unchanged."
)


class Agent:
    """One conversation with one provider and one tool registry."""

    def __init__(self, provider: Provider, *, config: Config | None = None, tools: ToolRegistry | None = None,
                 bus: EventBus | None = None, session: Session | None = None, source: str = "cli",
                 counter: TokenCounter = default_counter, sleep: Callable[[float], None] = time.sleep,
                 compactor: Compactor | None = None, fallbacks: Sequence[ProviderSlot] = (),
                 refresh_credentials: CredentialRefresh | None = None, rng: random.Random | None = None,
                 run_id: str | None = None, config_hash: str | None = None, memory: Memory | None = None):
        self.config = config = config or Config()
        self.memory = memory  # memory files, skills, background review and memory provider; None runs without
        self.tools = tools if tools is not None else ToolRegistry()  # an empty registry is falsy, yet given
        self.bus, self.counter = bus if bus is not None else EventBus(), counter
        #: Stamped on every event, so the rows of a replay or an A/B run can be told apart.
        self.run_id = run_id
        #: The hash SessionStarted reports (a replay reports the config it was given, not its adjusted copy).
        self.config_hash = config_hash
        self.recovery = TurnRecovery(config.recovery, ProviderSlot(provider, config.model.name), fallbacks,
                                     max_retries=max(0, config.agent.api_max_retries), report=self._report,
                                     refresh=refresh_credentials, rng=rng)
        self.context = ContextDriver(compactor, context_length=config.model.context_length, counter=counter)
        if compactor is not None and hasattr(compactor.summariser, "on_call"):  # its model calls join the log
            compactor.summariser.on_call = lambda **fields: self._emit(ApiCallFinished, purpose="summary", **fields)
        fresh = memory.fresh_prompt if memory is not None else (lambda text: text)
        switched = (lambda old, new: memory.session_switched(old, new.id, new.reason, new.turns)) if memory else None
        self.sessions = SessionManager(
            session or Session(system_prompt=fresh(config.agent.system_prompt or DEFAULT_SYSTEM_PROMPT), source=source),
            emit=self._emit, wants=self.bus.wants, counter=counter, started_fields=self._started_fields,
            fresh_prompt=fresh, on_switch=switched,
            prompt_size=lambda messages: self.context.estimate(messages, self._schemas()))
        if memory is not None:
            memory.attach(self.bus)
        self._stop, self._turn_lock = threading.Event(), threading.Lock()
        self.calls = ModelCalls(config, self.recovery, self.context, emit=self._emit, stop=self._stop, sleep=sleep,
                                schemas=self._schemas, overflow=self._overflow, wants=self.bus.wants,
                                read_arguments=self._read_arguments)
        self._trace_id, self._turn_added = "", []
        self._warned_repeated_compression = False

    # ------------------------------------------------------------ public API

    session = property(lambda self: self.sessions.session, doc="The session the conversation is in now.")
    messages = property(lambda self: self.sessions.session.messages, doc="The history sent to the model.")
    compactor = property(lambda self: self.context.compactor, doc="The compactor; None without compression.")

    @property
    def provider(self) -> Provider:
        """The primary provider (a refreshed credential replaces it; fallbacks live in ``recovery``)."""
        return self.recovery.chain.primary.provider

    @provider.setter
    def provider(self, provider: Provider) -> None:
        self.recovery.chain.primary.provider = provider

    def interrupt(self) -> None:
        """Ask the running turn to stop at the next safe point (thread-safe)."""
        self._stop.set()

    def close(self, reason: str = "agent_close") -> None:
        self.sessions.close(reason)

    def chat(self, text: str) -> TurnResult:
        """Run one user turn to its end. Concurrent calls wait for each other."""
        return self.run_turn([text])

    def run_turn(self, texts: Sequence[str] = ()) -> TurnResult:
        """Append ``texts`` as user messages, then run the turn to its end.

        No text lets the model speak on the history as it stands (an agent that
        greets first); several are messages that arrived while nobody answered.
        """
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("run_turn() takes a list of user texts (use chat() for a single one)")
        with self._turn_lock:
            self._stop.clear()
            return self._run_turn(list(texts))

    def compress(self, focus: str | None = None) -> Compaction | None:
        """/compress [focus]: compress now, past the automatic gate; clears the anti-thrash breaker."""
        with self._turn_lock:
            self.sessions.start()
            return self._apply(self.context.manual(self.messages, self._schemas(), focus))

    def new_session(self) -> str:
        """/new: end this conversation and start an empty one (a new logical conversation)."""
        with self._turn_lock:
            self._warned_repeated_compression = False
            self.context.reset()
            return self.sessions.new()

    def branch(self) -> str:
        """/branch: continue in a child session with the same history; the parent stays as it was."""
        with self._turn_lock:
            self.context.fork()
            return self.sessions.branch()

    def resume(self, session_id: str, messages: list[dict[str, Any]], *, next_seq: int, turns: int = 0) -> None:
        """/resume: continue a logged session from its stored history (already in the log)."""
        with self._turn_lock:
            self._warned_repeated_compression = False
            self.context.reset()
            self.sessions.resume(session_id, messages, next_seq=next_seq, turns=turns)

    # ------------------------------------------------------------ the turn

    def _run_turn(self, texts: list[str]) -> TurnResult:
        session, result, text = self.session, TurnResult(text="", status="completed"), "\n\n".join(texts)
        if texts and not session.started and session.title is None and session.reason == "new":
            session.title = title_from(texts[0])
        self.sessions.start()
        self.session.turns += 1
        self._trace_id, self._turn_added, self.calls.count = new_trace_id(), [], 0
        self.calls.partial_text = ""
        self.recovery.begin_turn()
        self._emit(TurnStarted, user_text=text)
        users = [{"role": "user", "content": strip_surrogates(t)} for t in texts]
        too_large = self.context.too_large(users, self.messages, self._schemas())
        recall = self.memory is not None and texts and too_large is None
        recalled = self.memory.recall(text, self.session.id) if recall else None
        if recalled is not None:
            self._add(recalled, None)
        parent = self.session.message_ids[-1] if not texts and self.session.message_ids else None
        for message in users if too_large is None else ():  # a message that cannot fit never enters the history
            parent = self._add(message, parent)
        try:
            if too_large is not None:
                raise RecoveryFailed("input_too_large", too_large, final_text=too_large)
            self.context.begin_turn(texts[0] if texts else None)
            while (preflight := self.context.preflight(self.messages, self._schemas())) is not None:
                self._apply(preflight)
            result.text, result.status = self._loop(parent, result)
        except (TurnInterrupted, KeyboardInterrupt):
            result.status, last = "interrupted", self.messages[-1]
            result.text = (last.get("content") or "") if last.get("_interrupted") else ""
        except ProviderError as exc:
            result.status, result.error = "failed", str(exc)
            self._emit(ErrorEvent, error_class=exc.error_type or "provider_error", message=exc.message,
                       status_code=exc.status, fatal=True)
            final = exc.final_text if isinstance(exc, RecoveryFailed) else None
            result.text = final or f"The model call failed and the turn stopped: {exc}"
            self._keep_partial_answer(result)
            unanswered = all(m.get("role") == "user" for m in self._turn_added)
            if unanswered and self.config.compression.withdraw_unanswered_input:
                ids = list(self.session.message_ids)
                taken = self.sessions.withdraw(self._turn_added)
                if taken:
                    self._emit(MessagesWithdrawn, message_ids=ids[len(ids) - taken:])
        self.recovery.end_turn(result.status)
        self._close_open_tool_calls()
        result.messages, result.api_calls = list(self._turn_added), self.calls.count
        self._emit(TurnFinished, status=result.status, final_text=result.text, api_calls=result.api_calls,
                   prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens,
                   error=result.error)
        if self.memory is not None:
            self.memory.end_turn(self, result)
        return result

    def _loop(self, parent: str | None, result: TurnResult) -> tuple[str, str]:
        self_check_pending = self.config.agent.self_check
        for iteration in range(self.config.agent.max_iterations):
            self.calls.check_stop()
            self._apply(self.context.before_call(self.messages, self._schemas(), first=not iteration))
            self._apply(self.context.before_send(self.messages, self._schemas()))
            sent = self.context.wire(self.messages) + self.recovery.scaffold  # as the request carries it
            response = self.calls.reply(sent, self.messages, result)
            if response is None:
                continue
            if response.message.get("_interrupted"):
                self._add(response.message, parent)
                raise TurnInterrupted
            if is_empty(response):
                step = self.recovery.empty_reply(response, len(self.messages) + len(self.recovery.scaffold),
                                                 self._turn_added, self.messages)
                self._notice(step.notice)
                if step.action == "give_up":
                    raise step.failure
                if step.action == "answer" and step.keep:
                    self._add({"role": "assistant", "content": step.text}, parent)
                if step.action == "answer":
                    return step.text, "completed"
                continue
            self.recovery.usable_reply()
            if not tool_calls_of(response.message) and self_check_pending:
                self_check_pending = False
                checked = self.calls.reply(self.messages + [dict(response.message), {"role": "user", "content":
                                                                                     SELF_CHECK_PROMPT}],
                                           self.messages, result)
                if checked is None:
                    continue
                response = response if checked.message.get("_interrupted") or is_empty(checked) else checked
            calls, arguments = tool_calls_of(response.message), self.calls.arguments(response.message)
            parent = self._add(assistant := history_copy(response.message, arguments), parent)
            if not calls:
                return assistant["content"], "completed"
            self._run_tools(calls, parent, arguments)
            self._apply(self.context.after_tools(self.messages, self._schemas()))
        return "Stopped: the turn used its whole iteration budget.", "max_iterations"

    def _keep_partial_answer(self, result: TurnResult) -> None:
        """A failed turn whose answer had begun to stream keeps what the user saw of it, marked interrupted."""
        partial = self.calls.partial_text
        if not partial.strip():
            return
        parent = self.session.message_ids[-1] if self.session.message_ids else None
        self._add({"role": "assistant", "content": partial, "_interrupted": True}, parent)
        result.add_usage(Usage(completion_tokens=count_text(partial)))

    def _overflow(self, fault: Classification) -> None:
        """The prompt is too large: the driver compresses (maybe to a lowered window); give up when it cannot help."""
        step = self.context.overflow(self.messages, self._schemas(), fault.text,
                                     payload_too_large=fault.name == "payload_too_large",
                                     images_stripped="strip_images" in self.recovery.active.repairs)
        if step.lowered_window is not None:
            self._notice(f"the provider's window is {step.lowered_window:,} tokens; budgets lowered")
        for compaction in step.compactions:
            self._apply(compaction)
        failed = self.recovery.after_overflow(fault, step.action, step.attempt, step.reason, step.lowered_window)
        if failed is not None:
            raise failed.failure

    # ------------------------------------------------------------ context and tools

    def _apply(self, compaction: Compaction | None) -> Compaction | None:
        """Apply what the context driver produced (rotation or in place, always logged); warn when it repeats."""
        if compaction is None:
            return None
        if compaction.changed and self.memory is not None:  # the rebuilt context shows memory as it is now
            compaction.messages = self.memory.refreshed(compaction.messages)
        self.sessions.apply(compaction, strategy=compaction.strategy, in_place=self.compactor.cfg.in_place)
        count = self.compactor.state.compression_count
        if compaction.changed and count >= 2 and not self._warned_repeated_compression:
            self._warned_repeated_compression = True
            self._notice(f"the context was compressed {count} times; details from early turns may be lost")
        return compaction

    def _read_arguments(self, message: dict[str, Any]) -> list[dict[str, Any] | ValueError]:
        """A reply's tool-call arguments, parsed (``recovery.repair.read_tool_arguments``)."""
        return read_tool_arguments(message)

    def _schemas(self) -> list[dict[str, Any]] | None:
        return self.tools.schemas() or None

    def _run_tools(self, calls: list[dict], assistant_id: str, arguments: list[dict[str, Any] | ValueError]) -> None:
        """Run one assistant message's tool calls (raw arguments, so a broken one is the tool's error) in order."""
        started, finished = tool_events(self._emit)
        for outcome in execute_tool_calls(calls, self.tools, on_start=started, on_finish=finished,
                                          should_stop=self._stop.is_set, parsed_arguments=arguments,
                                          idempotent_retries=self.config.tools.idempotent_retries):
            self._add(outcome.message(), assistant_id)
        self.calls.check_stop()

    def _close_open_tool_calls(self) -> None:
        """After an interruption, give calls that never ran a result so history stays valid."""
        index, ids = open_tool_calls(self.messages) or (0, [])
        for call_id in ids:
            self._add({"role": "tool", "tool_call_id": call_id, "content": "interrupted before running"},
                      self.session.message_ids[index])

    # ------------------------------------------------------------ bookkeeping

    def _add(self, message: dict[str, Any], parent_id: str | None) -> str:
        self._turn_added.append(message)
        return self.sessions.add(message, parent_id)

    def _started_fields(self) -> dict[str, Any]:
        return {"model": self.config.model.name, "config_hash": self.config_hash or self.config.digest(),
                "context_length": self.config.model.context_length}

    def _report(self, action: RecoveryAction, outcome: str) -> None:
        self._emit(RecoveryEvent, fault_class=action.fault, action=action.action, attempt=action.attempt,
                   delay_s=action.delay_s, outcome=outcome)

    def _notice(self, text: str | None) -> None:
        if text:
            self._emit(Notice, level="warning", text=text)

    def _emit(self, event_type: type[Event], **fields: Any) -> None:
        if self.bus.wants(event_type):
            session = self.sessions.session  # read once: this runs for every streamed fragment
            self.bus.publish(event_type(session_id=session.id, turn=session.turns,
                                        trace_id=self._trace_id, run_id=self.run_id, **fields))

