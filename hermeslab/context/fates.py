"""What became of each message a compaction saw: kept, pruned in place, summarised or dropped.

The fate is read from the message lists before and after the compaction, so
every strategy (the summary pipeline, the other agents' policies, the
overflow's fit) is described the same way; a strategy's record adds only which
of the removed messages left without being summarised. Lists are aligned with
``difflib`` on whole messages, so a message repeated word for word further on
(a second "continue") is matched where the longest unchanged run puts it.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Iterable, Sequence

from hermeslab.core.messages import text_of

from .assemble import split_summary
from .types import is_summary_message

#: Still in the context, unchanged (a summary merged ahead of it included).
KEPT = "kept"
#: Still in the context, cut down in place: an old tool output stubbed, long arguments shrunk, a text cut to fit.
PRUNED = "pruned"
#: Gone from the context, replaced by the summary.
SUMMARISED = "summarised"
#: Gone from the context with no summary in its place.
DROPPED = "dropped"
FATES = (KEPT, PRUNED, SUMMARISED, DROPPED)

#: Characters a text cut in place keeps from its beginning, at the least, to count as the same message.
_SAME_OPENING_CHARS = 32


def message_fates(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], *, summarised: bool,
                  dropped_indices: Iterable[int] = ()) -> list[str]:
    """One fate per message of ``before``, in order (see the module docstring).

    ``summarised``: a summary was written, so messages that left count as
    summarised unless ``dropped_indices`` (indices into ``before``) names them.
    """
    dropped = set(dropped_indices)
    gone = SUMMARISED if summarised else DROPPED
    fates = [gone] * len(before)
    matcher = difflib.SequenceMatcher(None, [_key(m) for m in before], [_key(m) for m in after], autojunk=False)
    for tag, low, high, after_low, after_high in matcher.get_opcodes():
        if tag == "equal":
            fates[low:high] = [KEPT] * (high - low)
        elif tag == "replace":
            _pair_changed(before, after, range(low, high), range(after_low, after_high), fates)
    return [DROPPED if fate == gone and index in dropped else fate for index, fate in enumerate(fates)]


def fates_of_result(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], result: Any) -> list[str]:
    """``message_fates`` for a strategy's result (any object with ``summary_text`` and an optional ``record``).

    The pipeline may have seen the history without its system prompt; its
    ``dropped_indices`` are shifted by what it did not see.
    """
    record = getattr(result, "record", None) or {}
    seen = record.get("messages_before")
    offset = len(before) - seen if isinstance(seen, int) and 0 <= len(before) - seen else 0
    dropped = [index + offset for index in record.get("dropped_indices") or ()]
    return message_fates(before, after, summarised=bool(getattr(result, "summary_text", None)),
                         dropped_indices=dropped)


def _key(message: dict[str, Any]) -> str:
    """The message as it would be sent: the loop's private keys (``_synthetic``, ...) left out."""
    return json.dumps({k: v for k, v in message.items() if not k.startswith("_")}, sort_keys=True, default=str)


def _pair_changed(before: Sequence[dict], after: Sequence[dict], old: range, new: range, fates: list[str]) -> None:
    """Within one changed stretch, find the messages that stayed in another form, in order."""
    position = new.start
    for index in old:
        for candidate in range(position, new.stop):
            fate = _same_message(before[index], after[candidate])
            if fate is not None:
                fates[index], position = fate, candidate + 1
                break


def _same_message(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """KEPT when ``new`` is a summary merged ahead of ``old``, PRUNED when it is ``old`` cut down, else None."""
    if old.get("role") != new.get("role"):
        return None
    if is_summary_message(new) and not is_summary_message(old):
        own = split_summary(new)[1]
        return KEPT if own is not None and own == old.get("content") else None
    if old.get("role") == "tool":
        return PRUNED if old.get("tool_call_id") == new.get("tool_call_id") else None
    calls = _call_ids(old)
    if calls:
        return PRUNED if calls == _call_ids(new) else None
    old_text, new_text = text_of(old), text_of(new)
    opening = min(_SAME_OPENING_CHARS, len(old_text))
    if opening and len(new_text) < len(old_text) and new_text[:opening] == old_text[:opening]:
        return PRUNED
    return None


def _call_ids(message: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(call.get("id")) for call in message.get("tool_calls") or () if isinstance(call, dict))
