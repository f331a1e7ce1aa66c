"""Sessions: ids, the frozen system prompt, the message history with its tree, and the moves between them.

A session is one stretch of conversation logged under one id. Its history is
the list of chat messages sent to the model (system prompt first); every
message also gets a stable id and a parent id so a turn reads as a tree in the
log: user → assistant → the assistant's tool results → the next assistant.

A conversation moves between sessions: /new starts an empty one, /branch and a
compression in rotation mode continue in a child (the parent chain and the
"Title #2" numbering), /resume picks up a logged one, and in-place
compression rewrites the history of the current one. ``SessionManager`` makes
each move and logs it through the events it is given to emit.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from .context.fates import fates_of_result
from .core.events import CompressionEvent, Event, MessageAdded, SessionEnded, SessionStarted
from .core.tokens import TokenCounter

if TYPE_CHECKING:
    from .context.compactor import Compaction


def new_session_id(now: float | None = None) -> str:
    """``YYYYMMDD_HHMMSS_<6 hex>`` in local time, the format Hermes uses."""
    stamp = datetime.fromtimestamp(now if now is not None else time.time()).strftime("%Y%m%d_%H%M%S")
    return f"{stamp}_{secrets.token_hex(3)}"


def new_trace_id() -> str:
    return secrets.token_hex(8)


@dataclass
class Session:
    id: str = field(default_factory=new_session_id)
    system_prompt: str = ""
    source: str = "cli"
    title: str | None = None
    parent_session_id: str | None = None
    #: Why the session exists: ``new``, ``compression``, ``branch`` or ``resume``.
    reason: str = "new"
    #: Messages as sent to the model, system prompt first.
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: Stable ids of ``messages``, index for index.
    message_ids: list[str] = field(default_factory=list)
    turns: int = 0
    started: bool = False
    #: Next sequence number; only grows, so ids stay unique when history is rewritten.
    next_seq: int = 0
    #: Leading messages that are already in the log (a resumed session); not announced again.
    logged: int = 0

    def __post_init__(self) -> None:
        if self.system_prompt and not self.messages:
            self.append({"role": "system", "content": self.system_prompt})

    @classmethod
    def with_history(cls, messages: list[dict[str, Any]], *, next_seq: int = 0, logged: int = 0,
                     **fields: Any) -> "Session":
        """A session that starts from an existing history (continuation, branch or resume)."""
        system = next((m.get("content") for m in messages[:1] if m.get("role") == "system"), "")
        prompt = fields.pop("system_prompt", None)
        session = cls(**fields, next_seq=next_seq, logged=logged)  # no prompt yet: it is in `messages`
        session.system_prompt = prompt if prompt is not None else (system or "")
        for message in messages:
            session.append(message)
        return session

    def replace_history(self, messages: list[dict[str, Any]]) -> int:
        """Swap in a rewritten history (in-place compression); returns the first new sequence number."""
        first = self.next_seq
        self.messages, self.message_ids = [], []
        for message in messages:
            self.append(message)
        return first

    def seq_of(self, index: int) -> int:
        """Sequence number of the message at ``index`` in the history."""
        return int(self.message_ids[index].rsplit("-", 1)[1])

    def message_id(self, seq: int) -> str:
        return f"{self.id}-{seq:05d}"

    def append(self, message: dict[str, Any]) -> tuple[str, int]:
        """Add a message to the history; returns its id and sequence number."""
        seq = self.next_seq
        self.next_seq += 1
        self.messages.append(message)
        message_id = self.message_id(seq)
        self.message_ids.append(message_id)
        return message_id, seq


_NUMBERED_TITLE = re.compile(r"(.*?) #(\d+)")


def next_title(title: str | None, fallback: str) -> str:
    """``Title`` → ``Title #2`` → ``Title #3``: the name of a continuation session, numbered as Hermes numbers it
    (a trailing `` #N`` is the lineage's count, never part of the name)."""
    base = (title or fallback).strip() or "session"
    match = _NUMBERED_TITLE.fullmatch(base)
    if match is None:
        return f"{base} #2"
    return f"{match.group(1)} #{max(int(match.group(2)), 1) + 1}"


def title_from(text: str | None, limit: int = 60) -> str:
    """``text`` with its whitespace collapsed, cut to ``limit`` characters ending in "…" when longer.

    Task texts can be huge, so a prefix is read first: collapsed, any prefix
    is a prefix of the whole text collapsed, so once it runs past the limit it
    decides the title; only a prefix that is mostly whitespace needs the rest.
    """
    text = text or ""
    head = " ".join(text[: 4 * limit].split()) if limit > 0 else ""
    words = head if limit > 0 and len(head) > limit else " ".join(text.split())
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


def first_user_text(session: Session) -> str:
    return next((m.get("content") for m in session.messages
                 if m.get("role") == "user" and isinstance(m.get("content"), str)), "") or ""


#: Publishes one event of a type with the given fields, stamped with the current session (the agent's emit).
Emit = Callable[..., None]
#: Told that the conversation moved from the session with the first id to the given session.
OnSwitch = Callable[[str, Session], None]


class SessionManager:
    """The conversation's current session and every move to another, each logged as it happens."""

    def __init__(self, session: Session, *, emit: Emit, wants: Callable[[type[Event]], bool],
                 counter: TokenCounter, started_fields: Callable[[], dict[str, Any]],
                 fresh_prompt: Callable[[str], str] = lambda prompt: prompt, on_switch: OnSwitch | None = None,
                 prompt_size: Callable[[list[dict[str, Any]]], int] | None = None):
        self.session = session
        self._emit = emit
        self._wants = wants
        self._counter = counter
        #: Model, window and config hash for SessionStarted (they can change between sessions).
        self._started_fields = started_fields
        self._fresh_prompt = fresh_prompt
        self._on_switch = on_switch
        #: The size of a request carrying a history as sent (tool schemas included), for compression records.
        self._prompt_size = prompt_size

    def start(self) -> None:
        """Log the session's start (once) and the history it starts with."""
        s = self.session
        if s.started:
            return
        s.started = True
        self._emit(SessionStarted, parent_session_id=s.parent_session_id, source=s.source, title=s.title,
                   system_prompt=s.system_prompt, reason=s.reason, **self._started_fields())
        self._announce(range(s.logged, len(s.messages)))

    def close(self, reason: str) -> None:
        if self.session.started:
            self._emit(SessionEnded, end_reason=reason)
            self.session.started = False

    def add(self, message: dict[str, Any], parent_id: str | None) -> str:
        """Append a message to the history and log it; returns its id."""
        message_id, seq = self.session.append(message)
        if self._wants(MessageAdded):  # counting the message is for the log only
            self._emit(MessageAdded, message_id=message_id, parent_id=parent_id, seq=seq, message=message,
                       tokens=self._counter.count_message(message))
        return message_id

    def withdraw(self, messages: list[dict[str, Any]]) -> int:
        """Take ``messages`` back off the end of the history, where they still are; they stay in the log.

        A turn that failed before any answer withdraws its user messages: the
        next one would follow them, and templates that require user and
        assistant to alternate refuse two user messages in a row.
        """
        history, count = self.session.messages, 0
        for message in reversed(messages):
            if not history or history[-1] is not message:
                break
            history.pop()
            self.session.message_ids.pop()
            count += 1
        return count

    # ------------------------------------------------------------ moves

    def new(self) -> str:
        """/new: end this conversation and start an empty one, with the memory read afresh into its prompt."""
        old = self.session
        self.close("new_session")
        self.session = Session(system_prompt=self._fresh_prompt(old.system_prompt), source=old.source)
        self._switched(old.id)
        return self.session.id

    def continuation(self, messages: list[dict[str, Any]], reason: str) -> Session:
        """A child of the current session holding ``messages`` (``branch`` or ``compression``); not yet current."""
        parent = self.session
        return Session.with_history(
            messages, parent_session_id=parent.id, reason=reason, source=parent.source, turns=parent.turns,
            title=next_title(parent.title, title_from(first_user_text(parent))))

    def switch(self, child: Session, end_reason: str) -> None:
        """End the current session with ``end_reason`` and continue in ``child``."""
        old = self.session.id
        self.close(end_reason)
        self.session = child
        self.start()
        self._switched(old)

    def branch(self) -> str:
        """/branch: continue in a child with the same history; the parent stays as it was."""
        self.start()
        self.switch(self.continuation(list(self.session.messages), "branch"), "branched")
        return self.session.id

    def resume(self, session_id: str, messages: list[dict[str, Any]], *, next_seq: int, turns: int = 0) -> None:
        """/resume: continue a logged session from its stored history (already in the log)."""
        self.switch(Session.with_history(messages, id=session_id, reason="resume", source=self.session.source,
                                         next_seq=next_seq, logged=len(messages), turns=turns), "resumed_other")

    def apply(self, compaction: Compaction, *, strategy: str, in_place: bool) -> str:
        """Log one compression and apply it: a child session (rotation) or a rewritten history (in place).

        Returns the mode: ``rotation``, ``in_place``, or ``none`` for an attempt that changed nothing.
        """
        mode = ("in_place" if in_place else "rotation") if compaction.changed else "none"
        child = self.continuation(compaction.messages, "compression") if mode == "rotation" else None
        if self._wants(CompressionEvent):  # the record's measurements are for the log only
            self._record(compaction, strategy, mode, child)
        if child is not None:
            self.switch(child, "compression")
        elif mode == "in_place":
            self.session.replace_history(compaction.messages)
            self._announce(range(len(self.session.messages)))
        return mode

    def _record(self, compaction: Compaction, strategy: str, mode: str, child: Session | None) -> None:
        """Log a compression about to be applied (the current history is still the one it compressed)."""
        result = compaction.result
        plan, summary = getattr(result, "plan", None), result.summary_text or ""
        size = self._prompt_size
        history = self.session.messages
        fates = fates_of_result(history, compaction.messages if mode != "none" else history, result)
        self._emit(CompressionEvent, trigger=compaction.trigger, strategy=strategy,
                   tokens_before=result.tokens_before, tokens_after=result.tokens_after,
                   prompt_tokens_before=size(self.session.messages) if size else None,
                   prompt_tokens_after=size(compaction.messages) if size else None,
                   messages_before=len(self.session.messages), messages_after=len(compaction.messages),
                   messages_dropped=len((getattr(result, "record", None) or {}).get("dropped_indices", ())),
                   compress_start=plan.boundary.start if plan else None,
                   compress_end=plan.boundary.end if plan else None,
                   summary_tokens=self._counter.count_message({"role": "user", "content": summary}) if summary else 0,
                   duration_ms=compaction.duration_ms,
                   effective=compaction.changed and not compaction.verdict.get("ineffective", False),
                   fallback_used=result.fallback_used, mode=mode, new_session_id=child.id if child else None,
                   archived_before_seq=self.session.next_seq if mode == "in_place" else None,
                   details={**(getattr(result, "record", {}) or {}), "verdict": compaction.verdict,
                            "window": compaction.window},
                   summary_text=summary or None, message_fates=dict(zip(self.session.message_ids, fates)))

    def _switched(self, old_id: str) -> None:
        if self._on_switch is not None:
            self._on_switch(old_id, self.session)

    def _announce(self, indices: range) -> None:
        """Log history messages that entered the session other than through a turn (a new or rewritten history)."""
        if not self._wants(MessageAdded):
            return
        s = self.session
        parent = None
        for index in indices:
            message, message_id = s.messages[index], s.message_ids[index]
            self._emit(MessageAdded, message_id=message_id, parent_id=parent, seq=s.seq_of(index), message=message,
                       tokens=self._counter.count_message(message))
            parent = message_id if message.get("role") != "tool" else parent
