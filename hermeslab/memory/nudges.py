"""When to review: counters of user turns and model calls since memory or skills were last tended.

Every ``memory_interval`` user turns a memory review falls due; once
``skill_interval`` model calls have passed, a skills review does. Using the
memory tool (or ``skill_manage``) restarts its counter, since the agent just
did that work itself. An interval of 0 switches its review off.
"""

from __future__ import annotations

from dataclasses import dataclass

MEMORY_TOOL = "memory"
SKILL_TOOL = "skill_manage"


@dataclass(frozen=True)
class ReviewDue:
    memory: bool = False
    skills: bool = False

    def __bool__(self) -> bool:
        return self.memory or self.skills


@dataclass
class NudgeCounters:
    memory_interval: int
    skill_interval: int
    turns_since_memory: int = 0
    calls_since_skill: int = 0
    #: A memory review fell due and waits for a turn that completes.
    memory_due: bool = False

    def __post_init__(self) -> None:
        for name in ("memory_interval", "skill_interval"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (off) or positive, got {getattr(self, name)}")

    def user_turn(self) -> None:
        if not self.memory_interval:
            return
        self.turns_since_memory += 1
        if self.turns_since_memory >= self.memory_interval:
            self.memory_due = True
            self.turns_since_memory = 0

    def model_call(self) -> None:
        if self.skill_interval:
            self.calls_since_skill += 1

    def tool_used(self, name: str) -> None:
        """A successful tool call: the memory and skill tools restart their counters."""
        if name == MEMORY_TOOL:
            self.turns_since_memory = 0
        elif name == SKILL_TOOL:
            self.calls_since_skill = 0

    def seed(self, prior_user_turns: int) -> None:
        """A resumed conversation: continue the memory count where the history leaves it."""
        self.turns_since_memory = prior_user_turns % self.memory_interval if self.memory_interval else 0
        self.memory_due = False

    def take_due(self) -> ReviewDue:
        """At the end of a completed turn: the reviews to run now (their counters restart)."""
        skills = bool(self.skill_interval) and self.calls_since_skill >= self.skill_interval
        due = ReviewDue(memory=self.memory_due, skills=skills)
        if skills:
            self.calls_since_skill = 0
        self.memory_due = False
        return due
