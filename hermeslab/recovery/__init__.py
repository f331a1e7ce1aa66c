"""Error recovery: classify a failed call, choose the next step, and rescue unusable replies.

``classify`` maps a provider failure to a fault class with its flags;
``RecoveryChain`` decides, attempt by attempt, between retrying, repairing,
refreshing credentials, falling back and giving up; ``EmptyRecovery`` and
``truncation`` handle replies that arrived but cannot be used as they are.
The agent applies the decisions and logs each one (``RecoveryLog``).
"""

from __future__ import annotations

from .backoff import backoff_delay, retry_delay
from .chain import CallState, CredentialRefresh, Decision, ProviderSlot, RecoveryChain, RecoveryFailed
from .classify import FAULT_CLASSES, RULES, Classification, FaultClass, SessionSize, classify
from .empty import (
    EMPTY_MARKER,
    NUDGE_TEXT,
    EmptyContext,
    EmptyRecovery,
    has_inline_thinking,
    is_empty,
    nudge_messages,
    prefill_message,
    prior_housekeeping_text,
    recent_tool_result,
    visible_text,
)
from .log import RECOVERED, RecoveryAction, RecoveryLog
from .repair import malformed_tool_calls, repair_message_encoding, repair_surrogates, repaired_request
from .truncation import (
    CONTINUE_NOTICE,
    NoRoomToContinue,
    complete_truncated,
    continuation_cap,
    continuation_messages,
    is_truncated,
    raised_output_cap,
    thinking_exhausted,
)

__all__ = [
    "CONTINUE_NOTICE", "EMPTY_MARKER", "FAULT_CLASSES", "NUDGE_TEXT", "RECOVERED", "RULES", "CallState",
    "Classification", "CredentialRefresh", "Decision", "EmptyContext", "EmptyRecovery", "FaultClass", "ProviderSlot",
    "NoRoomToContinue", "RecoveryAction", "RecoveryChain", "RecoveryFailed", "RecoveryLog", "SessionSize", "backoff_delay", "classify",
    "complete_truncated", "continuation_cap", "continuation_messages", "has_inline_thinking", "is_empty",
    "is_truncated",
    "malformed_tool_calls", "nudge_messages", "prefill_message", "prior_housekeeping_text", "raised_output_cap",
    "recent_tool_result", "repair_message_encoding", "repair_surrogates", "repaired_request", "retry_delay",
    "thinking_exhausted", "visible_text",
]
