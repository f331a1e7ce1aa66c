"""Plain-text answers: identity, capabilities, greetings, counting and long answers."""

from __future__ import annotations

import re
from typing import Any, Callable

from .offered import OfferedTools

Message = dict[str, Any]

#: Most numbers "count to N" will produce.
MAX_COUNT = 10_000

_IDENTITY_ASK = re.compile(
    r"\b(?:who|what)\s+are\s+you\b|\bwhat\s+can\s+you\s+do\b|\bintroduce\s+yourself\b|\bwhat\s+(?:model|llm)\b|"
    r"\bare\s+you\s+(?:an?\s+)?(?:llm|language\s+model|ai|bot|real|human|gpt)\b|^\s*/?help\s*[?!.]*\s*$",
    re.IGNORECASE,
)
RECHECK_ASK = re.compile(r"\b(?:check|verify|review|double-check)\s+(?:your|the)\s+(?:answer|reply|response)\b",
                          re.IGNORECASE)
_GREETING = re.compile(r"^\s*(?:hi|hello|hey|good\s+(?:morning|afternoon|evening))\b", re.IGNORECASE)
_COUNT_ASK = re.compile(r"\bcount\s+(?:from\s+(?P<start>\d+)\s+)?(?:to|up\s+to|until)\s+(?P<end>\d+)", re.IGNORECASE)
_LONG_ASK = re.compile(
    r"\b(?:long|lengthy|extended)\s+(?:answer|story|text|essay|response|reply|tale)\b|\btell\s+me\s+a\s+story\b",
    re.IGNORECASE,
)

NO_REQUEST_TEXT = (
    "There is no new user request for me to act on: the conversation already ends with my reply."
)
UNRECOGNISED_TEXT = "I could not match your message to any request I know how to handle."

#: (tool kind, what it does, an example phrasing)
_CAPABILITIES = (
    ("read_file", "read a file", '"read notes.txt", "show me src/app.py"'),
    ("list_dir", "list a directory", '"list files", "list the directory src"'),
    ("write_file", "write a file", "'write \"hello\" to notes.txt', \"create a file notes.txt with content: ...\""),
    ("search_files", "search files", "'search for \"TODO\" in src', \"grep foo\""),
    ("terminal", "run a shell command", '"run `ls -la`", "run the command: pytest -q"'),
    ("todo", "keep a todo list", '"add todos: a; b", "show my todos", "mark todo 2 done"'),
    ("memory", "remember a fact", '"remember that the tests use pytest"'),
)


def capabilities_text(offered: OfferedTools) -> str:
    lines = ["What I can do:"]
    for kind, what, example in _CAPABILITIES:
        note = "" if offered.find(kind) else f" (needs a `{kind}` tool, which is not offered here)"
        lines.append(f"- {what}: {example}{note}")
    lines.append("- answer from the results of those tools, several requests per message included")
    lines.append("- fill a summary template (a request to summarise with `## ` headings)")
    lines.append('- produce long text for testing streams: "tell me a long story", "count to 500"')
    return "\n".join(lines)


def identity_text(offered: OfferedTools) -> str:
    return (
        "I am hermeslab's offline model: a deterministic, rule-based stand-in, not a language model. "
        "I match your latest message against a fixed set of request patterns and answer the same way "
        "every time, with no network and no model weights.\n\n" + capabilities_text(offered)
    )


def _identity_answer(request: str, offered: OfferedTools) -> str | None:
    return identity_text(offered) if _IDENTITY_ASK.search(request) else None


def _greeting_answer(request: str, offered: OfferedTools) -> str | None:
    return "Hello! " + identity_text(offered) if _GREETING.match(request) else None


def _count_answer(request: str, offered: OfferedTools) -> str | None:
    m = _COUNT_ASK.search(request)
    if m is None:
        return None
    start, end = int(m.group("start") or 1), int(m.group("end"))
    step = 1 if end >= start else -1
    numbers = range(start, end + step, step)
    note = ""
    if len(numbers) > MAX_COUNT:
        numbers = numbers[:MAX_COUNT]
        note = f" (I stop after {MAX_COUNT} numbers.)"
    return ", ".join(str(n) for n in numbers) + "." + note


_STORY = (
    "The archivist of the ninth floor kept one ledger, and the ledger kept growing. Every visitor added a page: a "
    "question, a list of files, the output of a command that had run somewhere below. The drawer that held the "
    "ledger did not grow at all.",
    "For a while the archivist simply pushed harder, and the drawer closed. Then one morning it would not, and "
    "the archivist understood that something had to leave the drawer before anything new could enter it.",
    "The first idea was to tear out the oldest pages. It was quick, and the drawer closed again, but by the "
    "afternoon a visitor asked about an order number written on one of those pages, and nobody could answer.",
    "So the archivist tried a second idea. Before removing old pages, she copied onto a single card the things "
    "that mattered: what had been asked, what had been done, which files had been touched, and every number "
    "that someone might ask about again. The card went in the front of the drawer; the pages went to the cellar.",
    "The card worked better than tearing, but it had its own dangers. A careless card forgot the exact words of "
    "an error. A proud card claimed that work was finished when it was only planned. A long card filled half the "
    "drawer and saved nothing at all.",
    "The archivist learned to measure. She counted how much room each card freed and how often a visitor's "
    "question could still be answered afterwards. Cards that freed little were rewritten; cards that lost a "
    "number that was later needed were studied until she knew why.",
    "She also learned to keep the newest pages whole. Whatever the latest visitor had asked stayed on the top of "
    "the pile, word for word, because a summary of the question in front of you is never as good as the question.",
    "Years later, the ledger was longer than the building was tall, and the drawer was still the same size. "
    "Visitors rarely noticed. They asked, the archivist answered, and when the drawer grew tight a new card "
    "appeared at the front, carrying forward exactly what the next question would need.",
    "When her apprentice asked what the secret was, the archivist said there was none: decide what must "
    "survive, write it down plainly, check afterwards whether it did, and never pretend a torn page was a "
    "summary. Then she went back to counting the room in the drawer.",
)


def _long_answer(request: str, offered: OfferedTools) -> str | None:
    if not _LONG_ASK.search(request):
        return None
    return "Here is a long story, always the same one.\n\n" + "\n\n".join(_STORY)


#: Text answers tried in order after summaries and tool requests.
TEXT_ANSWERS: tuple[Callable[[str, OfferedTools], str | None], ...] = (
    _count_answer,
    _long_answer,
    _identity_answer,
    _greeting_answer,
)
