"""Phase 4: head + handoff summary + tail, made sendable.

The summary's role is picked so that it never sits between two messages of
the same role when that can be avoided (user after a system, assistant or tool
head end; flipped when the tail starts with the same role); when neither role
fits, the summary is merged into the first tail message, *ahead* of that
message's own content, so the summary's closing line still points at the
message the model must answer (``merged_summary_last``: behind it, under a
header, as Hermes merges).

Tool pairs are then repaired. Results whose call was summarised are removed.
Calls whose results were summarised are answered with a stub that points at
the summary (``missing_results="stub"``, the seed): the model keeps seeing
what it did, and the provider sees a complete pair. Hermes removes such calls
instead (``"drop"``).
"""

from __future__ import annotations

from typing import Any, Sequence

from hermeslab.core.config import CompressionConfig
from hermeslab.core.messages import text_of
from hermeslab.core.rough import is_image_part

from .hermes_texts import HermesTexts, texts_for
from .turns import has_tool_calls
from .types import (LEGACY_SUMMARY_PREFIX, LONG_SUMMARY_END_MARKER, LONG_SUMMARY_PREFIX, MERGED_OWN_DELIMITER,
                    MERGED_OWN_HEADER, SUMMARY_END_MARKER, SUMMARY_PREFIX, is_summary_message, merged_frames,
                    summary_frames)

MISSING_RESULT_STUB = "[result not kept: this call and its outcome are covered by the handoff summary]"
REMOVED_CALL_TEXT = "[tool call removed: it is covered by the handoff summary]"
SYSTEM_NOTE = (
    "Note: earlier turns of this conversation were condensed into a handoff summary. "
    "Build on it rather than redoing finished work; memory files remain authoritative."
)
IMAGE_STUB = "[image omitted: an earlier image, superseded by a newer one]"
_SYSTEM_ROLES = ("system", "developer")


def summary_text(body: str, *, long_frame: bool = False, texts: HermesTexts | None = None) -> str:
    """The full text of a handoff summary around ``body`` (``long_frame``: the hermes-0.19 opening and close;
    ``texts``: Hermes's own)."""
    if texts is not None:
        return f"{texts.summary_prefix}\n{body}\n\n{texts.end_marker}"
    if long_frame:
        return f"{LONG_SUMMARY_PREFIX}\n{body}\n\n{LONG_SUMMARY_END_MARKER}"
    return f"{SUMMARY_PREFIX}\n{body}\n\n{SUMMARY_END_MARKER}"


def _split_own_first(content: Any) -> tuple[str, Any] | None:
    """(summary text, own content or None) of a summary merged behind a message's own text; None otherwise."""
    for header, delimiter in merged_frames():
        opening = f"{header}\n"
        closing = f"\n\n{delimiter}\n\n"
        if isinstance(content, str) and content.startswith(opening) and (cut := content.find(closing)) >= 0:
            return content[cut + len(closing):], content[len(opening):cut] or None
        if (isinstance(content, list) and len(content) >= 2 and content[0] == {"type": "text", "text": opening}
                and isinstance(content[-1], dict) and str(content[-1].get("text", "")).startswith(closing)):
            return content[-1]["text"][len(closing):], content[1:-1] or None
    return None


def split_summary(message: dict[str, Any]) -> tuple[str, Any]:
    """(summary body, the message's own content or None) of a summary message."""
    content = message.get("content")
    own_first = _split_own_first(content)
    if own_first is not None:
        body, _ = split_summary({"content": own_first[0]})
        return body, own_first[1]
    parts = content if isinstance(content, list) else None
    text = content if isinstance(content, str) else (text_of({"content": parts[:1]}) if parts else "")
    if text.startswith(LEGACY_SUMMARY_PREFIX):
        return text[len(LEGACY_SUMMARY_PREFIX):].strip(), None
    frame = next(((prefix, end) for prefix, end in summary_frames() if text.startswith(prefix)), None)
    if frame is None:
        return text.strip(), None
    prefix, end_marker = frame
    inner = text[len(prefix):]
    marker = inner.find(end_marker)
    if marker < 0:
        return inner.strip(), None
    body = inner[:marker].strip()
    if parts is not None:
        return body, (parts[1:] or None)
    rest = inner[marker + len(end_marker):]
    return body, (rest[2:] if rest.startswith("\n\n") else rest) or None


def choose_summary_role(head: Sequence[dict], tail: Sequence[dict]) -> tuple[str | None, str]:
    """(role, why) for the summary message; role None means: merge into the first tail message."""
    last_head = head[-1].get("role") if head else "user"
    first_tail = tail[0].get("role") if tail else "user"
    forced = last_head in _SYSTEM_ROLES or not any(m.get("role") == "user" for m in (*head, *tail))
    role = "user" if forced or last_head in ("assistant", "tool") else "assistant"
    if tail and role == first_tail:
        flipped = "assistant" if role == "user" else "user"
        if forced or flipped == last_head:
            return None, "merged: neither role fits between the head and the tail"
        return flipped, f"{flipped}: flipped to differ from the first tail message"
    return role, f"{role}: {'forced (a user turn is required here)' if forced else 'follows the ' + str(last_head)}"


def merge_summary(message: dict[str, Any], text: str, *, own_first: bool = False,
                  texts: HermesTexts | None = None) -> dict[str, Any]:
    """A copy of ``message`` with the summary text placed before its own content (``own_first``: after it,
    the own content under a header and closed by a line of its own, Hermes's own with ``texts``)."""
    content = message.get("content")
    if own_first:
        header, delimiter = ((texts.merged_header, texts.merged_delimiter) if texts is not None
                             else (MERGED_OWN_HEADER, MERGED_OWN_DELIMITER))
        closing = f"\n\n{delimiter}\n\n{text}"
        wrapped: Any = ([{"type": "text", "text": f"{header}\n"}, *content, {"type": "text", "text": closing}]
                        if isinstance(content, list) else f"{header}\n{content or ''}{closing}")
        return {**message, "content": wrapped, "_compressed_summary": True}
    if isinstance(content, list):
        merged: Any = [{"type": "text", "text": text}, *content]
    elif content:
        merged = f"{text}\n\n{content}"
    else:
        merged = text
    return {**message, "content": merged, "_compressed_summary": True}


def call_id_of(call: dict) -> str:
    """The id a result names its call by: ``call_id`` where a call carries one (Responses-style calls carry
    both an item ``id`` and a ``call_id``), else ``id``."""
    return call.get("call_id") or call.get("id") or ""


def _answered_call(pending: list[dict], result_id: Any) -> dict | None:
    """The pending call a result with ``result_id`` answers: one whose ``id`` or ``call_id`` it names."""
    if not result_id:
        return None
    return next((call for call in pending if result_id in (call.get("id"), call.get("call_id"))), None)


def sanitize_tool_pairs(messages: Sequence[dict], *, missing: str = "stub",
                        removed_call_text: str = REMOVED_CALL_TEXT) -> tuple[list[dict], dict]:
    """Pair every tool call with exactly one result that directly follows its group.

    A result answers a call whose ``id`` or ``call_id`` it names. Orphan results
    are removed; unanswered calls are stubbed or dropped (``missing``; an
    assistant message left with neither calls nor text says ``removed_call_text``).
    Running it again on its own output changes nothing.
    """
    if missing not in ("stub", "drop"):
        raise ValueError(f"missing must be 'stub' or 'drop', got {missing!r}")
    out: list[dict] = []
    removed: list[int] = []
    unanswered: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.get("role") == "tool":
            removed.append(index - 1)
            continue
        if not has_tool_calls(message):
            out.append(message)
            continue
        pending = list(message["tool_calls"])
        results = []
        while index < len(messages) and messages[index].get("role") == "tool":
            result = messages[index]
            answered = _answered_call(pending, result.get("tool_call_id"))
            if answered is not None:
                pending.remove(answered)
                results.append(result)
            else:
                removed.append(index)
            index += 1
        unanswered += [call_id_of(call) for call in pending]
        if pending and missing == "stub":
            results += [{"role": "tool", "tool_call_id": call_id_of(call), "content": MISSING_RESULT_STUB}
                        for call in pending]
        elif pending:
            kept = [call for call in message["tool_calls"] if not any(call is p for p in pending)]
            message = {key: value for key, value in message.items() if key != "tool_calls"}
            if kept:
                message["tool_calls"] = kept
            elif not text_of(message).strip():
                message["content"] = removed_call_text
        out.append(message)
        out.extend(results)
    return out, {"removed_orphan_results": removed, "unanswered_calls": unanswered, "mode": missing}


def strip_historical_media(messages: Sequence[dict], stub: str = IMAGE_STUB) -> tuple[list[dict], int]:
    """Replace images before the newest image-bearing user message with ``stub``; returns (messages, images
    replaced)."""
    anchor = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"
                   and isinstance(messages[i].get("content"), list)
                   and any(is_image_part(p) for p in messages[i]["content"])), None)
    if anchor is None:
        return list(messages), 0
    out = list(messages)
    replaced = 0
    for index in range(anchor):
        content = out[index].get("content")
        if isinstance(content, list) and any(is_image_part(p) for p in content):
            replaced += sum(1 for p in content if is_image_part(p))
            parts = [{"type": "text", "text": stub} if is_image_part(p) else p for p in content]
            out[index] = {**out[index], "content": parts}
    return out, replaced


def _with_system_note(head: list[dict]) -> bool:
    if not head or head[0].get("role") != "system" or not isinstance(head[0].get("content"), str):
        return False
    if SYSTEM_NOTE in head[0]["content"]:
        return False
    head[0] = {**head[0], "content": f"{head[0]['content']}\n\n{SYSTEM_NOTE}"}
    return True


def assemble(head: Sequence[dict], body: str, tail: Sequence[dict], *,
             cfg: CompressionConfig) -> tuple[list[dict], dict]:
    """The compressed conversation and a record of how it was put together.

    A message the assembly changes is a new dict; the others pass through as
    they are (no phase edits a message in place), so their sizes stay known.
    """
    head = list(head)
    tail = list(tail)
    noted = _with_system_note(head) if cfg.system_note else False
    role, why = choose_summary_role(head, tail)
    texts = texts_for(cfg)
    text = summary_text(body, long_frame=cfg.long_summary_frame, texts=texts)
    if role is None:
        tail[0] = merge_summary(tail[0], text, own_first=cfg.merged_summary_last, texts=texts)
        out = head + tail
    else:
        out = head + [{"role": role, "content": text, "_compressed_summary": True}] + tail
    out, pairs = sanitize_tool_pairs(out, missing=cfg.missing_results,
                                     removed_call_text=texts.removed_call if texts else REMOVED_CALL_TEXT)
    images = 0
    if cfg.strip_old_images:
        out, images = strip_historical_media(out, texts.stripped_image if texts else IMAGE_STUB)
    record = {"summary_role": role or "merged", "role_reason": why, "system_note_added": noted,
              "tool_pairs": pairs, "images_stripped": images}
    return out, record


def user_content_present(messages: Sequence[dict], target: dict) -> bool:
    """Some user message carries ``target``'s content unchanged (a summary merged into it included)."""
    for message in messages:
        if message.get("role") != "user":
            continue
        content = split_summary(message)[1] if is_summary_message(message) else message.get("content")
        if content == target.get("content"):
            return True
    return False
