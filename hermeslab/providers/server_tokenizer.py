"""The server's own token count of a call, for servers that answer without usage.

llama.cpp-family servers ignore ``stream_options.include_usage``, and our own
count of the request includes tool schemas and system text that their chat
templates may never send to the model. Where the server offers its tokenizer,
one call's figures are asked of it instead: llama.cpp's ``llama-server``
templates the messages itself (``POST /apply-template``) and counts the result
(``POST /tokenize``); llama-cpp-python's server only counts text
(``POST /extras/tokenize/count``), so it gets the messages' text without any
template markers. Both live at the server's root, not under ``/v1``.

Asking never fails a call: any trouble gives None and the caller keeps its
estimate. A route the server does not have (404, 405, 501) or keeps from us
(401, 403) is remembered and never asked again.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import httpx2

from ..core.messages import text_of, tool_calls_of
from ..core.provider import SERVER_TEMPLATE, SERVER_TOKENIZER, ChatResponse, Usage

#: Seconds one tokenizer request may take; a slow answer is not worth holding up the turn.
TOKENIZE_TIMEOUT_SECONDS = 2.0
#: Statuses that say the route does not exist at this server, or is not ours to use.
MISSING_ROUTE = frozenset({401, 403, 404, 405, 501})

Message = dict[str, Any]


class RouteMissing(Exception):
    """The server has no such route."""


class ServerTokenizer:
    """Counts a call's prompt and reply with the server's tokenizer, by whichever dialect it speaks."""

    def __init__(self, root: str, api_key: str | None, *, timeout: float = TOKENIZE_TIMEOUT_SECONDS):
        self.root = root.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx2.Client(timeout=timeout, headers=headers)
        #: Dialects still worth trying, best first; one found missing is dropped for good.
        self.dialects: list[str] = ["llama-server", "llama-cpp-python"]

    @property
    def available(self) -> bool:
        return bool(self.dialects)

    def usage(self, chat: Mapping[str, Any], response: ChatResponse,
              reported: Usage | None) -> tuple[Usage, str] | None:
        """The call's usage as the server counts it and its source, or None when the server cannot say.

        ``chat`` is the chat-completions body as sent: its messages, and the tools and tool choice
        that decide whether the template carries the tool schemas.
        """
        messages = chat.get("messages") or []
        for dialect in list(self.dialects):
            try:
                if dialect == "llama-server":
                    prompt = self._tokens(self._post("/apply-template", template_body(chat))["prompt"])
                    count, source = partial(self._tokens, add_special=False), SERVER_TEMPLATE
                else:
                    count, source = self._count, SERVER_TOKENIZER
                    prompt = count(messages_text(messages))
                return _usage(prompt, response, reported, count), source
            except RouteMissing:  # rebound, not edited in place: another thread may be reading the list
                self.dialects = [known for known in self.dialects if known != dialect]
            except (httpx2.HTTPError, KeyError, TypeError, ValueError):
                return None
        return None

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._http.post(self.root + path, json=body)
        if answer.status_code in MISSING_ROUTE:
            raise RouteMissing(path)
        answer.raise_for_status()
        data = answer.json()
        if not isinstance(data, dict):
            raise ValueError(f"{path} answered {type(data).__name__}, not an object")
        return data

    def _tokens(self, text: str, *, add_special: bool = True) -> int:
        """llama-server's count; ``add_special`` adds the BOS a prompt gets (a reply gets none)."""
        if not isinstance(text, str):
            raise TypeError("the templated prompt is not text")
        tokens = self._post("/tokenize", {"content": text, "add_special": add_special})["tokens"]
        if not isinstance(tokens, list):
            raise TypeError("/tokenize gave no token list")
        return len(tokens)

    def _count(self, text: str) -> int:
        count = self._post("/extras/tokenize/count", {"input": text})["count"]
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise TypeError("/extras/tokenize/count gave no count")
        return count


def template_body(chat: Mapping[str, Any]) -> dict[str, Any]:
    """What of a chat body the template reads: the messages, and the tools with their tool choice."""
    return {key: chat[key] for key in ("messages", "tools", "tool_choice") if key in chat}


def messages_text(messages: Sequence[Message]) -> str:
    """What a template keeps of every message whatever its markers: the texts and tool-call arguments, in order."""
    parts: list[str] = []
    for message in messages:
        parts.append(text_of(message))
        parts += [json.dumps(call.get("function") or {}, ensure_ascii=False) for call in tool_calls_of(message)]
    return "\n".join(part for part in parts if part)


def reply_text(response: ChatResponse) -> str:
    """The reply's visible text and tool-call arguments, as the model generated them."""
    arguments = [(call.get("function") or {}).get("arguments") or "" for call in tool_calls_of(response.message)]
    return "".join([text_of(response.message), *arguments])


def _usage(prompt: int, response: ChatResponse, reported: Usage | None, count: Callable[[str], int]) -> Usage:
    """The server's prompt count; its reply count unless the server reported one; reasoning counted likewise."""
    reasoning_text = response.reasoning or ""
    reasoning = count(reasoning_text) if reasoning_text else 0
    if reported is not None and reported.completion_tokens > 0:
        completion = reported.completion_tokens
    else:
        text = reply_text(response)
        completion = (count(text) if text else 0) + reasoning
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 cache_read_tokens=reported.cache_read_tokens if reported else 0,
                 cache_write_tokens=reported.cache_write_tokens if reported else 0,
                 reasoning_tokens=reported.reasoning_tokens if reported and reported.reasoning_tokens else reasoning)
