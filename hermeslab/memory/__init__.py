"""What the agent keeps across sessions: memory files, skills, background review, memory providers.

* ``files`` — MEMORY.md (the agent's notes) and USER.md (the user profile), entry by entry;
* ``scan`` — the threat scanner every saved entry and skill passes;
* ``atomic`` — locked, atomic whole-file writes that concurrent processes cannot lose;
* ``skills`` — Markdown procedures with front matter;
* ``snapshot`` — the block the system prompt shows, frozen between context rebuilds;
* ``tools`` — the ``memory`` tool and the skill tools, which memory offers the agent;
* ``nudges`` and ``review`` — when and how a forked agent reviews the conversation;
* ``gate`` — one endpoint shared by the turns and the review, turns first;
* ``provider`` and ``recall`` — the external memory-provider hooks and the lab-database recall
  (``recall.LabRecall``; it loads DuckDB and pandas, so it is not imported here);
* ``manager.Memory`` — all of it wired for one agent (import it from ``hermeslab.memory.manager``:
  it loads the tool registry and executor, which the files and skills alone do not need).
"""

from hermeslab.memory.files import EntryFile, MemoryFiles, MemoryWriteError, Usage
from hermeslab.memory.nudges import NudgeCounters, ReviewDue
from hermeslab.memory.provider import MemoryProvider, fence_recall
from hermeslab.memory.scan import Threat, scan
from hermeslab.memory.skills import Skill, SkillError, SkillLibrary

__all__ = [
    "EntryFile",
    "MemoryFiles",
    "MemoryProvider",
    "MemoryWriteError",
    "NudgeCounters",
    "ReviewDue",
    "Skill",
    "SkillError",
    "SkillLibrary",
    "Threat",
    "Usage",
    "fence_recall",
    "scan",
]
