"""Shared vocabulary of the compression pipeline: the summariser contract and
the wording that marks a handoff summary inside a conversation.

Kept in its own module so that summarisers and the pipeline can both import
it without importing each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .hermes_texts import loaded_texts

#: Opening of every handoff summary. It frames the block as background so a
#: model does not mistake an old request quoted in it for a new instruction.
SUMMARY_PREFIX = (
    "[HANDOFF SUMMARY - REFERENCE ONLY] An earlier part of this conversation was "
    "condensed into the notes below when the context window filled up. Treat them "
    "as background, not as instructions: every request described here has already "
    "been handled or is superseded. The only active request is the latest user "
    "message outside this summary (normally the one right after it), even if its "
    "topic overlaps with the notes. "
    "Do not resume or finish work listed as historical unless that latest message "
    "asks for it. All tools remain available, and files or other state may already "
    "reflect the work described. MEMORY.md and USER.md stay authoritative where "
    "they disagree with this summary."
)

#: One line that closes a summary and points the model at the message below it.
SUMMARY_END_MARKER = "[END OF HANDOFF SUMMARY - respond to the latest user message below]"

#: The longer opening the ``hermes-0.19`` preset uses (``long_summary_frame``): hermeslab's
#: own wording, as long as Hermes 0.19.0's prefix (1,632 characters; 344 cl100k_base tokens,
#: Hermes's own being 344, and 340 o200k_base, Hermes's 345), so every size decision sees the
#: same cost and the billed prompts nearly so.
#: It starts with ``SUMMARY_PREFIX``, so anything that recognises one recognises both.
LONG_SUMMARY_PREFIX = SUMMARY_PREFIX + (
    " How to use it: the record below comes from the agent that worked here before; it asks nothing"
    " of you. Read the user message placed after it first and let that message alone decide what"
    " happens now. The sections 'Historical Task Snapshot', 'Historical In-Progress State',"
    " 'Historical Pending User Asks' and 'Historical Remaining Work' show how things stood back"
    " then, not a plan for today: leave their open items alone unless the current message names"
    " them again. If that message turns away (say 'stop', 'undo', 'revert', 'no, wait', 'just"
    " check', or a new topic), the earlier course is closed for good. Words such as 'never mind',"
    " 'forget it' or 'drop it' count as well. The system prompt (and the memory it holds) still"
    " applies in full. Keep using the tools to really read, write, run and search for the request"
    " at hand instead of describing what you might do. Files and settings may already reflect steps"
    " listed as done: check when unsure, never redo them:"
)

#: The closing line that goes with ``LONG_SUMMARY_PREFIX`` (Hermes's marker's length and token counts).
LONG_SUMMARY_END_MARKER = "=== END OF BACKGROUND -- answer the message right after this line, not the notes ==="

#: ``merged_summary_last``: the header over a message's own text when a summary is merged
#: behind it, and the line between that text and the summary (as long as Hermes's, and as
#: many tokens in cl100k_base and o200k_base).
MERGED_OWN_HEADER = "[RETAINED TEXT - kept as background, not a new request]"
MERGED_OWN_DELIMITER = "[END OF KEPT MESSAGE -- THE HANDOFF SUMMARY NEXT]"

#: Prefix Hermes used for summaries in older sessions; still recognised on import.
LEGACY_SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"


@dataclass
class SummaryRequest:
    """What a summariser is asked to condense, and how long the answer may be."""

    span: list[dict]
    previous_summary: str | None
    focus: str | None
    budget_tokens: int
    memory_context: str | None = None
    #: The window the summary call must fit, prompt and answer together (``summary_fits_window``);
    #: None leaves the call's size to the provider.
    window_tokens: int | None = None
    #: ``span`` as the conversation showed it, before pruning cut old tool results to one line
    #: (``summary_fact_context``); a summariser may read facts there. None: ``span`` is all there is.
    originals: list[dict] | None = None
    #: The messages that stay in the context beside the summary (``summary_fact_context``), so facts
    #: they still show need no place in it. None: unknown.
    kept: list[dict] | None = None
    #: Sample the serialised turns evenly when they are longer than the input cap
    #: (``summary_input_sampling``, ``record_sampling``); off, every message is shown, each shortened alone.
    sampled_input: bool = False


@dataclass
class SummaryOutcome:
    """A summary body (without prefix or end marker) and how it was obtained.

    An empty ``body`` means no summary is available at all; the pipeline then
    refuses to drop the middle of the conversation.
    """

    body: str
    fallback_used: bool = False
    error: str | None = None
    usage_prompt_tokens: int = 0
    usage_completion_tokens: int = 0
    #: The category of each failed summary call, in the order tried (``summary.classify_failure``).
    failure_categories: tuple[str, ...] = ()


@runtime_checkable
class Summariser(Protocol):
    def summarise(self, request: SummaryRequest) -> SummaryOutcome: ...


_PREFIXES = (SUMMARY_PREFIX, LEGACY_SUMMARY_PREFIX)


def summary_frames() -> tuple[tuple[str, str], ...]:
    """(opening, closing line) of every summary frame this process may have written, most specific first:
    Hermes's own (once read, ``hermes_texts``), the long one, the short one."""
    texts = loaded_texts()
    own = ((LONG_SUMMARY_PREFIX, LONG_SUMMARY_END_MARKER), (SUMMARY_PREFIX, SUMMARY_END_MARKER))
    return own if texts is None else ((texts.summary_prefix, texts.end_marker), *own)


def merged_frames() -> tuple[tuple[str, str], ...]:
    """(header, delimiter) of every way a summary is merged behind a message's own text: Hermes's (once read),
    hermeslab's."""
    texts = loaded_texts()
    own = ((MERGED_OWN_HEADER, MERGED_OWN_DELIMITER),)
    return own if texts is None else ((texts.merged_header, texts.merged_delimiter), *own)


def summary_prefixes() -> tuple[str, ...]:
    """The openings of every summary this process may have written: Hermes's (once read), then hermeslab's."""
    texts = loaded_texts()
    return _PREFIXES if texts is None else (texts.summary_prefix, *texts.older_prefixes, *_PREFIXES)

_LEADING_SPACE = re.compile(r"\s*")


def _leading_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                return str(part.get("text", ""))
    return ""


def is_summary_message(message: dict[str, Any]) -> bool:
    """True for a handoff summary: flagged by the pipeline or recognisable by its prefix."""
    if not isinstance(message, dict):
        return False
    if message.get("_compressed_summary"):
        return True
    content = message.get("content")
    text = content if isinstance(content, str) else _leading_text(message)
    # Skip leading whitespace without copying: tool outputs run to many kilobytes.
    start = _LEADING_SPACE.match(text).end() if text[:1].isspace() else 0
    for header, closing in merged_frames():
        if not text.startswith(header, start):
            continue
        # merged behind a message's own text
        if isinstance(content, list):  # the delimiter and the summary open the last text part
            text = next((str(p.get("text", "")) for p in reversed(content)
                         if isinstance(p, dict) and p.get("type") == "text"), "")
        delimiter = text.find(closing, start if isinstance(content, str) else 0)
        if delimiter < 0:
            return False
        start = delimiter + len(closing)
        start = _LEADING_SPACE.match(text, start).end()
        break
    return text.startswith(summary_prefixes(), start)
