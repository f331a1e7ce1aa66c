"""Everything one turn needs when a call fails or its reply cannot be used, behind typed outcomes.

The agent reports what happened (a classified failure, an empty reply, broken
tool-call arguments, a refusal as too large after the context driver ran) and
gets back what to do: send again (after a wait, with repaired messages, a
lower output cap or extra scaffolding), compress and ask again, answer with a
text at hand, or give up with a message for people. The budgets of the turn
(retries, empty reply steps, argument retries), the provider slots and the log
of actions live here, so the loop only applies decisions.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.config import RecoveryConfig
from ..core.provider import ChatResponse
from .chain import CallState, CredentialRefresh, ProviderSlot, RecoveryChain, RecoveryFailed
from .classify import Classification
from .empty import (
    EMPTY_MARKER,
    EmptyContext,
    EmptyRecovery,
    has_inline_thinking,
    nudge_messages,
    prefill_message,
    prior_housekeeping_text,
    recent_tool_result,
)
from .log import RECOVERED, RecoveryAction, RecoveryLog
from .repair import malformed_tool_calls, repair_message_encoding, repair_surrogates

Message = dict[str, Any]


@dataclass(frozen=True)
class FailureStep:
    """After a failed attempt: ``send`` (again, after ``delay``), ``compress`` (too large) or ``give_up``."""

    action: str
    messages: list[Message] | None = None
    delay: float = 0.0
    failure: RecoveryFailed | None = None
    #: A warning for people (a switch to a fallback provider).
    notice: str | None = None
    #: The output cap for the rest of this call's attempts (the provider said the requested one does not fit).
    max_tokens: int | None = None


@dataclass(frozen=True)
class EmptyStep:
    """After an empty reply: ``answer`` with ``text`` (``keep`` it as the reply when set), ``ask_again``
    (with the recovery's scaffold), or ``give_up``."""

    action: str
    text: str = ""
    keep: bool = False
    failure: RecoveryFailed | None = None
    notice: str | None = None


class TurnRecovery:
    """The recovery state of one conversation: provider slots, per-turn budgets and the action log."""

    def __init__(self, cfg: RecoveryConfig, primary: ProviderSlot, fallbacks: Sequence[ProviderSlot] = (), *,
                 max_retries: int, report: Callable[[RecoveryAction, str], None],
                 refresh: CredentialRefresh | None = None, rng: random.Random | None = None):
        self.cfg = cfg
        self.chain = RecoveryChain(cfg, primary, fallbacks, max_retries=max_retries, refresh=refresh, rng=rng)
        self.log = RecoveryLog(report)
        self._empty = EmptyRecovery(cfg)
        #: Messages sent after the history for the next call only (an empty-reply nudge, a thinking prefill).
        self.scaffold: list[Message] = []
        #: Text of a stream that broke, with the length of the message list it answered.
        self._partial: tuple[int, str] | None = None
        self._argument_retries = 0

    @property
    def active(self) -> ProviderSlot:
        return self.chain.active

    def begin_turn(self) -> None:
        self.chain.begin_turn()
        self._empty.reset()
        self.scaffold, self._partial, self._argument_retries = [], None, 0

    def usable_reply(self) -> None:
        """A reply the loop can use: the open actions worked, the empty-reply ladder starts again."""
        self.scaffold, self._partial = [], None
        self._empty.reset()
        self.log.settle(RECOVERED)

    def end_turn(self, status: str) -> None:
        self.log.settle(f"turn {status}")

    # ------------------------------------------------------------ failed calls

    def after_failure(self, fault: Classification, call: CallState, attempt: int, messages: list[Message],
                      history: list[Message]) -> FailureStep:
        """The next step after a failed attempt. A repaired encoding is fixed in ``history`` for good."""
        self.log.settle(f"failed: {fault.name}")
        if fault.partial_text:
            self._partial = (len(messages), fault.partial_text)
        decision = self.chain.after_failure(fault, call)
        if decision.action == "compress":
            return FailureStep("compress")
        if decision.action == "give_up":
            return self.give_up(fault, decision.reason, attempt, decision.reason)
        name = {"repair": decision.repair, "refresh": "refresh_credentials"}.get(decision.action, decision.action)
        self.log.open(fault.name, name, attempt, decision.delay)
        if decision.action == "retry":
            return FailureStep("send", messages, delay=decision.delay)
        if decision.action == "fallback":
            return FailureStep("send", messages, notice=f"falling back: {decision.reason}")
        if decision.repair == "repair_encoding":
            return FailureStep("send", _repair_encoding(messages, history))
        if decision.repair == "lower_output_cap":
            return FailureStep("send", messages, max_tokens=lowered_output_cap(fault))
        if decision.action == "repair":
            self.active.repairs.add(decision.repair)
        return FailureStep("send", messages)

    def give_up(self, fault: Classification, why: str, attempt: int, message: str) -> FailureStep:
        """Log why the turn ends here; ``message`` is what people read as the failure."""
        self.log.record(fault.name, "give_up", attempt, why)
        return FailureStep("give_up", failure=RecoveryFailed(fault.name, message, status=fault.status))

    def after_overflow(self, fault: Classification, action: str, attempt: int, reason: str,
                       lowered_window: int | None) -> FailureStep | None:
        """Log what the context driver did about a refusal as too large; a FailureStep only to give up."""
        if lowered_window is not None:
            self.log.open(fault.name, "lower_window", attempt)
        if action == "give_up":
            return self.give_up(fault, reason, attempt, f"{fault.describe()}; {reason}")
        if action == "strip_images":
            self.active.repairs.add("strip_images")
        self.log.open(fault.name, action, attempt)
        self._empty.reset()
        return None

    # ------------------------------------------------------------ unusable replies

    def repaired_reply(self, response: ChatResponse) -> ChatResponse:
        """The reply with text that cannot be encoded fixed (logged), or the reply itself."""
        fixed = repair_message_encoding(response.message)
        if fixed is None:
            return response
        self.log.record("codec_error", "repair_encoding", 1, "repaired the reply's text")
        return dataclasses.replace(response, message=fixed)

    def retry_malformed(self, message: Message, arguments: list[dict[str, Any] | ValueError]) -> bool:
        """Tool calls whose arguments are not JSON: True to ask again (within budget) before any tool runs."""
        if all(type(parsed) is dict for parsed in arguments) or not malformed_tool_calls(message, arguments):
            return False
        if self._argument_retries >= self.cfg.max_argument_retries:
            self.log.record("malformed_tool_arguments", "give_up", self._argument_retries,
                            "the tools report the broken arguments to the model")
            return False
        self._argument_retries += 1
        self.log.settle("failed: malformed_tool_arguments")
        self.log.open("malformed_tool_arguments", "retry", self._argument_retries)
        return True

    def empty_reply(self, response: ChatResponse, asked: int, turn_added: list[Message],
                    history: list[Message]) -> EmptyStep:
        """The next step of the empty-reply ladder; ``asked`` is the length of the list the reply answered."""
        self.log.settle("failed: empty")
        partial = self._partial[1] if self._partial and self._partial[0] == asked else ""
        step = self._empty.next_step(EmptyContext(
            partial_text=partial, prior_text=prior_housekeeping_text(turn_added),
            recent_tool_result=recent_tool_result(history), inline_thinking=has_inline_thinking(response.message),
            reasoning=bool(response.reasoning), fallback_available=self.chain.has_fallback))
        attempt = self._empty.attempt(step)
        self.scaffold = []
        if step == "partial_stream":
            self.log.record("empty", step, attempt, "kept the text of the broken stream")
            return EmptyStep("answer", repair_surrogates(partial), keep=True)
        if step == "previous_content":
            self.log.record("empty", step, attempt, "answered with the text sent with the tool calls")
            return EmptyStep("answer", prior_housekeeping_text(turn_added))
        if step == "terminal":
            self.log.record("empty", step, attempt, "gave up")
            return EmptyStep("give_up", failure=RecoveryFailed(
                "empty", "the model returned no visible content after every recovery step", final_text=EMPTY_MARKER))
        notice = None
        if step == "nudge":
            self.scaffold = nudge_messages()
        elif step == "prefill":
            self.scaffold = [prefill_message(response)]
        elif step == "fallback":
            self.chain.fall_back()
            notice = f"falling back to {self.active.label} after empty replies"
        self.log.open("empty", step, attempt)
        return EmptyStep("ask_again", notice=notice)


#: Tokens kept free below the budget the provider states: its count and ours of the same prompt differ a little.
OUTPUT_CAP_MARGIN = 64


def lowered_output_cap(fault: Classification) -> int:
    """An output cap just under what the provider says fits, and under what our own count leaves in the window.

    The window itself is left alone: the prompt fits, only the requested output
    did not. When our estimate of the prompt already fills the window it is
    wrong about this request, and the provider's budget alone decides.
    """
    budget = fault.output_budget
    if budget is None:
        raise ValueError("lowered_output_cap() needs a classification with an output budget")
    size = fault.size
    room = size.window - size.tokens if size is not None else 0
    return max(1, (min(budget, room) if room > 0 else budget) - OUTPUT_CAP_MARGIN)


def _repair_encoding(messages: list[Message], history: list[Message]) -> list[Message]:
    """Fix unencodable text in the history for good, and in the pending request."""
    replaced: dict[int, Message] = {}
    for index, message in enumerate(history):
        fixed = repair_message_encoding(message)
        if fixed is not None:
            replaced[id(message)] = history[index] = fixed
    return [replaced.get(id(m)) or repair_message_encoding(m) or m for m in messages]
