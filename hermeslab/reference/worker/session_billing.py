"""Prompt tokens as hermeslab's replay provider bills them, counted inside the Hermes worker.

Hermes's virtualenv has no tokenizer, and a session replay needs the billed
count of every request at the moment it is sent (it is the usage the
provider reports, which Hermes's triggers read). hermeslab counts with
bpe-openai's compiled tokenizer; its extension module depends on nothing but
the CPython ABI, so the worker loads that one file by path (the client sends
the path) and applies hermeslab's counting rule to each message:

* 3 framing tokens per message, plus its text (text parts of list content,
  765 per image part, other parts as their JSON), its ``name`` (+1) and its
  ``tool_call_id``, and 3 + name + arguments per tool call;
* 3 tokens priming the reply, plus the tool schemas as sorted, unescaped JSON.

The client checks the loaded counter on probe texts before any replay, and
``tests/test_session_parity.py`` checks whole requests against hermeslab's
own count, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from typing import Callable

FRAMING = 3
PRIMING = 3
IMAGE = 765


def load_text_counter(bindings_path: str, encoding: str) -> Callable[[str], int]:
    """bpe-openai's counter for ``encoding``, loaded from its compiled module at ``bindings_path``."""
    name = "bpe_openai._bindings"
    module = sys.modules.get(name)
    if module is None:
        loader = importlib.machinery.ExtensionFileLoader(name, bindings_path)
        spec = importlib.util.spec_from_file_location(name, bindings_path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[name] = module
    count = module.tokenizer_for_encoding(encoding).count

    def text_tokens(text: str) -> int:
        if not text:
            return 0
        try:
            return count(text)
        except UnicodeEncodeError:
            return count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    return text_tokens


class RequestBill:
    """Billed prompt tokens of a request (messages as sent, system message included, and the tools)."""

    def __init__(self, text_tokens: Callable[[str], int]):
        self.text = text_tokens
        self._messages: dict[tuple, int] = {}
        self._tools: dict[str, int] = {}

    def message(self, message: dict) -> int:
        content = message.get("content")
        content_key = content if content is None or isinstance(content, str) else json.dumps(
            content, sort_keys=True, ensure_ascii=False, default=str)
        calls = tuple(((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                      for c in message.get("tool_calls") or ())
        key = (content_key, message.get("name"), message.get("tool_call_id"), calls)
        tokens = self._messages.get(key)
        if tokens is None:
            tokens = self._message_uncached(message)
            if len(self._messages) > 200_000:
                self._messages.clear()
            self._messages[key] = tokens
        return tokens

    def _message_uncached(self, message: dict) -> int:
        tokens = FRAMING
        content = message.get("content")
        if isinstance(content, str):
            tokens += self.text(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                kind = part.get("type")
                if kind == "text":
                    tokens += self.text(part.get("text", ""))
                elif kind == "image_url":
                    tokens += IMAGE
                else:
                    tokens += self.text(json.dumps(part, ensure_ascii=False, default=str))
        if message.get("name"):
            tokens += self.text(message["name"]) + 1
        if message.get("tool_call_id"):
            tokens += self.text(message["tool_call_id"])
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            tokens += 3 + self.text(function.get("name", "")) + self.text(function.get("arguments", ""))
        return tokens

    def tools(self, tools: list[dict] | None) -> int:
        if not tools:
            return 0
        text = json.dumps(list(tools), sort_keys=True, ensure_ascii=False)
        tokens = self._tools.get(text)
        if tokens is None:
            tokens = self._tools[text] = self.text(text)
        return tokens

    def request(self, messages: list[dict], tools: list[dict] | None) -> int:
        return sum(self.message(m) for m in messages) + PRIMING + self.tools(tools)
