"""How full the context is right now, from the event stream alone.

The provider reports prompt tokens only when a call ends. Between two reports
the conversation keeps growing (streamed text, tool results), so the gauge
shows the last reported prompt plus a local estimate of what came after it.
A compression resets the reference to its count of the new prompt as sent
(tool schemas included). Until a provider's report arrives the whole figure is
an estimate (``estimated``), and a server that never reports keeps it one.
The background review's calls are not the conversation's and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    Event,
    TextDelta,
    ToolCallFinished,
    TurnFinished,
)
from ..core.figures import tokens
from ..core.tokens import count_text

#: Share of the compression threshold at which the gauge turns amber, then red.
WARN_AT = 0.75
ALERT_AT = 0.90


@dataclass
class BudgetMeter:
    """Reported prompt tokens plus the estimate since, per turn history included."""

    context_length: int
    threshold: int | None = None
    #: The latest provider-reported prompt size (None before the first report or after a compression).
    reported: int | None = None
    #: Tokens added since ``reported`` (or the whole estimate when nothing was reported).
    since: int = 0
    #: The context size at the end of each turn, oldest first.
    per_turn: list[int] = field(default_factory=list)
    #: Tokens every request carries besides the messages (the tool schemas); a compression counts messages only.
    overhead: int = 0

    def __post_init__(self) -> None:
        if self.context_length <= 0:
            raise ValueError(f"context_length must be a positive number of tokens, got {self.context_length}")
        if self.threshold is not None and self.threshold <= 0:
            raise ValueError(f"threshold must be a positive number of tokens or None, got {self.threshold}")

    @property
    def tokens(self) -> int:
        return (self.reported or 0) + self.since

    @property
    def estimated(self) -> bool:
        """True when no provider reading underlies the figure (before the first, after a compression)."""
        return self.reported is None

    @property
    def reading(self) -> str:
        """The figure as a person should read it: ``2,100``, or ``~2,100`` while it is an estimate."""
        return tokens(self.tokens, self.estimated)

    @property
    def share_of_window(self) -> float:
        return self.tokens / self.context_length

    @property
    def level(self) -> str:
        """``ok`` (grey), ``warn`` (amber, ≥ 75% of the threshold) or ``alert`` (red, ≥ 90%)."""
        limit = self.threshold or self.context_length
        share = self.tokens / limit
        if share >= ALERT_AT:
            return "alert"
        if share >= WARN_AT:
            return "warn"
        return "ok"

    def reset(self, estimate: int) -> None:
        """A new, resumed or rebuilt conversation: only a local estimate is known."""
        self.reported, self.since = None, max(0, estimate)

    def observe(self, event: Event) -> bool:
        """Fold one event in; True when the number may have changed."""
        if isinstance(event, ApiCallStarted):
            known = self.reported or 0
            self.since = max(self.since, event.estimated_prompt_tokens - known)
        elif isinstance(event, TextDelta):
            self.since += count_text(event.text)
        elif isinstance(event, ApiCallFinished):
            if (event.purpose != "turn" or event.error_class is not None or event.usage_estimated
                    or event.prompt_tokens is None):
                return False
            self.reported, self.since = event.prompt_tokens, event.completion_tokens or 0
        elif isinstance(event, ToolCallFinished):
            self.since += count_text(event.result)
        elif isinstance(event, CompressionEvent):
            if event.mode == "none":
                return False
            after = event.prompt_tokens_after
            self.reported, self.since = None, after if after is not None else event.tokens_after + self.overhead
        elif isinstance(event, TurnFinished):
            self.per_turn.append(self.tokens)
        else:
            return False
        return True
