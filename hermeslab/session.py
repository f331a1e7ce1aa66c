"""Sessions: ids, the frozen system prompt, and the message history with its tree.

A session is one stretch of conversation logged under one id. Its history is
the list of chat messages sent to the model (system prompt first); every
message also gets a stable id and a parent id so a turn reads as a tree in the
log: user → assistant → the assistant's tool results → the next assistant.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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
