"""Another agent's turns, brought into the recorded-session shape one event at a time.

Agents log a turn as text, tool calls and tool results in their own order and
encodings; the recorded-session format wants string content, calls attached
to an assistant message, and each call answered once by a ``tool`` message.
`Transcript` does the attaching, and `finished` checks the result with the
format's own validator, so a conversation is taken whole or skipped whole
with the first reason — never written half right.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from hermeslab.core.messages import Message
from hermeslab.recordings import Recording, recorded_text, validate_recording

from .base import Skip


#: Responses API items that are no turn of the conversation: the model's private notes, hosted tools' own
#: records (their results never come back as items), and compaction artefacts.
IGNORED_ITEMS = ("reasoning", "web_search_call", "image_generation_call", "compaction", "compaction_summary",
                 "ghost_snapshot")
#: Content-part types that carry text, across the chat, Responses and Anthropic APIs.
TEXT_PARTS = ("text", "input_text", "output_text")


def content_text(content: Any) -> str:
    """Content as one string: text parts of any API joined by newlines, other parts (images) left out."""
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and part.get("type") in TEXT_PARTS
                         and isinstance(part.get("text"), str))
    return recorded_text(content)


def arguments_json(arguments: Any) -> str:
    """Tool-call arguments as the JSON object string the format wants.

    A dict is encoded; a string that already encodes an object is kept; any
    other value (a free-form patch, a bare command) becomes ``{"input": value}``.
    """
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    if isinstance(arguments, str):
        try:
            if isinstance(json.loads(arguments), dict):
                return arguments
        except json.JSONDecodeError:
            pass
    return json.dumps({"input": arguments}, ensure_ascii=False)


@dataclass
class Transcript:
    """Messages built from events: text turns, tool calls joined to the assistant turn they belong to, results."""

    messages: list[Message] = field(default_factory=list)

    def say(self, role: str, content: Any) -> None:
        """A turn of text (content parts are joined into text, null becomes "")."""
        self.messages.append({"role": role, "content": content_text(content)})

    def call(self, call_id: str, name: str, arguments: Any) -> None:
        """A tool call, added to the assistant turn just before it, or to a new one."""
        entry = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_json(arguments)}}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(entry)
        else:
            self.messages.append({"role": "assistant", "content": "", "tool_calls": [entry]})

    def answer(self, call_id: str, content: Any) -> None:
        """The result of the call ``call_id``."""
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content_text(content)})

    def response_item(self, item: dict[str, Any]) -> bool:
        """One OpenAI Responses API item (message, function or custom tool call, its output); False if not one.

        Items in `IGNORED_ITEMS` are left out: they are not turns of the
        conversation a replay sends.
        """
        kind = item.get("type")
        if kind == "message" and item.get("role") in ("system", "developer", "user", "assistant"):
            self.say("system" if item["role"] == "developer" else item["role"], item.get("content"))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            arguments = item.get("arguments", item.get("input", item.get("action")))
            self.call(str(item.get("call_id") or item.get("id") or ""), str(item.get("name") or "shell"), arguments)
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            self.answer(str(item.get("call_id") or ""), _output_text(item.get("output")))
        elif kind not in IGNORED_ITEMS:
            return False
        return True


def _output_text(output: Any) -> Any:
    """A tool output as text: Codex wraps some as ``{"output": ..., "metadata": ...}``, as an object or its JSON."""
    if isinstance(output, str) and output.startswith("{") and '"output"' in output:
        try:
            output = json.loads(output)
        except json.JSONDecodeError:
            return output
    if isinstance(output, dict) and "output" in output:
        return output["output"]
    return output


def without_unanswered_calls(messages: list[Message]) -> tuple[list[Message], int]:
    """``messages`` without the tool calls no ``tool`` message answers, and how many there were.

    A session stopped while a tool ran (the user interrupted it, the agent
    crashed, the log was copied mid-turn) ends on calls whose results were never
    logged; a replay has nothing to give back for them. The call goes, the
    reply's text stays, and a reply left with neither is dropped.
    """
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    kept: list[Message] = []
    dropped = 0
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not isinstance(calls, list):
            kept.append(message)
            continue
        answered_calls = [c for c in calls if not isinstance(c, dict) or c.get("id") in answered]
        dropped += len(calls) - len(answered_calls)
        if len(answered_calls) == len(calls):
            kept.append(message)
        elif answered_calls:
            kept.append({**message, "tool_calls": answered_calls})
        elif message.get("content"):
            kept.append({key: value for key, value in message.items() if key != "tool_calls"})
    return kept, dropped


def finished(recording: Recording, where: str) -> Recording | Skip:
    """The recording when the format accepts it, else a Skip naming its first problem and how many more.

    Tool calls never answered are left out first (``without_unanswered_calls``) and counted in
    ``meta["left_out"]["unanswered_calls"]``.
    """
    messages, unanswered = without_unanswered_calls(recording.messages)
    if unanswered:
        left_out = {**recording.meta.get("left_out", {})}
        left_out["unanswered_calls"] = left_out.get("unanswered_calls", 0) + unanswered
        recording = dataclasses.replace(recording, messages=messages, meta={**recording.meta, "left_out": left_out})
    if not recording.messages:
        return Skip(where, "no messages in this conversation")
    problems = validate_recording(recording.to_dict())
    if not problems:
        return recording
    first = problems[0]
    at = f"message {first.message_index}: " if first.message_index is not None else ""
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return Skip(where, f"{at}{first.reason}{more}")
