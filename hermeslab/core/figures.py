"""How token figures read wherever people see them: measured or estimated, and what a prompt counts.

"Prompt tokens" means one thing on every screen: what one model call sends,
tool schemas included, the figure the provider reports and the usage plot
draws. A figure resting on our own count instead of the provider's report
carries a leading ``~`` and says it is an estimate and what it counts.
"""

from __future__ import annotations

from .events import CompressionEvent
from .provider import ESTIMATE_COUNTS


def tokens(count: int, estimated: bool) -> str:
    """``4,590`` when measured, ``~4,590`` when estimated."""
    return f"~{count:,}" if estimated else f"{count:,}"


def estimate_note(estimated_calls: int, calls: int) -> str:
    """Which of a turn's figures are estimates and what they count; "" when all were reported.

    ``estimated_calls`` counts attempts (a retried call is two), ``calls`` the calls, so the
    former can be the larger.
    """
    if estimated_calls <= 0:
        return ""
    if calls <= 1:
        which = "its call"
    else:
        which = "all its calls" if estimated_calls >= calls else f"{estimated_calls} of {calls} calls"
    return f"estimated for {which} (the server reported no usage; {ESTIMATE_COUNTS})"


def compression_sizes(event: CompressionEvent) -> str:
    """The prompt before → after a compression, in the unit of the logged prompt tokens when known.

    Older events carry only the compressor's count of the messages, which leaves
    out the tool schemas; that figure is named as such instead of passing for
    the prompt.
    """
    before, after = event.prompt_tokens_before, event.prompt_tokens_after
    if before is None or after is None:
        if event.mode == "none":
            return f"{event.tokens_before:,} tokens of messages kept (tool schemas not counted)"
        return f"{event.tokens_before:,} → {event.tokens_after:,} tokens of messages (tool schemas not counted)"
    if event.mode == "none":
        return f"prompt ~{before:,} tokens kept (estimated, tool schemas included)"
    return f"prompt ~{before:,} → ~{after:,} tokens (estimated, tool schemas included)"
