"""Hermes's rough token estimate (characters / 4), reproduced exactly, and the caches that keep it cheap.

Hermes compares this estimate, not a tokenizer's count, against its
thresholds, so a hermeslab run that makes Hermes's decisions (the
``hermes-0.19`` preset, ``compression.estimator: rough``, the replay provider's
usage) must do the same arithmetic to the character: per message
``content_chars // 4 + 10`` plus ``len(str(call)) // 4`` per tool call (the repr
of the whole call dict) plus the replayed reasoning fields, with an image part
counted as 6,400 characters; per list, ``(sum of len(str(message)) + 3) // 4``
plus 1,500 tokens per image; per tool list, the characters of names,
descriptions and compact parameter JSON / 4. The whole-list estimate runs
before every model call on a growing history, so the repr lengths it sums
are remembered per message object, and a list that only grew costs only its
new messages. Exact counting is in `hermeslab.core.tokens`, which also picks
between the two.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Sequence

from .cache import bounded_put, put_bounded
from .messages import Message

try:
    from ._reprlen import ascii_repr_length, repr_length
except ImportError:  # built without a compiler: measured in Python
    ascii_repr_length = None

    def repr_length(obj: Any) -> int:
        return len(repr(obj))

#: Characters per token.
CHARS_PER_TOKEN = 4
#: Characters one image part is worth in the rough per-message walk (1,600 tokens).
ROUGH_IMAGE_CHARS = 6_400
#: Tokens one image part is worth in the rough whole-list estimate.
ROUGH_LIST_IMAGE_TOKENS = 1_500
#: Per-message framing the rough walk adds.
ROUGH_MESSAGE_OVERHEAD = 10
#: Fields some providers need replayed verbatim; they occupy the window like content.
REPLAY_FIELDS = ("reasoning", "reasoning_content", "reasoning_details", "codex_reasoning_items",
                 "codex_message_items")
_REPLAY_KEYS = frozenset(REPLAY_FIELDS)
#: Contents this long are measured without writing their repr (and remembered by identity).
LONG_STRING = 256
#: Tool-call arguments this long likewise (below it, the repr of the whole call is cheaper).
LONG_ARGUMENTS = 1_024
_IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image"})


def is_image_part(part: Any) -> bool:
    """A content part Hermes takes for an image: ``image_url``, ``image`` or ``input_image``."""
    return isinstance(part, dict) and part.get("type") in _IMAGE_PART_TYPES


def rough_tokens(text: str | None) -> int:
    """A bare text's tokens under the ``rough`` estimator: its characters / 4, rounded up.

    A missing text (a message whose content is None) costs nothing, as in Hermes.
    """
    if text is None:
        return 0
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def rough_reply_tokens(message: Message) -> int:
    """chars/4 over what a reply produced: its text parts and each call's name and arguments."""
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                chars += len(part.get("text", ""))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        chars += len(function.get("name", "")) + len(function.get("arguments", "") or "")
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _rough_content_chars(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        chars = 0
        for part in content:
            if is_image_part(part):
                chars += ROUGH_IMAGE_CHARS
            elif isinstance(part, dict):
                chars += len(str(part.get("text", "") or ""))
            else:
                chars += len(str(part))
        return chars
    return len(str(content))


def _serialised_length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


def rough_message_tokens(message: Message) -> int:
    """Hermes's budget-walk estimate of one message."""
    tokens = _rough_content_chars(message.get("content")) // 4 + ROUGH_MESSAGE_OVERHEAD
    for call in message.get("tool_calls") or ():
        tokens += call_repr_length(call, _repr_sizes.text_length) // 4
    if not _REPLAY_KEYS.isdisjoint(message):  # rare: one pass over the keys instead of a lookup per field
        for key in REPLAY_FIELDS:
            value = message.get(key)
            if value:
                tokens += _serialised_length(value) // 4
    return tokens


def _without_images(message: Message) -> tuple[Message, int]:
    content = message.get("content")
    if not isinstance(content, list) or not any(is_image_part(p) for p in content):
        return message, 0
    images = sum(1 for p in content if is_image_part(p))
    shadow = dict(message)
    shadow["content"] = [p if not is_image_part(p) else {"type": p.get("type")} for p in content]
    return shadow, images


class _ReprSizes:
    """``(len(str(message)), images)`` per message object, remembered by identity.

    The whole-list estimate runs before every model call on a growing history,
    and the repr of a long tool result costs far more than a lookup. A message
    seen again is the same dict (hermeslab never edits inside one); the entry is
    still checked against the message's content, calls and key count, and keeps
    the message alive so its id cannot be reused. The repr lengths of long
    contents and call arguments are remembered too, since a replay puts the
    same recorded texts into new message dicts every time: such a message is
    measured as its other items plus those lengths, which are counted rather
    than written out (``str_repr_length``). Every repr length is counted, not
    written (``repr_length``, in C where it was built). Full: the oldest tenth goes.
    """

    def __init__(self, max_entries: int = 20_000, max_strings: int = 100_000):
        #: id → (message, content, calls, key count, (chars, images)).
        self._seen: dict[int, tuple[Message, Any, Any, int, tuple[int, int]]] = {}
        #: id → (text, repr length, newlines or None when the text is not ASCII).
        self._strings: dict[int, tuple[str, int, int | None]] = {}
        self._max_entries = max_entries
        self._max_strings = max_strings
        self._lock = threading.Lock()

    def __call__(self, message: Message) -> tuple[int, int]:
        content, calls = message.get("content"), message.get("tool_calls")
        entry = self._seen.get(id(message))
        if (entry is not None and entry[0] is message and entry[1] is content and entry[2] is calls
                and entry[3] == len(message)):
            return entry[4]
        if type(content) is list:
            shadow, images = _without_images(message)
            sizes = (self._dict_length(shadow, shadow.get("content"), calls), images)
        else:
            sizes = (self._dict_length(message, content, calls), 0)
        entry = (message, content, calls, len(message), sizes)
        put_bounded(self._seen, id(message), entry, self._max_entries, self._lock)
        return sizes

    def _dict_length(self, message: Message, content: Any, calls: Any) -> int:
        if type(message) is not dict:
            return len(str(message))
        long_content = type(content) is str and len(content) >= LONG_STRING
        long_calls = bool(calls) and type(calls) is list and any(map(_long_arguments, calls))
        if not (long_content or long_calls):
            return repr_length(message)  # a dict's str is its repr
        rest, extra = dict(message), 0
        if long_content:
            rest["content"] = ""  # repr "''": two characters in place of the content's repr
            extra += self.text_length(content) - 2
        if long_calls:
            rest["tool_calls"] = []  # repr "[]" in place of "[call, call]"
            extra += sum(call_repr_length(call, self.text_length) for call in calls) + 2 * (len(calls) - 1)
        return repr_length(rest) + extra

    def text_length(self, text: str) -> int:
        """``len(repr(text))``, remembered by identity for long texts."""
        if len(text) < LONG_STRING:
            return len(repr(text))
        entry = self._strings.get(id(text))
        if entry is not None and entry[0] is text:
            return entry[1]
        size, newlines = _repr_length_and_newlines(text)
        put_bounded(self._strings, id(text), (text, size, newlines), self._max_strings, self._lock)
        return size

    def newlines(self, text: str) -> int | None:
        """The newlines of a long text this cache measured (found on the way), else None."""
        entry = self._strings.get(id(text))
        return entry[2] if entry is not None and entry[0] is text else None


_repr_sizes = _ReprSizes()


def _long_arguments(call: Any) -> bool:
    function = call.get("function") if type(call) is dict else None
    arguments = function.get("arguments") if type(function) is dict else None
    return type(arguments) is str and len(arguments) >= LONG_ARGUMENTS


def call_repr_length(call: Any, text_length: Callable[[str], int]) -> int:
    """``len(str(call))`` of a tool call; long arguments (a whole file written) are measured by ``text_length``."""
    if not _long_arguments(call):
        return len(str(call)) if type(call) is not dict else repr_length(call)
    shell = dict(call)
    shell["function"] = {**call["function"], "arguments": ""}  # repr "''" in place of the arguments' repr
    return repr_length(shell) - 2 + text_length(call["function"]["arguments"])


#: The ASCII characters a str repr writes as they are: printable, and neither a backslash nor a quote.
_PLAIN_ASCII = bytes(c for c in range(32, 127) if chr(c) not in "\\'\"")


def str_repr_length(text: str) -> int:
    """``len(repr(text))`` without building the repr, for the long tool outputs the list estimate measures.

    An ASCII text's repr is its characters, two quotes and the escapes: a
    backslash, newline, carriage return or tab takes two characters, another
    control character four (``\\xNN``), and a single quote two unless the text
    has single quotes and no double ones (the repr is then double-quoted).
    Those are counted in one pass by the C helper where it was built, else
    on the few characters left once the plain ones are deleted (C-speed
    passes, a third of the repr's time). Other texts take the repr itself.
    """
    return _repr_length_and_newlines(text)[0]


def _repr_length_and_newlines_in_python(text: str) -> tuple[int, int | None]:
    """``str_repr_length`` and, for an ASCII text, its newlines, which the same pass finds."""
    if not text.isascii():
        return len(repr(text)), None
    special = text.encode("ascii").translate(None, _PLAIN_ASCII)
    if not special:
        return len(text) + 2, 0
    newlines, singles, doubles = special.count(b"\n"), special.count(b"'"), special.count(b'"')
    two_char = newlines
    controls = len(special) - newlines - singles - doubles
    if controls:  # a backslash, carriage return, tab or other control character: rare in tool output
        others = special.count(b"\\") + special.count(b"\r") + special.count(b"\t")
        two_char += others
        controls -= others
    escaped_singles = 0 if singles and not doubles else singles
    return len(text) + 2 + two_char + 3 * controls + escaped_singles, newlines


def _repr_length_and_newlines(text: str) -> tuple[int, int | None]:
    """``_repr_length_and_newlines_in_python``, by the C helper's one pass where it was built."""
    if ascii_repr_length is None:
        return _repr_length_and_newlines_in_python(text)
    counted = ascii_repr_length(text)
    return (len(repr(text)), None) if counted is None else counted


def known_newlines(text: str) -> int | None:
    """The newlines of ``text`` when the list estimate measured this very string, else None.

    Pruning describes old outputs by their line counts, and under the
    ``rough`` estimator the same outputs were just measured: the count comes
    from that pass instead of another one over the text.
    """
    return _repr_sizes.newlines(text)


def rough_list_share_tokens(message: Message) -> int:
    """One message measured as the whole-list estimate measures it: its repr / 4, images at the flat rate."""
    chars, images = _repr_sizes(message)
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + images * ROUGH_LIST_IMAGE_TOKENS


#: The lists measured last (copies), most recent first, with their summed sizes. A list that only grew
#: since one of them (it compares equal up to that one's length, a C-speed check) costs only its new
#: messages; several are kept because a loop measures more than one list in turn (the history, the
#: request sent, the history without its system message).
_recent_lists: list[tuple[list[Message], int, int]] = []
_RECENT_LISTS_MAX = 4


def rough_messages_tokens(messages: Sequence[Message]) -> int:
    """Hermes's whole-list estimate: the repr length of every message / 4, images at a flat rate."""
    global _recent_lists
    recent = _recent_lists
    start = chars = images = 0
    found = None
    if messages:
        first, length = messages[0], len(messages)
        for entry in recent:  # the longest list this one extends: the system message alone is a prefix too
            last = entry[0]
            count = len(last)
            if (start < count <= length and last[0] is first and messages[count - 1] is last[-1]
                    and (messages == last if length == count else messages[:count] == last)):
                found, start, chars, images = entry, count, entry[1], entry[2]
                if count == length:
                    break
    if found is not None and start == len(messages):  # measured as it is: nothing to add or copy
        if recent[0] is not found:
            _recent_lists = [found] + [entry for entry in recent if entry is not found]
        return (chars + 3) // 4 + images * ROUGH_LIST_IMAGE_TOKENS
    for message in messages[start:]:
        size, count = _repr_sizes(message)
        chars += size
        images += count
    if messages:  # a new list rather than edits in place: another thread still reads the old one whole
        _recent_lists = [(list(messages), chars, images)] + [
            entry for entry in recent if entry is not found][:_RECENT_LISTS_MAX - 1]
    return (chars + 3) // 4 + images * ROUGH_LIST_IMAGE_TOKENS


#: Tool lists measured, by identity (with their length, and held so the id stays theirs): a loop offers
#: the same list object on every call, and an A/B run replays each recording's list under every config.
_tool_schema_tokens: dict[int, tuple[Any, int, int]] = {}
_TOOL_SCHEMA_LISTS_MAX = 4_096


def rough_tool_schema_tokens(tools: Sequence[dict] | None) -> int:
    if not tools:
        return 0
    entry = _tool_schema_tokens.get(id(tools))
    if entry is not None and entry[0] is tools and entry[1] == len(tools):
        return entry[2]
    chars = 0
    for tool in tools:
        function = tool.get("function", tool)
        chars += len(function.get("name", "")) + len(function.get("description", "") or "")
        chars += len(json.dumps(function.get("parameters", {}), separators=(",", ":")))
    tokens = (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    bounded_put(_tool_schema_tokens, id(tools), (tools, len(tools), tokens), _TOOL_SCHEMA_LISTS_MAX)
    return tokens
