"""Setting OpenHands' step records beside hermeslab's: which steps decided the same.

A step is one recorded assistant reply. Its decision is what was condensed
before it (the forgotten events in order, where the summary went, whether there
was one) and which events were sent, a masked observation marked as such. Two
records agree on a step when all of that is equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tally:
    """Counts over compared steps."""

    steps: int = 0
    identical: int = 0
    condensations_reference: int = 0
    condensations_hermeslab: int = 0
    #: Observations shown masked, summed over steps.
    masked_reference: int = 0
    masked_hermeslab: int = 0
    sessions: int = 0
    sessions_identical: int = 0
    #: The first few differing steps, for the report: (session id, step, reference, hermeslab).
    examples: list = field(default_factory=list)

    def add_session(self, session_id: str, reference: list[dict], ours: list[dict], keep_examples: int = 3) -> None:
        if [s["at"] for s in reference] != [s["at"] for s in ours]:
            raise ValueError(f"session {session_id}: the two sides stepped at different replies")
        same_session = True
        for theirs, mine in zip(reference, ours):
            self.steps += 1
            self.condensations_reference += len(theirs["condensations"])
            self.condensations_hermeslab += len(mine["condensations"])
            self.masked_reference += sum(key.endswith("!masked") for key in theirs["view"])
            self.masked_hermeslab += sum(key.endswith("!masked") for key in mine["view"])
            if theirs == mine:
                self.identical += 1
            else:
                same_session = False
                if len(self.examples) < keep_examples:
                    self.examples.append({"session": session_id, "at": theirs["at"],
                                          "reference_only": _only(theirs, mine), "hermeslab_only": _only(mine, theirs)})
        self.sessions += 1
        self.sessions_identical += same_session

    @property
    def share(self) -> float:
        return self.identical / self.steps if self.steps else 1.0

    def as_record(self) -> dict:
        return {"steps": self.steps, "identical_steps": self.identical, "identical_decisions_share": round(self.share, 6),
                "sessions": self.sessions, "sessions_identical": self.sessions_identical,
                "condensations_reference": self.condensations_reference,
                "condensations_hermeslab": self.condensations_hermeslab,
                "masked_reference": self.masked_reference, "masked_hermeslab": self.masked_hermeslab}


def _only(one: dict, other: dict) -> dict:
    """What ``one`` records that ``other`` does not: its condensations if they differ, view keys not in ``other``."""
    return {"condensations": one["condensations"] if one["condensations"] != other["condensations"] else [],
            "view": [key for key in one["view"] if key not in set(other["view"])]}
