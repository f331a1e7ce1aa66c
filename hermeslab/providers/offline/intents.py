"""Recognising requests in the user's words: a table of rules, each a regex and a builder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

Message = dict[str, Any]

@dataclass(frozen=True)
class Intent:
    """A recognised request: the kind of tool and its arguments by role (path, content, ...)."""

    kind: str
    args: dict[str, Any]


_QUOTED = r'"[^"\n]+"|\'[^\'\n]+\'|`[^`\n]+`|“[^”\n]+”'
_TOKEN = rf'(?:{_QUOTED}|[^\s,;"\'`]+)'
#: Words that join or decorate requests and never name a path.
_FILLER_WORDS = (
    r"and|then|also|next|first|finally|afterwards|after\s+that|now|please|pls|kindly|just|hi|hello|hey|ok|okay|so|"
    r"thanks|thank\s+you|can\s+you|could\s+you|would\s+you|will\s+you|i\s+want\s+you\s+to|i'd\s+like\s+you\s+to|"
    r"i\s+would\s+like\s+you\s+to|i\s+need\s+you\s+to|go\s+ahead\s+and|let's|lets"
)
_FILLER = re.compile(rf"(?:[\s,;:.!?()\-]+|(?:{_FILLER_WORDS})\b)+", re.IGNORECASE)
_NOT_FILLER = r"(?!(?:and|then|also|please|but|or|here|there|now|too|again|for|to|me)\b)"
_BOUNDARY = re.compile(r"[.!?;,](?=\s|$)|\n|\s(?:and|then|also|but)\s", re.IGNORECASE)
_STOPWORDS = frozenset(
    "the a an it this that these those me my your our them file files folder directory dir and then also please "
    "here there now to for of in on with what something everything all todo todos tasks memory more again up out".split()
)
#: Words that follow "search for" in requests that are not searches of the files.
_NOT_PATTERNS = frozenset("the a an it this that me something everything".split())
_KNOWN_FILES = frozenset(
    "makefile dockerfile readme license licence procfile gemfile rakefile vagrantfile justfile changelog".split()
)


def _unquote(token: str) -> tuple[str, bool]:
    token = token.strip()
    for left, right in (('"', '"'), ("'", "'"), ("`", "`"), ("“", "”")):
        if len(token) >= 2 and token.startswith(left) and token.endswith(right):
            return token[1:-1], True
    return token, False


def _clean_path(token: str | None, *, strict: bool) -> str | None:
    """A path from a matched token, or None when the token cannot be one.

    ``strict`` paths must look like paths (a slash, an extension, a quoted
    name or a well-known file name); the others only must not be filler words.
    """
    if token is None:
        return None
    value, quoted = _unquote(token)
    if not quoted:
        value = value.lstrip("(")
        if value not in (".", ".."):
            value = value.rstrip(".,;:!?)")
    if len(value) > 1:
        value = value.rstrip("/") or "/"
    if not value or (not quoted and value.lower() in _STOPWORDS) or not re.search(r"[\w.~/]", value):
        return None
    if strict and not (quoted or _looks_like_path(value)):
        return None
    return value


def _looks_like_path(value: str) -> bool:
    return (
        "/" in value
        or value in (".", "..", "~")
        or bool(re.search(r"\w\.\w", value))
        or value.lower() in _KNOWN_FILES
    )


def _looks_like_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return bool(re.search(r"[^.]\.[A-Za-z0-9]+$", name)) or name.lower() in _KNOWN_FILES


def _free_text(text: str | None) -> str | None:
    """Free text that ran to the end of the message, without wrapping quotes or a final period."""
    if text is None:
        return None
    value, quoted = _unquote(text.strip())
    if not quoted and value.endswith(".") and not value.endswith(".."):
        value = value[:-1]
    value = value.strip()
    return value or None


# -- builders: one small function per intent, each returning None to decline the match


def _read(m: re.Match[str]) -> Intent | None:
    strict = m.group("verb").lower() in ("show", "display", "view", "print")
    path = _clean_path(m.group("path"), strict=strict)
    return Intent("read_file", {"path": path}) if path else None


def _read_or_list(m: re.Match[str]) -> Intent | None:
    """'what's in X' and 'contents of X' read a file and list a directory."""
    path = _clean_path(m.groupdict().get("path"), strict=False)
    if path is None:
        return Intent("list_dir", {"path": "."}) if m.groupdict().get("path") is None else None
    return Intent("read_file" if _looks_like_file(path) else "list_dir", {"path": path})


def _list(m: re.Match[str]) -> Intent | None:
    path = _clean_path(m.groupdict().get("path"), strict=False)
    return Intent("list_dir", {"path": path or "."})


def _write_quoted(m: re.Match[str]) -> Intent | None:
    path = _clean_path(m.group("path"), strict=False)
    content, _ = _unquote(m.group("content"))
    return Intent("write_file", {"path": path, "content": content}) if path else None


def _write_rest(m: re.Match[str]) -> Intent | None:
    path = _clean_path(m.group("path"), strict=False)
    content = _free_text(m.groupdict().get("rest")) or ""
    return Intent("write_file", {"path": path, "content": content}) if path else None


def _save_plain(m: re.Match[str]) -> Intent | None:
    path = _clean_path(m.group("path"), strict=True)
    content = _free_text(m.group("content"))
    return Intent("write_file", {"path": path, "content": content}) if path and content else None


def _search(m: re.Match[str]) -> Intent | None:
    pattern, quoted = _unquote(m.group("pattern"))
    if not quoted:
        pattern = pattern.rstrip(".,;:!?")
        if pattern.lower() in _NOT_PATTERNS:
            return None
    if not pattern:
        return None
    args: dict[str, Any] = {"pattern": pattern}
    path = _clean_path(m.groupdict().get("path"), strict=False)
    if path:
        args["path"] = path
    return Intent("search_files", args)


def _terminal(m: re.Match[str]) -> Intent | None:
    command = m.group("cmd").strip()
    fenced = re.fullmatch(r"```[\w+-]*\n?(.*?)\n?```", command, re.DOTALL)
    if fenced:
        command = fenced.group(1)
    else:
        command, quoted = _unquote(command)
        if not quoted:
            command = re.sub(r"(?<=[^\s.])\.$", "", command)
    command = command.strip()
    return Intent("terminal", {"command": command}) if command else None


def _todo_add(m: re.Match[str]) -> Intent | None:
    rest = m.group("rest").strip()
    pieces = [piece for piece in re.split(r"\s*(?:;|\n)\s*", rest) if piece.strip()]
    if len(pieces) == 1 and m.groupdict().get("plural"):
        pieces = re.split(r"\s*,\s*", pieces[0])
    items = [_free_text(re.sub(r"^(?:[-*•]|\d+[.)])\s+", "", piece)) for piece in pieces]
    items = [item for item in items if item]
    return Intent("todo", {"action": "add", "items": items}) if items else None


def _todo_list(m: re.Match[str]) -> Intent | None:
    return Intent("todo", {"action": "list"})


_STATUS_WORDS = {
    "done": "done", "complete": "done", "completed": "done", "finished": "done", "finish": "done", "close": "done",
    "started": "in_progress", "start": "in_progress", "begin": "in_progress", "in progress": "in_progress",
    "pending": "pending", "not done": "pending", "open": "pending", "todo": "pending", "reopen": "pending",
}


def _todo_update(m: re.Match[str]) -> Intent | None:
    word = re.sub(r"[\s_-]+", " ", m.group("status").lower())
    status = _STATUS_WORDS.get(word)
    if status is None:
        return None
    return Intent("todo", {"action": "update", "id": int(m.group("id")), "status": status})


def _todo_clear(m: re.Match[str]) -> Intent | None:
    return Intent("todo", {"action": "clear"})


def _remember(m: re.Match[str]) -> Intent | None:
    content = _free_text(m.group("rest"))
    return Intent("memory", {"action": "add", "target": "memory", "content": content}) if content else None


_TODO_NOUN = r"(?:todos|to-dos|todo\s+list|to-do\s+list|todo\s+items|tasks|task\s+list)"
_ITEM_ID = r"(?:the\s+)?(?:todo|to-do|task|item)?\s*(?:#|no\.?\s*|number\s+)?(?P<id>\d+)"


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    build: Callable[[re.Match[str]], Intent | None]


def _rule(regex: str, build: Callable[[re.Match[str]], Intent | None]) -> Rule:
    """Compile a rule; a match may not end inside a word ("the" is not the start of "then")."""
    return Rule(re.compile(rf"(?:{regex})(?!\w)", re.IGNORECASE), build)


#: Tried in order at the start of each clause; the first rule that matches and builds wins.
#: Rules whose argument is free text (memory, todo items, file content, commands) take the
#: rest of the message (commands: the rest of the line).
RULES: tuple[Rule, ...] = (
    # memory
    _rule(r"(?:remember|memori[sz]e)(?:\s+that)?\s*:?\s+(?P<rest>(?s:.+))", _remember),
    _rule(r"(?:note|keep\s+in\s+mind)\s+that\s+(?P<rest>(?s:.+))", _remember),
    _rule(r"(?:save|store|add|write|put)\s+(?:this\s+|that\s+|it\s+)?(?:to|in|into)\s+(?:your\s+|the\s+|my\s+)?"
          r"memory\s*:?\s*(?P<rest>(?s:.+))", _remember),
    _rule(r"(?:save|store|add|put)\s+(?P<rest>[^\n]+?)\s+(?:to|in|into)\s+(?:your\s+|the\s+|my\s+)?memory\b", _remember),
    # todo
    _rule(r"add\s+(?P<rest>[^\n]+?)\s+to\s+(?:my\s+|the\s+|our\s+)?(?:todo|to-do|task)(?:\s+list|s)\b", _todo_add),
    _rule(r"add\s+(?:(?:a|an|some|the|these|new)\s+)*(?:todo|to-do|task)(?P<plural>s)?(?:\s+item(?:s)?)?"
          r"\s*[:=-]?\s*(?P<rest>(?s:.+))", _todo_add),
    _rule(rf"(?:show|list|view|display|print|read|check)\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?(?:(?:my|the|our|all)\s+)?"
          rf"(?:current\s+|open\s+)?{_TODO_NOUN}\b", _todo_list),
    _rule(rf"what(?:'s|’s|\s+is|\s+are)\s+(?:on\s+|in\s+)?(?:my|the|our)\s+{_TODO_NOUN}\b", _todo_list),
    _rule(rf"(?:mark|set|move)\s+{_ITEM_ID}\s+(?:as\s+|to\s+)?(?P<status>done|completed?|finished|in[\s_-]progress|"
          r"started|pending|not\s+done|open|todo)\b", _todo_update),
    _rule(r"(?P<status>complete|finish|close|start|begin|reopen)\s+(?:the\s+)?(?:todo|to-do|task|item)\s*"
          r"(?:#|no\.?\s*|number\s+)?(?P<id>\d+)", _todo_update),
    _rule(rf"(?:clear|reset|empty|wipe|delete|remove)\s+(?:all\s+)?(?:of\s+)?(?:(?:my|the|our|all)\s+)?{_TODO_NOUN}\b",
          _todo_clear),
    # terminal
    _rule(r"(?:run|execute|exec)\s+(?:the\s+|this\s+)?(?:shell\s+|terminal\s+)?(?:command\s*:?\s*)?"
          r"(?P<cmd>```(?s:.+?)```|`[^`\n]+`)", _terminal),
    _rule(r"(?:run|execute)\s+(?:the\s+|this\s+)?(?:shell\s+|terminal\s+)?(?:command|cmd)\s*:?\s*(?P<cmd>[^\n]+)",
          _terminal),
    _rule(r'(?:run|execute)\s+(?P<cmd>"[^"\n]+")', _terminal),
    # write
    _rule(rf"(?:write|put|save|store)\s+(?P<content>{_QUOTED})\s+(?:to|into|in)\s+(?:the\s+)?(?:file\s+)?"
          rf"(?P<path>{_TOKEN})", _write_quoted),
    _rule(rf"(?:create|make|write|add)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?(?:empty\s+)?(?:text\s+)?file\s+"
          rf"(?:called\s+|named\s+)?(?P<path>{_TOKEN})(?:\s+(?:with|containing|that\s+contains|saying)(?:\s+the)?"
          r"(?:\s+(?:content|contents|text))?\s*:?\s*(?P<rest>(?s:.+)))?", _write_rest),
    _rule(rf"(?:write|save|put)\s+(?:to|into)\s+(?:the\s+)?(?:file\s+)?(?P<path>{_TOKEN})\s*:\s*(?P<rest>(?s:.+))",
          _write_rest),
    _rule(rf"save\s+(?P<content>[^\n]+?)\s+(?:to|into|in)\s+(?:the\s+)?(?:file\s+)?(?P<path>{_TOKEN})"
          r"(?=\s*(?:$|[,;!?]|\.(?:\s|$)|\s+(?:and|then)\b))", _save_plain),
    # search
    _rule(rf"search\s+(?:in\s+)?(?P<path>{_TOKEN})\s+for\s+(?P<pattern>{_TOKEN})", _search),
    _rule(rf"(?:search|look)\s+(?:(?:through\s+|in\s+)?the\s+(?:files|code|workspace|project)\s+)?for\s+"
          rf"(?P<pattern>{_TOKEN})(?:\s+(?:in|under|inside|within)\s+(?P<path>{_TOKEN}))?", _search),
    _rule(rf"search\s+(?P<pattern>{_QUOTED})(?:\s+(?:in|under|inside|within)\s+(?P<path>{_TOKEN}))?", _search),
    _rule(rf"grep\s+(?:-\w+\s+)*(?P<pattern>{_TOKEN})(?:\s+{_NOT_FILLER}(?:in\s+)?(?P<path>{_TOKEN}))?", _search),
    _rule(rf"find\s+(?:(?:all|the)\s+)*(?:(?:files|lines|places|code)\s+)?(?:(?:that|which)\s+)?(?:containing|contains?|"
          rf"with|mentioning|mentions?|matching|match(?:es)?|referencing)\s+(?P<pattern>{_TOKEN})"
          rf"(?:\s+(?:in|under|inside|within)\s+(?P<path>{_TOKEN}))?", _search),
    _rule(rf"find\s+(?:all\s+)?(?:the\s+)?(?:occurrences|uses|usages|mentions|references)\s+of\s+(?P<pattern>{_TOKEN})"
          rf"(?:\s+(?:in|under|inside|within)\s+(?P<path>{_TOKEN}))?", _search),
    # list
    _rule(rf"(?:list|show|display|view)\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?(?:the\s+)?contents?\s+of\s+(?:the\s+)?"
          rf"(?:file\s+|directory\s+|folder\s+)?(?P<path>{_TOKEN})", _read_or_list),
    _rule(rf"(?:list|show|display|view)\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?(?:the\s+)?(?:files|entries|directory|folder|dir)"
          rf"(?:\s+(?:in|of|under|inside))?(?:\s+the)?(?:\s+(?:directory|folder|dir))?"
          rf"(?:\s+{_NOT_FILLER}(?P<path>{_TOKEN}))?", _list),
    _rule(rf"ls(?=$|[\s,;.!?])(?:\s+(?!-){_NOT_FILLER}(?P<path>{_TOKEN}))?", _list),
    _rule(rf"(?:what|which)\s+files\s+(?:are\s+)?(?:there|here|in\s+(?:the\s+)?(?:directory\s+|folder\s+)?"
          rf"(?P<path>{_TOKEN})|do\s+(?:we|i|you)\s+have)", _list),
    _rule(r"what(?:'s|’s|\s+is)\s+in\s+(?:the\s+)?(?:current\s+|this\s+)?(?:directory|folder|dir|workspace)\b", _list),
    # read
    _rule(rf"(?:(?:tell|show)\s+me\s+)?what(?:'s|’s|\s+is)\s+in(?:side)?\s+(?:the\s+file\s+)?(?P<path>{_TOKEN})",
          _read_or_list),
    _rule(rf"(?P<verb>read|cat|open|view|display|print|show)(?:\s+me)?(?:\s+(?:the|file|contents?\s+of|text\s+of))*"
          rf"\s+(?P<path>{_TOKEN})", _read),
)

_CONTINUATION = re.compile(rf"(?P<path>{_TOKEN})(?=$|[\s,;!?]|\.(?:\s|$))")
#: Intents whose bare follow-up paths ("read a.txt and b.txt") repeat the same request.
_CONTINUABLE = frozenset({"read_file", "list_dir"})


def parse_intents(text: str) -> list[Intent]:
    """Every request in a message, in order; clauses that match no rule are skipped.

    The scanner works clause by clause: filler and joining words are skipped,
    the rules are tried at the clause start, and when none matches the scanner
    moves on to the next clause boundary. A bare path right after a read or a
    list repeats that request for the new path.
    """
    intents: list[Intent] = []
    position = 0
    while True:
        filler = _FILLER.match(text, position)
        if filler:
            position = filler.end()
        if position >= len(text):
            return intents
        match = _first_rule_match(text, position)
        if match is not None:
            intent, position = match
            intents.append(intent)
            continue
        continued = _continue_previous(text, position, intents)
        if continued is not None:
            intent, position = continued
            intents.append(intent)
            continue
        boundary = _BOUNDARY.search(text, position)
        position = max(boundary.end(), position + 1) if boundary else len(text)


def _first_rule_match(text: str, position: int) -> tuple[Intent, int] | None:
    for rule in RULES:
        m = rule.pattern.match(text, position)
        if m is None:
            continue
        intent = rule.build(m)
        if intent is not None:
            return intent, m.end()
    return None


def _continue_previous(text: str, position: int, intents: list[Intent]) -> tuple[Intent, int] | None:
    if not intents or intents[-1].kind not in _CONTINUABLE:
        return None
    m = _CONTINUATION.match(text, position)
    path = _clean_path(m.group("path"), strict=True) if m else None
    if m is None or path is None:
        return None
    return Intent(intents[-1].kind, {**intents[-1].args, "path": path}), m.end()
