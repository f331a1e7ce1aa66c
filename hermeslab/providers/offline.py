"""hermeslab's embedded offline model: a deterministic, rule-based Provider.

It is not a language model. It recognises a fixed set of English requests in
the latest user message (read, list, write, search, run, todo, remember),
turns them into tool calls shaped by the tool schemas it is offered, answers
from the tool results, fills summary templates, and otherwise says plainly
what it is. That is enough to drive the whole of hermeslab (loop, tools,
compression, logging, widgets) with no network and no weights, and since it
uses no randomness and no clock, the same request always gets the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from ..core.messages import MessageValidationError, text_of, tool_calls_of, validate_messages, wire_messages
from ..core.tokens import count_text, default_counter, encoding
from .base import ChatRequest, ChatResponse, ProviderError, StreamDelta, Usage

MODEL_NAME = "hermeslab-offline"
#: Most numbers "count to N" will produce.
MAX_COUNT = 10_000

Message = dict[str, Any]


class OfflineModel:
    """The Provider; all decisions live in the pure functions below."""

    name = MODEL_NAME
    model = MODEL_NAME

    def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            validate_messages(request.messages)
        except MessageValidationError as exc:
            raise ProviderError(f"invalid messages: {exc}", status=400, error_type="invalid_request_error") from None
        if request.max_tokens is not None and request.max_tokens < 1:
            raise ProviderError(
                f"max_tokens must be at least 1, got {request.max_tokens}", status=400, error_type="invalid_request_error"
            )
        draft = compose_reply(request.messages, request.tools)
        text, finish = draft.text, "tool_calls" if draft.tool_calls else "stop"
        if not draft.tool_calls and request.max_tokens is not None:
            text, cut = truncate_to_tokens(text, request.max_tokens)
            finish = "length" if cut else finish
        message: Message = {"role": "assistant", "content": text if text or not draft.tool_calls else None}
        if draft.tool_calls:
            message["tool_calls"] = draft.tool_calls
        usage = Usage(
            prompt_tokens=default_counter.count_request(request.messages, request.tools),
            completion_tokens=completion_tokens(message),
        )
        return ChatResponse(message=message, finish_reason=finish, usage=usage, model=request.model or MODEL_NAME)

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        response = self.complete(request)
        for piece in word_pieces(response.message.get("content") or ""):
            yield StreamDelta(text=piece)
        yield response


def completion_tokens(message: Message) -> int:
    """Tokens of the produced text plus each tool call's name and arguments."""
    tokens = count_text(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        tokens += count_text(call["function"]["name"]) + count_text(call["function"]["arguments"])
    return tokens


def truncate_to_tokens(text: str, limit: int) -> tuple[str, bool]:
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text, False
    return encoding().decode(tokens[:limit]), True


def word_pieces(text: str) -> list[str]:
    """Word-sized stream deltas that join back to exactly ``text``."""
    return re.findall(r"\S+\s*|\s+", text)


# ---------------------------------------------------------------- composing a reply


@dataclass
class Draft:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def compose_reply(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None) -> Draft:
    """Decide the next assistant message from the conversation and the offered tools."""
    offered = OfferedTools(tools)
    trailing = trailing_tool_results(messages)
    if trailing is not None:
        results, calls = trailing
        return Draft(text=answer_from_results(results, calls))
    request = pending_request(messages)
    if request is None:
        return Draft(text=NO_REQUEST_TEXT + "\n\n" + capabilities_text(offered))
    summary = fill_summary_template(request)
    if summary is not None:
        return Draft(text=summary)
    if _RECHECK_ASK.search(request):
        earlier = previous_answer(messages)
        if earlier is not None:
            return Draft(text=earlier)
    intents = parse_intents(request)
    if intents:
        return plan_tool_calls(intents, offered, conversation_digest(messages))
    for recognise in TEXT_ANSWERS:
        answer = recognise(request, offered)
        if answer is not None:
            return Draft(text=answer)
    return Draft(text=UNRECOGNISED_TEXT + "\n\n" + identity_text(offered))


def trailing_tool_results(messages: Sequence[Message]) -> tuple[list[Message], dict[str, dict]] | None:
    """The tool results that end the conversation, with the calls they answer (by id)."""
    start = len(messages)
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    if start == len(messages):
        return None
    calls = {call.get("id"): call for call in tool_calls_of(messages[start - 1])} if start > 0 else {}
    return list(messages[start:]), calls


#: In-process flags that mark a user-role message as written by the runtime, not the user.
_SYNTHETIC_FLAGS = (
    "_todo_snapshot_synthetic",
    "_empty_recovery_synthetic",
    "_verification_stop_synthetic",
    "_pre_verify_synthetic",
    "_compressed_summary",
)
_SUMMARY_OPENING = re.compile(r"^\s*\[[^\]\n]*SUMMARY[^\]\n]*\]")


def is_real_user_message(message: Message) -> bool:
    """A user message the user wrote: has text, carries no synthetic flag, is not a handoff summary."""
    if message.get("role") != "user" or any(message.get(flag) for flag in _SYNTHETIC_FLAGS):
        return False
    text = text_of(message)
    return bool(text.strip()) and not _SUMMARY_OPENING.match(text)


def pending_request(messages: Sequence[Message]) -> str | None:
    """The latest real user message not yet followed by an assistant reply."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return None
        if is_real_user_message(message):
            return text_of(message)
    return None


def previous_answer(messages: Sequence[Message]) -> str | None:
    """The latest assistant text: asked to check its answer, a rule-based model can only stand by it."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and text_of(message).strip():
            return text_of(message)
    return None


def conversation_digest(messages: Sequence[Message]) -> str:
    text = json.dumps(wire_messages(messages), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def call_id(digest: str, index: int, name: str, arguments: str) -> str:
    """Deterministic and unique per conversation state, so a replayed request gets the same ids."""
    return "call_" + hashlib.sha256(f"{digest}:{index}:{name}:{arguments}".encode("utf-8")).hexdigest()[:12]


# ---------------------------------------------------------------- offered tools


#: Canonical tool → names the same kind of tool goes by.
TOOL_ALIASES: dict[str, tuple[str, ...]] = {
    "read_file": ("read_file", "file_read", "read", "cat", "view_file"),
    "list_dir": ("list_dir", "list_directory", "list_files", "ls"),
    "write_file": ("write_file", "file_write", "create_file", "write"),
    "search_files": ("search_files", "search_file_content", "grep", "search"),
    "terminal": ("terminal", "shell", "bash", "run_command", "execute_command"),
    "todo": ("todo", "todo_write", "todos"),
    "memory": ("memory", "memory_tool"),
}

#: Argument role → property names that mean it, first preferred.
ARGUMENT_ALIASES: dict[str, tuple[str, ...]] = {
    "path": ("path", "file_path", "filepath", "file", "filename", "directory", "dir", "target_file"),
    "content": ("content", "contents", "text", "data"),
    "pattern": ("pattern", "query", "regex", "search", "term"),
    "command": ("command", "cmd", "script"),
}


@dataclass(frozen=True)
class OfferedTool:
    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]


class OfferedTools:
    """The request's tool schemas, looked up by the kind of tool an intent needs."""

    def __init__(self, tools: Sequence[dict[str, Any]] | None):
        self.tools: list[OfferedTool] = []
        for tool in tools or ():
            function = tool.get("function", tool) if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            parameters = function.get("parameters") or {}
            self.tools.append(OfferedTool(
                name=function["name"],
                properties=dict(parameters.get("properties") or {}),
                required=tuple(parameters.get("required") or ()),
            ))

    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def find(self, kind: str) -> OfferedTool | None:
        by_name = {tool.name: tool for tool in self.tools}
        for alias in TOOL_ALIASES.get(kind, (kind,)):
            if alias in by_name:
                return by_name[alias]
        return None


def kind_of_tool(name: str) -> str:
    for kind, aliases in TOOL_ALIASES.items():
        if name in aliases:
            return kind
    return name


def bind_arguments(roles: dict[str, Any], tool: OfferedTool) -> dict[str, Any]:
    """Name each argument as the tool's schema names it.

    A role the schema does not know is dropped, unless it is the only value
    left and exactly one required property is still empty: then it fills that.
    """
    if not tool.properties:
        return dict(roles)
    bound: dict[str, Any] = {}
    unbound: list[Any] = []
    for role, value in roles.items():
        name = next((n for n in (role, *ARGUMENT_ALIASES.get(role, ())) if n in tool.properties and n not in bound), None)
        if name is None:
            unbound.append(value)
        else:
            bound[name] = value
    still_required = [name for name in tool.required if name not in bound]
    if len(unbound) == 1 and len(still_required) == 1:
        bound[still_required[0]] = unbound[0]
    return bound


def plan_tool_calls(intents: list["Intent"], offered: OfferedTools, digest: str) -> Draft:
    calls: list[dict[str, Any]] = []
    missing: list[str] = []
    for intent in intents:
        tool = offered.find(intent.kind)
        if tool is None:
            if intent.kind not in missing:
                missing.append(intent.kind)
            continue
        arguments = json.dumps(bind_arguments(intent.args, tool), ensure_ascii=False)
        calls.append({
            "id": call_id(digest, len(calls), tool.name, arguments),
            "type": "function",
            "function": {"name": tool.name, "arguments": arguments},
        })
    return Draft(text=unavailable_text(missing, offered) if missing else "", tool_calls=calls)


def unavailable_text(kinds: list[str], offered: OfferedTools) -> str:
    names = ", ".join(f"`{kind}`" for kind in kinds)
    what = f"the {names} tool, but it is" if len(kinds) == 1 else f"the {names} tools, but they are"
    available = ", ".join(f"`{name}`" for name in offered.names())
    tail = f"Tools available here: {available}." if available else "No tools are available in this conversation."
    return f"I recognised a request for {what} not available in this conversation. {tail}"


# ---------------------------------------------------------------- recognising requests


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
    _rule(rf"add\s+(?P<rest>[^\n]+?)\s+to\s+(?:my\s+|the\s+|our\s+)?(?:todo|to-do|task)(?:\s+list|s)\b", _todo_add),
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


# ---------------------------------------------------------------- answering from tool results


_ERROR_TEXT = re.compile(
    r"^\s*(?:error(?:[:\s]|$)|\[error\]|no such |cannot |can't |could not |failed(?:[:\s]|$)|invalid |unknown |"
    r"not found\b|interrupted before running|permission denied|refus|absolute path |path is empty|command is empty|"
    r"action '\w+' needs|offset \d+ is past|\w*(?:Error|Exception)(?:[:\s]|$))"
    r"|\b(?:is a binary file|is a directory;|is a file, not a directory|escapes the workspace|outside the workspace|"
    r"contains a NUL byte|no todo item with id)",
    re.IGNORECASE,
)
_NUMBERED_LINE = re.compile(r"^\s*\d+\s*[|│]")
_SEARCH_HIT = re.compile(r"^[^\s:][^:\n]*:\d+:")
_EXIT_CODE = re.compile(r"exit code\s*[:=]?\s*(-?\d+)", re.IGNORECASE)


def answer_from_results(results: list[Message], calls: dict[str, dict]) -> str:
    """One short, grounded paragraph per tool result, in the order the results arrived."""
    sections = []
    for result in results:
        call = calls.get(result.get("tool_call_id"), {})
        function = call.get("function") or {}
        name = function.get("name") or "tool"
        try:
            args = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {}
        sections.append(describe_result(name, args if isinstance(args, dict) else {}, text_of(result)))
    return "\n\n".join(sections)


def describe_result(name: str, args: dict[str, Any], text: str) -> str:
    error = _error_text(text)
    if error is not None:
        return f"The `{name}` call failed: {error}"
    describe = _DESCRIBERS.get(kind_of_tool(name))
    answer = describe(args, text) if describe is not None else None
    return answer if answer is not None else _describe_generic(name, text)


def _error_text(text: str) -> str | None:
    """The error a result reports, or None when it reads as a success."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
    first = stripped.splitlines()[0] if stripped else ""
    if _ERROR_TEXT.search(first):
        return _clip_lines(stripped, 5)
    return None


def _arg(args: dict[str, Any], role: str, default: str = "") -> str:
    for name in (role, *ARGUMENT_ALIASES.get(role, ())):
        if isinstance(args.get(name), str) and args[name]:
            return args[name]
    return default


def _clip_lines(text: str, limit: int) -> str:
    lines = text.strip().splitlines()
    shown = "\n".join(lines[:limit])
    return shown if len(lines) <= limit else f"{shown}\n… ({len(lines) - limit} more lines)"


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else (plural or singular + 's')}"


def _fenced(lines: list[str]) -> str:
    return "```\n" + "\n".join(lines) + "\n```"


def _first_int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.IGNORECASE)
    return int(m.group(1)) if m else None


def _describe_read(args: dict[str, Any], text: str) -> str | None:
    path = _arg(args, "path", "the file")
    lines = text.splitlines()
    numbered = [line for line in lines if _NUMBERED_LINE.match(line)]
    if not numbered:
        return f"`{path}` is empty." if re.search(r"\bempty\b", text, re.IGNORECASE) else None
    header = "\n".join(line for line in lines if not _NUMBERED_LINE.match(line))
    total = _first_int(r"of\s+(\d+)\b", header) or _first_int(r"(\d+)\s+lines?\b", header) or len(numbered)
    shown = numbered[:10]
    lead = f"`{path}` has {_count(total, 'line')}."
    lead += f" The first {len(shown)}:" if len(shown) < total else " Here it is:"
    return f"{lead}\n{_fenced(shown)}"


def _describe_list(args: dict[str, Any], text: str) -> str | None:
    path = _arg(args, "path", ".")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and re.search(r"empty directory", lines[0], re.IGNORECASE):
        return f"`{path}` is an empty directory."
    header_count = _first_int(r":\s*(\d+)\s+entr(?:y|ies)\b", lines[0]) if lines else None
    entries = lines[1:] if header_count is not None else lines
    entries = [line for line in entries if not line.startswith("[")]
    total = header_count if header_count is not None else len(entries)
    shown = entries[:30]
    more = f"\n… and {total - len(shown)} more." if total > len(shown) else ""
    return f"`{path}` contains {_count(total, 'entry', 'entries')}:\n" + "\n".join(f"- {e}" for e in shown) + more


def _describe_search(args: dict[str, Any], text: str) -> str | None:
    pattern = _arg(args, "pattern", "the pattern")
    where = f" under `{_arg(args, 'path')}`" if _arg(args, "path") else ""
    hits = [line for line in text.splitlines() if _SEARCH_HIT.match(line)]
    if not hits:
        return f"No matches for `{pattern}`{where}." if re.search(r"\bno match", text, re.IGNORECASE) else None
    total = _first_int(r"(\d+)\s+match", text) or len(hits)
    files = len({hit.split(":", 1)[0] for hit in hits})
    shown = hits[:5]
    lead = f"Found {_count(total, 'match', 'matches')} for `{pattern}`{where}"
    lead += f" ({_count(files, 'file')} among the hits shown)." if total > len(hits) else f" in {_count(files, 'file')}."
    return f"{lead} First hits:\n" + "\n".join(f"- `{hit}`" for hit in shown)


def _describe_terminal(args: dict[str, Any], text: str) -> str | None:
    lines = text.strip().splitlines()
    code = _first_int(_EXIT_CODE.pattern, lines[0]) if lines else None
    if code is None:
        return None
    command = _arg(args, "command", "the command")
    outcome = "succeeded (exit code 0)" if code == 0 else f"failed with exit code {code}"
    if re.search(r"timed out", lines[0], re.IGNORECASE):
        outcome += " after timing out"
    output = [line for line in lines[1:] if line.strip() != "(no output)"]
    if not output:
        return f"The command `{command}` {outcome}. It printed nothing."
    tail = output[-12:]
    label = "Its output:" if len(tail) == len(output) else f"The last {len(tail)} of {len(output)} output lines:"
    return f"The command `{command}` {outcome}. {label}\n{_fenced(tail)}"


def _describe_write(args: dict[str, Any], text: str) -> str | None:
    first = text.strip().splitlines()[0] if text.strip() else "no details"
    return f"Done: `{_arg(args, 'path', 'the file')}` is written ({first})."


def _describe_todo(args: dict[str, Any], text: str) -> str | None:
    action = args.get("action")
    lead = {
        "add": f"Added {_count(len(args.get('items') or []), 'item')} to the todo list.",
        "update": f"Marked todo {args.get('id')} as {args.get('status')}.",
        "clear": "Cleared the todo list.",
    }.get(action if isinstance(action, str) else "", "Here is the todo list.")
    return f"{lead}\n{text.strip()}" if text.strip() else lead


def _describe_memory(args: dict[str, Any], text: str) -> str | None:
    content = _arg(args, "content")
    saved = f"Saved to memory: \u201c{content}\u201d." if content else "The memory tool finished."
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{saved} The memory tool replied: {first}" if first else saved


def _describe_generic(name: str, text: str) -> str:
    if not text.strip():
        return f"`{name}` finished without output."
    return f"`{name}` returned:\n{_fenced(_clip_lines(text, 15).splitlines())}"


_DESCRIBERS: dict[str, Callable[[dict[str, Any], str], str | None]] = {
    "read_file": _describe_read,
    "list_dir": _describe_list,
    "search_files": _describe_search,
    "terminal": _describe_terminal,
    "write_file": _describe_write,
    "todo": _describe_todo,
    "memory": _describe_memory,
}


# ---------------------------------------------------------------- summaries


_SUMMARY_ASK = re.compile(r"\bsummar(?:y|ies|i[sz]e|i[sz]ing|i[sz]ation)\b", re.IGNORECASE)
_BLOCK_LABEL = re.compile(
    r"^\s*(?:\[(?P<bracket>USER|ASSISTANT|TOOL(?:[ _](?:RESULT|CALL)S?)?|SYSTEM)\b[^\]\n]*\]|"
    r"(?P<plain>User|Assistant|Tool|System)\s*:)\s*:?\s*(?P<rest>.*)$"
)
_CALL_LINE = re.compile(r"^\s*(?:[-*]\s*)?(?:(?:tool\s*call|called|call)\s*:?\s*)?(?P<call>[A-Za-z_][\w.:-]*\(.*\))\s*$",
                        re.IGNORECASE)
_URL = re.compile(r"https?://[^\s)>\]\"'`]+")
_PATH = re.compile(
    r"(?<![\w/.:@-])(?:~?/)?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.:@-])[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}\b"
)
_IDENTIFIER = re.compile(
    r"#\d+\b|\b[A-Za-z]+[-_]?\d+[\w-]*\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b|\b\d+\.\d+\b|\b\d{3,}\b"
)
_ERROR_LINE = re.compile(r"\b(?:\w*error|\w*exception|traceback|failed|failure|fatal)\b", re.IGNORECASE)
_NOT_PATHS = frozenset({"e.g", "i.e", "etc"})
#: How many of each fact a filled template keeps.
_SUMMARY_LIMITS = {"ask_chars": 1400, "actions": 20, "action_chars": 200, "files": 12, "facts": 20, "errors": 5}


@dataclass
class _Block:
    role: str
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def template_headings(lines: list[str]) -> list[str]:
    """The headings of the template: the last run of distinct ``## `` lines, at most 3 other lines apart.

    The template closes the prompt's material, so earlier headings (a quoted
    file, the previous summary) are not taken for it; a heading seen twice
    marks where the previous summary ended and the template began.
    """
    headings: list[str] = []
    previous: int | None = None
    for index in reversed(range(len(lines))):
        if not lines[index].startswith("## "):
            continue
        heading = lines[index][3:].strip()
        if previous is not None and (previous - index - 1 > 3 or heading in headings):
            break
        if heading:
            headings.insert(0, heading)
        previous = index
    return headings


def _blocks(lines: list[str]) -> list[_Block]:
    """Labelled conversation blocks; a ``## `` line ends a block (what follows is template or old summary)."""
    blocks: list[_Block] = []
    current: _Block | None = None
    for line in lines:
        label = _BLOCK_LABEL.match(line)
        if label:
            word = (label.group("bracket") or label.group("plain")).lower()
            role = "assistant" if word.startswith("tool call") else "tool" if word.startswith("tool") else word
            current = _Block(role, [label.group("rest")] if label.group("rest") else [])
            blocks.append(current)
        elif line.startswith("## "):
            current = None
        elif current is not None:
            current.lines.append(line)
    return blocks


def _unique(items: list[str], limit: int) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
        if len(seen) == limit:
            break
    return seen


def _summary_facts(blocks: list[_Block]) -> dict[str, list[str]]:
    """Everything the template draws on, extracted from the labelled conversation blocks."""
    limits = _SUMMARY_LIMITS
    text = "\n".join(block.text for block in blocks)
    without_urls = _URL.sub(" ", text)
    asks = [re.sub(r"\s+", " ", block.text) for block in blocks if block.role == "user" and block.text]
    actions = [
        m.group("call")[: limits["action_chars"]]
        for block in blocks if block.role == "assistant"
        for m in map(_CALL_LINE.match, block.lines) if m
    ]
    paths = [p for p in _PATH.findall(without_urls) if p.lower() not in _NOT_PATHS and not p.replace(".", "").isdigit()]
    facts = _URL.findall(text) + _IDENTIFIER.findall(without_urls)
    errors = [line.strip() for block in blocks for line in block.lines if _ERROR_LINE.search(line)]
    return {
        "ask": [asks[0][: limits["ask_chars"]]] if asks else [],
        "actions": _unique(actions, limits["actions"]),
        "files": _unique(paths, limits["files"]),
        "facts": _unique(facts, limits["facts"]),
        "errors": _unique(errors, limits["errors"]),
    }


#: Heading keywords → how that section is filled from the facts; other sections get "None.".
_SECTION_FILLERS: tuple[tuple[tuple[str, ...], Callable[[dict[str, list[str]]], str]], ...] = (
    (("task", "goal"), lambda f: f"\u201c{f['ask'][0]}\u201d" if f["ask"] else ""),
    (("completed", "action"), lambda f: "\n".join(f"{i}. {call}" for i, call in enumerate(f["actions"], 1))),
    (("file",), lambda f: "\n".join(f"- {path}" for path in f["files"])),
    (("critical", "context"), lambda f: "\n".join(f"- {fact}" for fact in f["facts"])),
    (("blocked", "error"), lambda f: "\n".join(f"- {line}" for line in f["errors"])),
)


def fill_summary_template(request: str) -> str | None:
    """Fill the ``## `` template of a summary request, or None when this is no such request."""
    if not _SUMMARY_ASK.search(request):
        return None
    lines = request.splitlines()
    headings = template_headings(lines)
    if len(headings) < 2:
        return None
    facts = _summary_facts(_blocks(lines))
    sections = []
    for heading in headings:
        lowered = heading.lower()
        body = next((fill(facts) for keys, fill in _SECTION_FILLERS if any(key in lowered for key in keys)), "")
        sections.append(f"## {heading}\n{body or 'None.'}")
    return "\n\n".join(sections)


# ---------------------------------------------------------------- text answers


_IDENTITY_ASK = re.compile(
    r"\b(?:who|what)\s+are\s+you\b|\bwhat\s+can\s+you\s+do\b|\bintroduce\s+yourself\b|\bwhat\s+(?:model|llm)\b|"
    r"\bare\s+you\s+(?:an?\s+)?(?:llm|language\s+model|ai|bot|real|human|gpt)\b|^\s*/?help\s*[?!.]*\s*$",
    re.IGNORECASE,
)
_RECHECK_ASK = re.compile(r"\b(?:check|verify|review|double-check)\s+(?:your|the)\s+(?:answer|reply|response)\b",
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
