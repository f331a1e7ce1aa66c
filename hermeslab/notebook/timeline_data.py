"""A conversation's compactions as data: each one's context before and after, message by message, and counters.

Pure: the lab reader and the replay reader (``timeline_sources``) hand in chat
messages with their token counts and the fate of each message before; this
module turns them into the lines a view shows and adds them up. The after
side is read the other way round (``message_fates`` from after to before), so
whatever a strategy put in that was not there before shows as a summary or as
added, whichever source the messages came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..context.fates import DROPPED, FATES, KEPT, PRUNED, SUMMARISED, message_fates
from ..context.types import is_summary_message
from ..core.messages import text_of

#: After a compaction: the summary it inserted, and anything else that was not in the context before.
SUMMARY = "summary"
ADDED = "added"
AFTER_FATES = (KEPT, PRUNED, SUMMARY, ADDED)
#: Characters of a message shown in its line.
PREVIEW_CHARS = 90

#: A message with its token count, as the sources hand them in.
Sized = tuple[dict[str, Any], int]


@dataclass(frozen=True)
class MessageLine:
    """One message in the before or after view."""

    role: str
    preview: str
    tokens: int
    #: Before: one of ``context.fates.FATES``; after: one of ``AFTER_FATES``.
    fate: str


@dataclass(frozen=True)
class CompactionView:
    """One applied compaction: the context it saw, what it left, and the summary it wrote."""

    number: int
    session_id: str
    turn: int | None
    trigger: str
    strategy: str
    mode: str
    tokens_before: int
    tokens_after: int
    before: tuple[MessageLine, ...]
    after: tuple[MessageLine, ...]
    summary_text: str | None
    #: False when the source did not record each message's fate (a lab written before it did).
    fates_known: bool = True

    @property
    def reclaimed(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)

    def count(self, fate: str, role: str | None = None) -> int:
        """Messages before with ``fate`` (and ``role``, when given)."""
        return sum(1 for line in self.before if line.fate == fate and (role is None or line.role == role))


@dataclass(frozen=True)
class Counters:
    compactions: int = 0
    tokens_reclaimed: int = 0
    tool_outputs_pruned: int = 0
    messages_summarised: int = 0
    messages_dropped: int = 0


@dataclass(frozen=True)
class Timeline:
    """The compactions of one conversation (the lineage of sessions ending at ``session_id``), oldest first."""

    session_id: str
    sessions: tuple[str, ...]
    compactions: tuple[CompactionView, ...]
    #: Attempts that changed nothing (judged too small, aborted): counted, not shown.
    not_applied: int = 0

    def counters(self, session_id: str | None = None) -> Counters:
        """Totals over the conversation, or over the compactions of one of its sessions."""
        views = [v for v in self.compactions if session_id is None or v.session_id == session_id]
        return Counters(compactions=len(views), tokens_reclaimed=sum(v.reclaimed for v in views),
                        tool_outputs_pruned=sum(v.count(PRUNED, "tool") for v in views),
                        messages_summarised=sum(v.count(SUMMARISED) for v in views),
                        messages_dropped=sum(v.count(DROPPED) for v in views))

    def by_session(self) -> dict[str, Counters]:
        """Counters per session of the lineage, oldest first (a session without compactions reads all zero)."""
        return {session: self.counters(session) for session in self.sessions}


def preview(message: dict[str, Any], limit: int = PREVIEW_CHARS) -> str:
    """One line saying what a message holds: its text with spaces collapsed, and the tools it calls."""
    text = re.sub(r"\s+", " ", text_of(message)).strip()
    calls = [_call_line(call) for call in message.get("tool_calls") or () if isinstance(call, dict)]
    line = " ".join(part for part in [text, *calls] if part)
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def _call_line(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return f"→ {function.get('name', '?')}({arguments})"


def after_fates(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[str]:
    """One of ``AFTER_FATES`` per message after a compaction."""
    read_back = message_fates(after, before, summarised=False)
    return [SUMMARY if is_summary_message(message) else (ADDED if fate == DROPPED else fate)
            for message, fate in zip(after, read_back)]


def compaction_view(number: int, *, session_id: str, turn: int | None, trigger: str, strategy: str, mode: str,
                    tokens_before: int, tokens_after: int, before: Sequence[Sized], fates: Sequence[str] | None,
                    after: Sequence[Sized], summary_text: str | None) -> CompactionView:
    """The view of one compaction; ``fates`` None when the source did not record them."""
    if fates is not None and len(fates) != len(before):
        raise ValueError(f"{len(fates)} fates for {len(before)} messages before compaction {number}")
    unknown = sorted({fate for fate in fates or () if fate not in FATES})
    if unknown:
        raise ValueError(f"unknown message fate(s) {unknown}; expected one of {FATES}")
    lines_before = tuple(MessageLine(str(m.get("role", "")), preview(m), tokens, fate)
                         for (m, tokens), fate in zip(before, fates or ()))
    later = after_fates([m for m, _ in before], [m for m, _ in after]) if fates is not None else [ADDED] * len(after)
    lines_after = tuple(MessageLine(str(m.get("role", "")), preview(m), tokens, fate)
                        for (m, tokens), fate in zip(after, later))
    return CompactionView(number=number, session_id=session_id, turn=turn, trigger=trigger, strategy=strategy,
                          mode=mode, tokens_before=tokens_before, tokens_after=tokens_after, before=lines_before,
                          after=lines_after, summary_text=summary_text or None, fates_known=fates is not None)
