"""The local server's chat template and tokenizer routes, for personalities whose servers offer them.

A llama.cpp-family server turns the messages into one prompt with its chat
template before its model reads them, and offers its tokenizer over HTTP:
``llama-server`` renders a chat body (``POST /apply-template``) and counts
text (``POST /tokenize``); llama-cpp-python's server counts text
(``POST /extras/tokenize``, ``POST /extras/tokenize/count``). The template here
is ChatML-shaped and renders the request as the personality's model gets it,
so whatever the personality drops (tool schemas its tool choice switches off)
is missing from the prompt, as it is from a real server's.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..core.messages import text_of, tool_calls_of
from ..core.tokens import encoding
from .personalities import Personality, Refusal, effective_payload

#: Routes of each tokenizer dialect, at the server's root.
ROUTES = {
    "llama-server": ("/apply-template", "/tokenize"),
    "llama-cpp-python": ("/extras/tokenize", "/extras/tokenize/count"),
}


def templated_prompt(personality: Personality, payload: Mapping[str, Any]) -> str:
    """The one text the personality's model reads for a chat body, ready for the assistant's answer."""
    request = effective_payload(personality, payload)
    messages = list(request.get("messages") or [])
    tools = request.get("tools") or []
    blocks: list[str] = []
    if tools:
        schemas = "\n".join(json.dumps(tool, ensure_ascii=False, sort_keys=True) for tool in tools)
        offer = f"You may call these tools:\n<tools>\n{schemas}\n</tools>"
        if messages and messages[0].get("role") == "system":
            first, messages = messages[0], messages[1:]
            blocks.append(_block("system", f"{text_of(first)}\n\n{offer}"))
        else:
            blocks.append(_block("system", offer))
    for message in messages:
        text = text_of(message)
        calls = [f"<tool_call>\n{json.dumps(call.get('function') or {}, ensure_ascii=False)}\n</tool_call>"
                 for call in tool_calls_of(message)]
        blocks.append(_block(str(message.get("role") or "user"), "\n".join(part for part in (text, *calls) if part)))
    return "".join(blocks) + "<|im_start|>assistant\n"


def _block(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def token_ids(text: str) -> list[int]:
    """The offline model's tokens of ``text`` (its markers read as plain text, as it reads them everywhere)."""
    return encoding().encode(text, disallowed_special=()) if text else []


def tokenizer_reply(personality: Personality, path: str, payload: Mapping[str, Any]) -> Refusal | None:
    """The answer of one tokenizer route as (status, body); None when this server has no such route."""
    if path not in ROUTES.get(personality.tokenizer or "", ()):
        return None
    if path == "/apply-template":
        if not isinstance(payload.get("messages"), list) or not payload["messages"]:
            return 400, _error("'messages' must be a non-empty list of chat messages")
        return 200, {"prompt": templated_prompt(personality, payload)}
    field = "content" if path == "/tokenize" else "input"
    text = payload.get(field)
    if not isinstance(text, str):
        return 400, _error(f"'{field}' must be a string")
    tokens = token_ids(text)
    return 200, ({"count": len(tokens)} if path.endswith("/count") else {"tokens": tokens})


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": 400}}
