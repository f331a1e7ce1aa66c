"""What Hermes's lean compaction appends to every summary: the anchor index, the user's own words, a way back.

Lean mode keeps only a small verbatim tail, so the summary must carry what the
tail used to: after the summary body come the anchor index
(``anchor_index``), every real user message of the summarised turns quoted
word for word (newest first, within a character budget, a message cut at its
own limit and the one that straddles the budget cut there), and a footer
saying that the summarised messages are still in the session's history and
can be searched for. A section already present is not added twice, so
augmenting a summary that carries them (an iterative one) changes nothing.

Limits and order are Hermes's (``docs/presets.md``); headings, notes and the
footer are hermeslab's own wording. The footer names ``session_search``;
hermeslab's own ``session_search`` leaves the current conversation out of
its results, so there the pointer names a search that cannot find these
messages (``docs/presets.md`` says so).
"""

from __future__ import annotations

from typing import Any, Sequence

from hermeslab.core.messages import text_of

from .anchor_index import HEADING as ANCHOR_HEADING, anchor_index
from .redact import redact
from .turns import is_real_user_message

#: Characters the quoted user messages may take together (newest first) ...
USER_MESSAGES_BUDGET_CHARS = 24_000
#: ... and one message at most.
USER_MESSAGE_MAX_CHARS = 4_000
USER_MESSAGES_HEADING = "## The user's own words (newest first)"
USER_MESSAGES_NOTE = ("(Each real user message of the summarised turns, quoted as written; where the text above "
                      "says otherwise, these words win.)")
CUT_MARK = " [cut]"
RECOVERY_HEADING = "## Getting details back"


def _cut(text: str, limit: int) -> str:
    return text[:limit].rstrip() + CUT_MARK


def user_messages_section(turns: Sequence[dict[str, Any]], budget_chars: int = USER_MESSAGES_BUDGET_CHARS,
                          message_max_chars: int = USER_MESSAGE_MAX_CHARS) -> str:
    """The real user messages of ``turns``, newest first, each quoted with ``> ``; "" when there are none.

    A message longer than ``message_max_chars`` is cut there; the one that
    reaches past what is left of ``budget_chars`` is cut to what is left, and
    none follows it. A quote counts against the budget with its cut mark.
    """
    quoted: list[str] = []
    used = 0
    for message in reversed(turns):
        if not is_real_user_message(message):
            continue
        remaining = budget_chars - used
        if remaining <= 0:
            break
        text = text_of(message).strip()
        if not text:
            continue
        if len(text) > message_max_chars:
            text = _cut(text, message_max_chars)
        if len(text) > remaining:
            text = _cut(text, remaining)
        quoted.append("> " + text.replace("\n", "\n> "))
        used += len(text)
    if not quoted:
        return ""
    return "\n\n" + USER_MESSAGES_HEADING + "\n" + "\n\n".join(quoted) + "\n" + USER_MESSAGES_NOTE


def recovery_footer(summarised: int) -> str:
    """The pointer back to the summarised messages, which stay in the session's history."""
    return (f"\n\n{RECOVERY_HEADING}\n"
            f"The {summarised} summarised message(s) are still stored in this session's history. When a detail "
            "is missing here (a command's exact output, a file's contents, an error's full text, an earlier "
            "line of reasoning), look it up with session_search(query='<words>') instead of guessing.")


def augment_summary(summary: str, turns: Sequence[dict[str, Any]], *, history_pointer: bool = True) -> str:
    """``summary`` followed by the anchor index, the user's words and the footer, each unless already there.

    The index and the quoted messages are redacted like everything that enters a summary. Without
    ``history_pointer`` the footer is left out (Hermes writes it only when it knows the session's id).
    """
    sections = (
        (ANCHOR_HEADING, lambda: redact(anchor_index(turns))),
        (USER_MESSAGES_HEADING, lambda: redact(user_messages_section(turns))),
        (RECOVERY_HEADING, lambda: recovery_footer(len(turns)) if history_pointer else ""),
    )
    for heading, build in sections:
        if heading not in summary:
            summary += build()
    return summary
