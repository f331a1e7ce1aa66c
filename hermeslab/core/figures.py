"""How token figures read wherever people see them: measured or estimated, and what a prompt counts.

"Prompt tokens" means one thing on every screen: what one model call sends,
tool schemas included, the figure the provider reports and the usage plot
draws. A figure resting on our own count instead of the provider's report
carries a leading ``~`` and says it is an estimate and what it counts. A
figure the server's own tokenizer counted after an answer without usage is
the server's, shown plain, with a note saying how it was counted.
"""

from __future__ import annotations

from typing import Mapping

from .events import CompressionEvent
from .provider import ESTIMATE_COUNTS, SERVER_TEMPLATE, SERVER_TOKENIZER

#: What a figure the server's tokenizer counted covers, by source: not our estimate, so shown without ``~``.
COUNTED_BY_SERVER = {
    SERVER_TEMPLATE: "counted by the server's tokenizer on the prompt its chat template made",
    SERVER_TOKENIZER: "counted by the server's tokenizer on the messages' text, without its chat template's markers",
}


def tokens(count: int, estimated: bool) -> str:
    """``4,590`` when measured, ``~4,590`` when estimated."""
    return f"~{count:,}" if estimated else f"{count:,}"


def estimate_note(estimated_calls: int, calls: int, *, stopped: bool = False) -> str:
    """Which of a turn's figures are estimates, why and what they count; "" when all were reported.

    ``estimated_calls`` counts attempts (a retried call is two), ``calls`` the calls, so the
    former can be the larger. ``stopped``: the user stopped the turn, which cut its last call's
    stream before the server could report usage.
    """
    if estimated_calls <= 0:
        return ""
    if not stopped:
        why = "the server reported no usage"
    elif estimated_calls == 1:
        why = "stopped by the user before the server reported usage"
    else:
        why = "the server reported no usage; the last call was stopped by the user before it could"
    return f"estimated for {_which(estimated_calls, calls)} ({why}; {ESTIMATE_COUNTS})"


def counted_note(counted_calls: Mapping[str, int], calls: int) -> str:
    """Which of a turn's figures the server's tokenizer counted, and on what; "" when none.

    ``counted_calls`` maps a usage source (``server_template``, ``server_tokenizer``) to its attempts.
    """
    notes = [f"{COUNTED_BY_SERVER[source]} for {_which(count, calls)} (the server reported no usage)"
             for source, count in sorted(counted_calls.items()) if source in COUNTED_BY_SERVER and count > 0]
    return " · ".join(notes)


def _which(some: int, calls: int) -> str:
    if calls <= 1:
        return "its call"
    return "all its calls" if some >= calls else f"{some} of {calls} calls"


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
