"""Repairs of message text and of outgoing requests, as pure functions on message dicts.

* Encoding: lone UTF-16 surrogates cannot be encoded as UTF-8, so one in the
  history makes every later request fail before it is sent. Halves that
  arrived separately (a stream split inside an emoji) are joined back into
  their character; what stays alone becomes U+FFFD.
* Images in tool results, for providers that accept images only from users.
* Replayed reasoning blocks, for providers that reject them once edited.

Tool calls with arguments that are not JSON are only detected here: the cure
is to ask the model again before any tool runs.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core.messages import has_surrogates, parse_tool_arguments, repair_tool_arguments, strip_surrogates, tool_calls_of

Message = dict[str, Any]

IMAGE_REMOVED = "[image removed: this provider does not accept images in tool results]"
#: Assistant fields that carry a provider's replayed reasoning.
REASONING_FIELDS = ("reasoning_details", "reasoning_content", "reasoning")


def repair_surrogates(text: str) -> str:
    """Join surrogate halves into their character; replace the ones left alone with U+FFFD."""
    if not has_surrogates(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_message_encoding(message: Message) -> Message | None:
    """A copy of ``message`` with its text repaired, or None when nothing needed repair.

    Nearly every reply is clean, so it is checked first and copied only when it is not.
    """
    if not _needs_repair(message):
        return None
    changed = False

    def fix(text: Any) -> Any:
        nonlocal changed
        if isinstance(text, str) and has_surrogates(text):
            changed = True
            return repair_surrogates(text)
        return text

    fixed = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        fixed["content"] = [{**part, "text": fix(part["text"])} if isinstance(part, dict) and "text" in part else part
                            for part in content]
    else:
        fixed["content"] = fix(content)
    if message.get("tool_calls"):
        fixed["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": fix(call["function"].get("arguments"))}}
            if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
            for call in message["tool_calls"]
        ]
    return fixed if changed else None


def _needs_repair(message: Message) -> bool:
    """Whether a text field that ``repair_message_encoding`` repairs holds a lone surrogate.

    Runs on every reply, so it is a plain walk; ``has_surrogates`` rules out an
    ASCII text (nearly all) by one C call.
    """
    content = message.get("content")
    if type(content) is list:
        if any(_surrogates_in(part["text"]) for part in content if isinstance(part, dict) and "text" in part):
            return True
    elif _surrogates_in(content):
        return True
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and _surrogates_in(function.get("arguments")):
            return True
    return False


def _surrogates_in(text: Any) -> bool:
    """Whether ``text`` is a str holding a lone surrogate."""
    return isinstance(text, str) and has_surrogates(text)


def strip_tool_images(messages: Iterable[Message]) -> list[Message]:
    """Tool results with their image parts replaced by a short note."""
    out = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, list) and any(_is_image(p) for p in content):
            message = {**message, "content": [{"type": "text", "text": IMAGE_REMOVED} if _is_image(part) else part
                                              for part in content]}
        out.append(message)
    return out


def drop_reasoning(messages: Iterable[Message]) -> list[Message]:
    """Assistant messages without their replayed reasoning fields."""
    return [{k: v for k, v in m.items() if k not in REASONING_FIELDS} if m.get("role") == "assistant" else m
            for m in messages]


#: Outgoing repairs by name, as the fault classes name them.
REQUEST_REPAIRS = {"strip_images": strip_tool_images, "drop_reasoning": drop_reasoning}


def repaired_request(messages: list[Message], repairs: Iterable[str]) -> list[Message]:
    """``messages`` as a provider that needs ``repairs`` must receive them (the history is left alone)."""
    if not repairs:  # every call asks; nearly every provider needs none
        return messages
    for name in sorted(repairs):
        messages = REQUEST_REPAIRS[name](messages)
    return messages


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def read_tool_arguments(message: Message) -> list[dict[str, Any] | ValueError]:
    """Each tool call's arguments parsed, or the ValueError saying why they do not parse, in call order.

    Parsed once per reply, so the malformed check, the history copy and the
    tools all read the same result.
    """
    parsed: list[dict[str, Any] | ValueError] = []
    for call in tool_calls_of(message):
        try:
            parsed.append(parse_tool_arguments((call.get("function") or {}).get("arguments")))
        except ValueError as exc:
            parsed.append(exc)
    return parsed


def malformed_tool_calls(message: Message, arguments: list[dict[str, Any] | ValueError] | None = None) -> list[str]:
    """Ids of the tool calls whose arguments are not a JSON object.

    ``arguments`` is ``read_tool_arguments(message)`` when the caller already has it.
    """
    if arguments is None:
        arguments = read_tool_arguments(message)
    return [call.get("id", "") for call, parsed in zip(tool_calls_of(message), arguments, strict=True)
            if isinstance(parsed, ValueError)]


def history_copy(message: Message, arguments: list[dict[str, Any] | ValueError] | None = None) -> Message:
    """The assistant message as it enters history: text fixed, arguments valid JSON.

    ``arguments`` is ``read_tool_arguments(message)`` when already known:
    arguments that parsed are kept as sent, and only broken ones are repaired.
    """
    text = message.get("content") or ""
    clean: Message = {"role": "assistant",
                      "content": strip_surrogates(text)}
    calls = tool_calls_of(message)
    if calls:
        if arguments is None:
            arguments = read_tool_arguments(message)
        clean["tool_calls"] = [
            {"id": call.get("id", ""), "type": "function",
             "function": {"name": (call.get("function") or {}).get("name", ""),
                          "arguments": _history_arguments((call.get("function") or {}).get("arguments"), parsed)}}
            for call, parsed in zip(calls, arguments, strict=True)
        ]
    return clean


def _history_arguments(raw: str | None, parsed: dict[str, Any] | ValueError) -> str:
    """``repair_tool_arguments(raw)`` given the parse of ``raw``: text that parsed needs no second parse."""
    if isinstance(parsed, ValueError):
        return repair_tool_arguments(raw)
    return raw if raw and raw.strip() else "{}"
