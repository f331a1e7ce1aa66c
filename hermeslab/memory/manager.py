"""Memory for one agent: the files, the skills, the frozen snapshot, nudges, review and provider.

The agent calls a handful of hooks (``fresh_prompt``, ``recall``,
``end_turn``, ``session_switched``) and the compactor calls ``pre_compress``;
everything else happens here. The nudge counters follow the agent's event
bus, so the loop does not count anything itself. Nothing here may break a
turn: a failing provider or review becomes a ``Notice`` on the bus. The
review shares the model endpoint with the turns and gives way to them
(``gate``); its model calls reach the bus marked ``purpose='review'``.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from hermeslab.core.config import Config
from hermeslab.core.events import (
    ApiCallFinished,
    ApiCallStarted,
    Event,
    EventBus,
    MemoryUpdated,
    Notice,
    ToolCallFinished,
    TurnFinished,
    TurnStarted,
)
from hermeslab.tools.registry import Tool, ToolRegistry

from .files import MemoryFiles
from .gate import EndpointGate, gate_for
from .nudges import NudgeCounters
from .provider import MemoryProvider, fence_recall
from .review import AgentFactory, BackgroundReviewer, ReviewOutcome, run_review
from .skills import SkillLibrary
from .snapshot import render_file, render_skills, render_snapshot, with_snapshot
from .tools import memory_tool, skills_tools

#: The events the manager acts on (nudge counters, the turn's text, the review gate).
OBSERVED = (TurnStarted, TurnFinished, ApiCallStarted, ToolCallFinished)

if TYPE_CHECKING:
    from hermeslab.agent import Agent
    from hermeslab.turn import TurnResult

T = TypeVar("T")
#: Seconds ``close`` waits for a running review (Hermes drains background work for as long).
CLOSE_TIMEOUT_SECONDS = 5.0


class Memory:
    """Everything the agent remembers across sessions, and when it reviews what to remember.

    ``make_agent`` builds the forked agent of a background review (pass
    ``hermeslab.agent.Agent``); without it no review runs, since memory cannot
    import the agent that imports it.
    """

    def __init__(self, config: Config, folder: str | Path, *, skills_folder: str | Path | None = None,
                 provider: MemoryProvider | None = None, make_agent: AgentFactory | None = None):
        memory, skills = config.memory, config.skills
        self.config = config
        self.files = MemoryFiles(Path(folder), memory_limit=memory.memory_char_limit,
                                 user_limit=memory.user_char_limit, memory_enabled=memory.memory_enabled,
                                 user_enabled=memory.user_profile_enabled)
        self.skills = (SkillLibrary(Path(skills_folder) if skills_folder else Path(folder) / "skills",
                                    max_chars=skills.max_chars) if skills.enabled else None)
        self.provider = provider
        self.make_agent = make_agent
        self.nudges = NudgeCounters(memory_interval=memory.nudge_interval if self.files.targets else 0,
                                    skill_interval=skills.creation_nudge_interval if self.skills else 0)
        self.reviewer = BackgroundReviewer()
        #: The block rendered into the system prompt at the last session start or context rebuild.
        self.snapshot = ""
        self._bus: EventBus | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._turn_text = ""
        self._session_id = ""
        self._run_id: str | None = None
        #: The endpoint the agent's turns use, known from the end of the first turn (what a review waits on).
        self._gate: EndpointGate | None = None

    # ------------------------------------------------------------ wiring

    def tools(self) -> list[Tool]:
        """The memory tool (when a memory file is enabled) and the skill tools (when skills are)."""
        tools = [memory_tool(self.files)] if self.files.targets else []
        return tools + (skills_tools(self.skills) if self.skills is not None else [])

    def attach(self, bus: EventBus) -> None:
        """Follow the agent's events (for the nudge counters) and report on the same bus."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._bus = bus
        self._unsubscribe = bus.subscribe(self._observe, kinds=OBSERVED)

    def close(self, timeout: float = CLOSE_TIMEOUT_SECONDS) -> bool:
        """Let a running review finish (up to ``timeout`` s) and stop following the bus; True when none is left."""
        if self._gate is not None:  # a turn that ended without a word must not hold the review off
            self._gate.turn_finished(self)
        finished = self.reviewer.wait(timeout)
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        return finished

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a running background review; True when none is left running."""
        return self.reviewer.wait(timeout)

    # ------------------------------------------------------------ the system prompt

    def render(self) -> str:
        """The snapshot block from the files as they are now ("" when there is nothing to show)."""
        blocks = [render_file(file, file.entries()) for file in self.files.files()]
        if self.skills is not None:
            blocks.append(render_skills(self.skills.list()))
        return render_snapshot(blocks)

    def fresh_prompt(self, prompt: str) -> str:
        """``prompt`` with a freshly read snapshot, which is frozen until the next call."""
        self.snapshot = self.render()
        return with_snapshot(prompt, self.snapshot)

    def refreshed(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A rebuilt context with the system message's snapshot re-read from disk."""
        if not messages or messages[0].get("role") != "system" or not isinstance(messages[0].get("content"), str):
            return messages
        system = {**messages[0], "content": self.fresh_prompt(messages[0]["content"])}
        return [system, *messages[1:]]

    # ------------------------------------------------------------ turn hooks

    def recall(self, text: str, session_id: str) -> dict[str, Any] | None:
        """The provider's recall for the user's message as a fenced message, or None."""
        if self.provider is None:
            return None
        found = self._guarded("prefetch", partial(self.provider.prefetch, text, session_id), session_id,
                              timeout=self.config.memory.prefetch_timeout)
        return fence_recall(found) if isinstance(found, str) and found.strip() else None

    def end_turn(self, agent: "Agent", result: "TurnResult") -> None:
        """After a turn: sync the provider, then start a background review if one is due."""
        session_id = agent.session.id
        self._gate = gate_for(agent.provider)
        if self.provider is not None and result.status == "completed":
            self._guarded("sync", partial(self.provider.sync, self._turn_text, result.text, session_id), session_id)
        if self.make_agent is None or result.status != "completed" or not result.text or self.reviewer.running:
            return
        due = self.nudges.take_due()
        if not due:
            return
        turn = agent.session.turns
        work = partial(run_review, self.make_agent, agent.provider, agent.config, copy.deepcopy(agent.messages),
                       ToolRegistry(self.tools()), due, max_iterations=self.config.memory.review_max_iterations,
                       gate=self._gate, on_call=partial(self._review_call, session_id, turn, self._run_id))
        self.reviewer.start(work, partial(self._report_review, session_id, turn))

    def pre_compress(self, span: list[dict[str, Any]]) -> str | None:
        """The provider's last look at the messages a compression is about to summarise."""
        if self.provider is None:
            return None
        found = self._guarded("pre_compress", partial(self.provider.pre_compress, span), self._session_id)
        return found if isinstance(found, str) and found.strip() else None

    def session_switched(self, old_id: str, new_id: str, reason: str, turns: int = 0) -> None:
        """The conversation moved to ``new_id``; a resumed one continues its nudge count from ``turns``."""
        if reason == "resume":
            self.nudges.seed(turns)
        if self.provider is not None:
            self._guarded("session_switched", partial(self.provider.session_switched, old_id, new_id, reason), new_id)

    # ------------------------------------------------------------ internals

    def _observe(self, event: Event) -> None:  # only the kinds in OBSERVED arrive
        if isinstance(event, TurnStarted):
            self._turn_text, self._session_id, self._run_id = event.user_text, event.session_id, event.run_id
            self.nudges.user_turn()
            self._hold_endpoint(event)
        elif isinstance(event, TurnFinished):
            if self._gate is not None:
                self._gate.turn_finished(self)
        elif isinstance(event, ApiCallStarted) and event.attempt == 1:
            self.nudges.model_call()
        elif isinstance(event, ToolCallFinished) and not event.is_error:
            self.nudges.tool_used(event.name)

    def _guarded(self, hook: str, call: Callable[[], T], session_id: str, *, timeout: float | None = None) -> T | None:
        try:
            return call() if timeout is None else _within(call, timeout)
        except Exception as exc:  # a provider fault costs its context, never the turn
            self._publish(Notice(session_id=session_id, level="warning",
                                 text=f"memory provider {self.provider.name!r}: {hook} failed: "
                                      f"{type(exc).__name__}: {exc}"))
            return None

    def _hold_endpoint(self, event: TurnStarted) -> None:
        """Announce the turn on the endpoint; it waits here (on the agent's thread) for a review call in flight."""
        gate = self._gate
        if gate is None:
            return
        if gate.background_busy:
            self._publish(Notice(session_id=event.session_id, turn=event.turn, trace_id=event.trace_id,
                                 run_id=event.run_id,
                                 text="waiting for the background memory review's model call to finish "
                                      "(it shares the endpoint, and pauses during turns)"))
        gate.turn_started(self)

    def _review_call(self, session_id: str, turn: int, run_id: str | None, event: ApiCallFinished) -> None:
        """A review call, logged under the session and turn it looked back on."""
        self._publish(dataclasses.replace(event, session_id=session_id, turn=turn, run_id=run_id))

    def _report_review(self, session_id: str, turn: int, outcome: ReviewOutcome | BaseException) -> None:
        if isinstance(outcome, BaseException):
            self._publish(Notice(session_id=session_id, turn=turn, level="warning",
                                 text=f"the background memory review failed: {type(outcome).__name__}: {outcome}"))
            return
        if outcome.status != "completed":
            detail = f": {outcome.error}" if outcome.error else ""
            self._publish(Notice(session_id=session_id, turn=turn, level="warning",
                                 text=f"the background memory review stopped ({outcome.status}){detail}"))
        if outcome.changes:
            self._publish(MemoryUpdated(session_id=session_id, turn=turn, changes=list(outcome.changes),
                                        text="memory updated: " + ", ".join(outcome.changes)))

    def _publish(self, event: Event) -> None:
        if self._bus is not None:
            self._bus.publish(event)


def _within(call: Callable[[], T], timeout: float) -> T:
    """``call()`` on a helper thread; TimeoutError when it has not answered after ``timeout`` seconds."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="hermeslab-memory-provider", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
