"""The background review: a forked agent looks back over the conversation and tends memory and skills.

The fork gets the parent's provider and a copy of the conversation so far,
only the memory and skill tools, at most ``max_iterations`` model calls, no
compression, no memory provider and its own private event bus: nothing it
says reaches the user's transcript. Only its model calls are handed on (for
the lab's ``api_calls``, marked ``purpose='review'``). What it changed comes
back as a short list (``memory add``, ``skill create deploy-docs``) for the
parent to report. It runs on a daemon thread after the user's turn has
finished, and each of its calls waits until the endpoint is free of turns
(``gate``).

The fork is built by an `AgentFactory` the caller passes in (the agent class
itself fits): the agent imports memory, so memory must not import the agent.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from hermeslab.core.config import Config
from hermeslab.core.events import ApiCallFinished, EventBus, ToolCallFinished
from hermeslab.core.provider import Provider
from hermeslab.session import Session
from hermeslab.tools.registry import ToolRegistry

from .gate import EndpointGate, GatedProvider
from .nudges import MEMORY_TOOL, SKILL_TOOL, ReviewDue

log = logging.getLogger(__name__)

#: Opens every review request, so a rule-based model can recognise one.
REVIEW_MARKER = "[background review]"
NOTHING_TO_SAVE = "Nothing to save."
#: Longest a review call waits for the user's turns to leave the endpoint before the review gives up.
REVIEW_WAIT_SECONDS = 600.0

MEMORY_REVIEW = (
    "Look back over the conversation above and decide what is worth keeping for future sessions. "
    "With the memory tool, save to the user profile (target 'user') who the user is: their role, their "
    "preferences, how they like answers, what they asked you to always or never do. Save to your notes "
    "(target 'memory') facts about their environment and projects that will still hold next time. Replace or "
    "remove stale entries rather than piling up new ones; skip anything temporary, anything already saved "
    "and anything secret."
)
SKILL_REVIEW = (
    "Look back over the conversation above for a procedure worth reusing: a multi-step task that worked, "
    "above all one that took corrections or retries, or a way of working the user insisted on. If one fits, "
    "save it with skill_manage: action 'create' with a short lower-case name, a one-line description of when "
    "to use it and the steps as the body, or action 'patch' on an existing skill (see skills_list) that this "
    "conversation improved on. Write a skill for the class of task, not for this one instance."
)


def review_prompt(due: ReviewDue) -> str:
    """The request the fork answers: the memory part, the skills part, or both."""
    if not due:
        raise ValueError("no review is due")
    parts = [REVIEW_MARKER]
    if due.memory:
        parts.append(MEMORY_REVIEW)
    if due.skills:
        parts.append(SKILL_REVIEW)
    parts.append(f"When you are done, or if nothing qualifies, reply with one short line (e.g. \"{NOTHING_TO_SAVE}\").")
    return "\n\n".join(parts)


class ReviewTurn(Protocol):
    """What the review reads from the fork's turn."""

    @property
    def status(self) -> str: ...

    @property
    def error(self) -> str | None: ...


class ReviewAgent(Protocol):
    """What the review needs of the fork: one turn on the conversation it was built with."""

    def chat(self, text: str) -> ReviewTurn: ...


class AgentFactory(Protocol):
    """Builds the fork (``hermeslab.agent.Agent`` is one)."""

    def __call__(self, provider: Provider, *, config: Config, tools: ToolRegistry, bus: EventBus,
                 session: Session) -> ReviewAgent: ...


@dataclass
class ReviewOutcome:
    #: The fork's turn status (``completed``, ``failed``, ``max_iterations``).
    status: str
    #: One line per successful write, in order.
    changes: list[str] = field(default_factory=list)
    error: str | None = None


def describe_change(name: str, arguments: str) -> str:
    """``memory add``, ``user replace``, ``skill create deploy-docs`` from a tool call."""
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        args = {}
    args = args if isinstance(args, dict) else {}
    if name == MEMORY_TOOL:
        return f"{args.get('target', 'memory')} {args.get('action', 'update')}"
    return f"skill {args.get('action', 'update')} {args.get('name', '?')}".strip()


def run_review(make_agent: AgentFactory, provider: Provider, config: Config, history: list[dict[str, Any]],
               tools: ToolRegistry, due: ReviewDue, *, max_iterations: int, gate: EndpointGate | None = None,
               on_call: Callable[[ApiCallFinished], None] | None = None) -> ReviewOutcome:
    """Run the fork to its end on this thread; the parent's state is never touched.

    With ``gate``, every call of the fork waits for the endpoint to be free of
    turns; ``on_call`` receives each of the fork's finished model calls, marked
    ``purpose='review'`` (the caller re-stamps them with its own session).
    """
    fork_config = config.with_overrides({"agent.max_iterations": max_iterations, "agent.stream": False,
                                         "agent.self_check": False, "compression.enabled": False})
    bus = EventBus()
    changes: list[str] = []

    def collect(event: Any) -> None:
        if isinstance(event, ToolCallFinished) and not event.is_error and event.name in (MEMORY_TOOL, SKILL_TOOL):
            changes.append(describe_change(event.name, event.arguments))
        elif isinstance(event, ApiCallFinished) and on_call is not None:
            on_call(dataclasses.replace(event, purpose="review"))

    bus.subscribe(collect)
    session = Session.with_history(history, reason="review", source="review")
    if gate is not None:
        provider = GatedProvider(provider, gate, timeout=REVIEW_WAIT_SECONDS)  # type: ignore[assignment]
    fork = make_agent(provider, config=fork_config, tools=tools, bus=bus, session=session)
    result = fork.chat(review_prompt(due))
    return ReviewOutcome(result.status, changes, result.error)


class BackgroundReviewer:
    """Runs one review at a time on a daemon thread and hands its outcome (or exception) to ``report``."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, work: Callable[[], ReviewOutcome],
              report: Callable[[ReviewOutcome | BaseException], None]) -> None:
        if self.running:
            raise RuntimeError("a background review is already running")

        def body() -> None:
            try:
                outcome: ReviewOutcome | BaseException = work()
            except Exception as exc:  # the review must never surface in the user's turn
                outcome = exc
            try:
                report(outcome)
            except Exception:
                log.exception("reporting the background review's outcome failed")

        self._thread = threading.Thread(target=body, name="hermeslab-memory-review", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running review; True when none is left running."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running
