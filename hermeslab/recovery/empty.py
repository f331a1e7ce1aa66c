"""What to do when the model replies with nothing visible.

A reply is empty when it has no tool calls and no text outside thinking
blocks. The steps are tried in a fixed order, each within its own budget per
turn, from the cheapest (text already at hand) to the most expensive (another
provider), and the last one is a visible ``(empty)`` result: a turn never ends
with a silent blank answer.

1. ``partial_stream``: a stream for this same request broke after delivering text; use that text.
2. ``previous_content``: earlier in the turn the model wrote text alongside housekeeping tool
   calls (todo, memory) only; that text was its answer.
3. ``nudge`` (once): after tool results, tell the model its reply was empty and ask it to go on.
4. ``prefill`` (``max_prefills``): the model only thought; hand its thinking back as the start of
   its reply so it continues from there.
5. ``retry`` (``max_empty_retries``): ask again unchanged.
6. ``fallback``: the next provider, with fresh budgets.
7. ``terminal``: give up visibly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.config import RecoveryConfig
from ..core.messages import text_of, tool_calls_of
from ..core.provider import ChatResponse

EMPTY_MARKER = "(empty)"
NUDGE_TEXT = ("Your previous reply was empty. Continue from the tool results above and give your answer "
              "to the request.")
#: Tools whose calls do not answer the user by themselves, so text sent with them can be the answer.
HOUSEKEEPING_TOOLS = frozenset({"todo", "memory"})
#: A tool result this close to the end means the model stalled while working through results.
RECENT_TOOL_WINDOW = 5

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)


def visible_text(message: dict[str, Any]) -> str:
    """The message's text without thinking blocks (an unclosed one runs to the end)."""
    return _THINK.sub("", text_of(message)).strip()


def has_inline_thinking(message: dict[str, Any]) -> bool:
    return bool(_THINK.search(text_of(message)))


def is_empty(response: ChatResponse) -> bool:
    return not tool_calls_of(response.message) and not visible_text(response.message)


def thinking_of(response: ChatResponse) -> str:
    """The reasoning of a reply, whether sent inline or in a separate field."""
    inline = "\n".join(match.group(0) for match in _THINK.finditer(text_of(response.message)))
    return inline or (f"<think>{response.reasoning}</think>" if response.reasoning else "")


def prior_housekeeping_text(turn_messages: Sequence[dict[str, Any]]) -> str:
    """Text the model sent this turn together with housekeeping tool calls only (the latest such message)."""
    for message in reversed(turn_messages):
        calls = tool_calls_of(message)
        if message.get("role") != "assistant" or not calls:
            continue
        names = {(call.get("function") or {}).get("name") for call in calls}
        text = visible_text(message)
        return text if text and names <= HOUSEKEEPING_TOOLS else ""
    return ""


def recent_tool_result(messages: Sequence[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" for m in messages[-RECENT_TOOL_WINDOW:])


def nudge_messages() -> list[dict[str, Any]]:
    """Sent after the history, never kept in it."""
    return [{"role": "assistant", "content": EMPTY_MARKER}, {"role": "user", "content": NUDGE_TEXT}]


def prefill_message(response: ChatResponse) -> dict[str, Any]:
    """The thinking-only reply as the start of the next one."""
    return {"role": "assistant", "content": thinking_of(response)}


@dataclass(frozen=True)
class EmptyContext:
    """What the next step depends on."""

    partial_text: str = ""
    prior_text: str = ""
    recent_tool_result: bool = False
    inline_thinking: bool = False
    reasoning: bool = False
    fallback_available: bool = False


class EmptyRecovery:
    """The step budgets of one turn; ``reset`` after a usable reply or a compression."""

    def __init__(self, cfg: RecoveryConfig):
        self.cfg = cfg
        self.reset()

    def reset(self) -> None:
        self.nudged = False
        self.prefills = 0
        self.retries = 0

    def next_step(self, ctx: EmptyContext) -> str:
        if ctx.partial_text.strip():
            return "partial_stream"
        if ctx.prior_text:
            return "previous_content"
        if ctx.recent_tool_result and not ctx.inline_thinking and not self.nudged:
            self.nudged = True
            return "nudge"
        if (ctx.reasoning or ctx.inline_thinking) and self.prefills < self.cfg.max_prefills:
            self.prefills += 1
            return "prefill"
        if self.retries < self.cfg.max_empty_retries:
            self.retries += 1
            return "retry"
        if ctx.fallback_available:
            self.reset()
            return "fallback"
        return "terminal"

    def attempt(self, step: str) -> int:
        """How many times ``step`` has run this turn, for the log."""
        return {"nudge": 1, "prefill": self.prefills, "retry": self.retries}.get(step, 1)
