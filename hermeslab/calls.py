"""The model calls of one conversation, each through recovery: what the loop gets is a reply it can use, or None.

One call goes out with the current history (plus any scaffold recovery asked
for), streams its text to the bus, and comes back as a reply; a failure is
classified and handed to ``TurnRecovery``, whose step is carried out here
(wait and send again, repaired messages, a fallback provider) until a reply
arrives or the turn gives up. A refusal as too large goes to the caller's
overflow handler (which compresses), and the loop asks afresh. A reply cut by
the output limit is continued, and one with broken tool-call arguments is
asked for again, before the loop sees it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .context.driver import ContextDriver
from .core.config import Config
from .core.events import ApiCallFinished, ApiCallStarted, Notice, TextDelta
from .core.provider import (ESTIMATE, SERVER_TOKENIZER, ChatRequest, ChatResponse, ProviderError, StreamDelta,
                             receive, usage_or_estimate, usage_source)
from .core.tokens import count_text
from .recovery import (CallState, Classification, NoRoomToContinue, SessionSize, classify, complete_truncated,
                       is_truncated)
from .recovery.repair import repair_surrogates, repaired_request
from .recovery.turn import TurnRecovery
from .turn import TurnInterrupted, TurnResult

#: Failures of a model call that recovery classifies; anything else is a bug and propagates.
RECOVERABLE_ERRORS = (ProviderError, UnicodeError, OSError)
#: Backoff waits are slept in slices this long, so a stop request is honoured within one slice.
WAIT_SLICE_SECONDS = 0.2

Message = dict[str, Any]


class ModelCalls:
    """Asks the model for the loop; ``count`` is the number of calls this turn."""

    def __init__(self, config: Config, recovery: TurnRecovery, context: ContextDriver, *,
                 emit: Callable[..., None], stop: threading.Event, sleep: Callable[[float], None],
                 schemas: Callable[[], list[dict[str, Any]] | None], overflow: Callable[[Classification], None],
                 wants: Callable[[type], bool],
                 read_arguments: Callable[[Message], list[dict[str, Any] | ValueError]]):
        self.config, self.recovery, self.context = config, recovery, context
        self._emit, self._stop, self._sleep = emit, stop, sleep
        #: Whether anyone reads events of a type: the call events' fields are not even gathered otherwise.
        self._wants = wants
        self._read_arguments = read_arguments
        self._schemas, self._overflow = schemas, overflow
        self.count = 0
        self._parsed: tuple[Message | None, list] = (None, [])  # a reply and its parsed tool arguments
        #: What the server said that changes how its calls read (a chat template that drops the tools), for
        #: /status; None until a server said so.
        self.server_note: str | None = None
        #: Text the turn's latest failed call streamed before it broke off ("" once a later call answered): what
        #: the user saw of an answer when the turn fails.
        self.partial_text = ""
        self._props_read: set[int] = set()  # the providers whose /props were read

    def reply(self, messages: list[Message], history: list[Message], result: TurnResult) -> ChatResponse | None:
        """A reply to ``messages`` (cut replies continued, text repaired), or None when the loop must ask again."""
        response = self.call(messages, history, result)
        cap = self.config.model.max_tokens
        if response is not None and is_truncated(response, cap) and not response.message.get("_interrupted"):
            limit = self.config.recovery.max_continuations
            response, still_cut = complete_truncated(
                response, lambda extra, cap: self.call(messages + extra, history, result, max_tokens=cap,
                                                       continuing=bool(extra)),
                self.recovery.log, limit=limit, cap=cap)
            if still_cut:
                self._emit(Notice, level="warning", text="the answer is cut off at the output limit (model.max_tokens); "
                                                         "the text written so far is kept")
        if response is None or response.message.get("_interrupted"):
            return response
        return None if self.recovery.retry_malformed(response.message, self.arguments(response.message)) else response

    def call(self, messages: list[Message], history: list[Message], result: TurnResult, *,
             max_tokens: int | None = None, continuing: bool = False) -> ChatResponse | None:
        """One model call through recovery: a response, or None when the context was compressed to fit.

        A ``continuing`` call (a cut reply's continuation) that is refused as too
        large raises ``NoRoomToContinue`` instead: the window is lowered when the
        refusal states it, and the history is left as it is.
        """
        call_index, call, attempt = self.count, CallState(), 0
        self.count += 1
        while True:
            attempt += 1
            slot, tools = self.recovery.active, self._schemas()
            choice = self.config.model.tool_choice
            request = ChatRequest(messages=repaired_request(list(messages), slot.repairs), model=slot.model,
                                  tools=tools, max_tokens=max_tokens or self.config.model.max_tokens,
                                  temperature=self.config.model.temperature,
                                  extra={"tool_choice": choice} if tools and choice not in (None, "omit") else {})
            if tools and id(slot.provider) not in self._props_read:
                self._read_props(slot.provider, tools)
            counted = self.context.count_request(messages, request.tools, history)
            estimate = self.context.calibration.apply(counted)
            fields = {"call_index": call_index, "attempt": attempt, "estimated_prompt_tokens": estimate}
            if self._wants(ApiCallStarted):
                self._emit(ApiCallStarted, **fields, message_count=len(messages))
            started = time.perf_counter()
            try:
                response = receive(slot.provider, request, stream=self.config.agent.stream, on_delta=self._delta,
                                   stopped=self._stop.is_set)
            except RECOVERABLE_ERRORS as exc:
                size = SessionSize(max(self.context.last_prompt_tokens or 0, estimate), len(messages),
                                   self.context.window)
                fault = classify(exc, size)
                if fault.partial_text:
                    self.partial_text = repair_surrogates(fault.partial_text)
                self._emit(ApiCallFinished, **fields, model=request.model, latency_ms=_ms_since(started),
                           error_class=fault.name, error_message=fault.message, status_code=fault.status,
                           **_partial_fields(fault.partial_text))
                step = self.recovery.after_failure(fault, call, attempt, messages, history)
                if step.action == "compress":
                    if continuing:
                        lowered = self.context.lower_window_from(fault.text)
                        if lowered is not None:
                            self._emit(Notice, level="warning",
                                       text=f"the provider's window is {lowered:,} tokens; budgets lowered")
                        raise NoRoomToContinue
                    self._overflow(fault)
                    return None
                if step.action == "give_up":
                    raise step.failure
                if step.notice:
                    self._emit(Notice, level="warning", text=step.notice)
                self.wait(step.delay)
                messages, max_tokens = step.messages, step.max_tokens or max_tokens
                continue
            response = self.recovery.repaired_reply(response)
            self.partial_text = ""
            usage, estimated = usage_or_estimate(response, estimate)
            source = usage_source(response, estimated)
            # The messages' text alone (no template markers) reads low: not a prompt size to calibrate by.
            self.context.observe(counted, None if source in (ESTIMATE, SERVER_TOKENIZER) else usage.prompt_tokens,
                                 completion=usage.completion_tokens, history_length=len(history))
            result.add_usage(usage)
            if self._wants(ApiCallFinished):
                self._emit(ApiCallFinished, **fields, model=request.model, server_model=response.model or None,
                           prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                           cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens,
                           reasoning_tokens=usage.reasoning_tokens, usage_estimated=estimated,
                           usage_source=source,
                           latency_ms=_ms_since(started), finish_reason=response.finish_reason)
            return response

    def _read_props(self, provider: Any, tools: list[dict[str, Any]]) -> None:
        """Once per provider: a server whose chat template has no tool support (llama-server's ``/props``) never
        shows the model the tool schemas sent, so they are left out of the prompt's count, and it is said."""
        self._props_read.add(id(provider))
        read = getattr(provider, "server_props", None)
        props = read() if callable(read) else None
        if props is None or props.supports_tools is not False:
            return
        self.context.tools_dropped = True
        self.server_note = (f"the server's chat template has no tool support (/props: supports_tools false): the "
                            f"{len(tools)} tool schemas sent are dropped unread and the model cannot call a tool")
        self._emit(Notice, level="warning", text=self.server_note)

    def arguments(self, message: Message) -> list[dict[str, Any] | ValueError]:
        """The reply's tool-call arguments, parsed once for the malformed check, the history copy and the tools."""
        if self._parsed[0] is not message:
            self._parsed = (message, self._read_arguments(message))
        return self._parsed[1]

    def wait(self, seconds: float) -> None:
        """Sleep in slices so that a stop request ends the wait."""
        while seconds > 0:
            self.check_stop()
            self._sleep(min(seconds, WAIT_SLICE_SECONDS))
            seconds -= WAIT_SLICE_SECONDS
        self.check_stop()

    def check_stop(self) -> None:
        if self._stop.is_set():
            raise TurnInterrupted

    def _delta(self, delta: StreamDelta) -> None:
        text = delta.text
        if text:
            self._emit(TextDelta, text=repair_surrogates(text))
        if delta.reasoning:
            self._emit(TextDelta, text=repair_surrogates(delta.reasoning), reasoning=True)


def _partial_fields(text: str) -> dict[str, Any]:
    """A failed call that streamed text first: the text, its size, and the finish reason ``partial``."""
    if not text:
        return {}
    return {"finish_reason": "partial", "partial_text": repair_surrogates(text), "completion_tokens": count_text(text),
            "usage_estimated": True, "usage_source": ESTIMATE}


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
