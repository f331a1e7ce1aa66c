"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``): one conversation a file.

Claude Code appends one line per event: each content block of an assistant
reply (text, thinking, tool use) on a line of its own sharing the reply's
``message.id``; tool results as user lines; and bookkeeping lines (progress,
file-history snapshots, queue operations, hook summaries) that were never
sent to the model. Lines form a tree through ``parentUuid``: a rewind or an
edited prompt leaves the abandoned branch in the file, so the conversation is
the path from the last message back to the root. A link to a line the file
does not hold (a cut or damaged file) falls back to the line before it.

Compaction keeps the whole transcript in the same file: a ``system`` line of
subtype ``compact_boundary`` (whose ``logicalParentUuid`` continues the path)
and a user line flagged ``isCompactSummary`` holding the summary. Both are
Claude Code's own artefacts and are left out, the boundary's place kept in
``meta["compression_points"]``. Thinking blocks are the model's private notes
and are left out too. A subagent's log (``<session>/subagents/agent-*.jsonl``,
every line a sidechain) is a conversation of its own, except the compaction
agent's (``agent-acompact-*``), which is the summarising call behind a
compaction. Shapes checked against real logs of Claude Code 2.1.39 (marot/spotter
test/fixtures/transcripts, commit 8cc42b0b).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording, json_kind

from .base import ImportOptions, Sample, Skip, SourceFormat, json_object_lines
from .transcript import Transcript, content_text, finished

#: Line types Claude Code writes; only ``user`` and ``assistant`` lines carry messages.
LINE_TYPES = ("user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation")
#: The model name Claude Code gives the notices it writes itself in the assistant's place.
SYNTHETIC_MODEL = "<synthetic>"
COMPACTION_AGENT = "acompact"


def _recognises(sample: Sample) -> bool:
    return any(isinstance(line, dict) and line.get("type") in LINE_TYPES
               and ("sessionId" in line or "leafUuid" in line) for line in sample.lines)


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    rows, skipped = json_object_lines(path, "Claude Code", "; the session is read without it")
    yield from skipped
    yield session_recording(rows, path)


def _kept(rows: list[dict[str, Any]]) -> tuple[set[int], int]:
    """Indexes of the rows of the conversation, and how many links to absent lines were bridged.

    The path from the last message up to the root is the conversation's spine.
    A line hanging off it that opens a new prompt is a branch the user
    abandoned (a rewind or an edited prompt), and its whole subtree is left out;
    other lines off the spine are kept, since parallel tool calls and their
    results hang off one another rather than forming one chain.
    """
    index_of = {row["uuid"]: index for index, row in enumerate(rows) if isinstance(row.get("uuid"), str)}
    messages = [i for i, row in enumerate(rows) if row.get("type") in ("user", "assistant")]
    if not messages:
        return set(), 0
    with_uuid = sorted(index_of.values())
    parent: dict[int, int] = {}
    broken = 0
    for index in with_uuid:
        link = rows[index].get("parentUuid") or rows[index].get("logicalParentUuid")
        if isinstance(link, str) and link in index_of:
            parent[index] = index_of[link]
        elif link:
            broken += 1
            before = bisect_left(with_uuid, index)
            if before:
                parent[index] = with_uuid[before - 1]
    spine: set[int] = set()
    current: int | None = messages[-1]
    while current is not None and current not in spine:
        spine.add(current)
        current = parent.get(current)
    children: dict[int, list[int]] = {}
    for child, of in parent.items():
        children.setdefault(of, []).append(child)
    abandoned: set[int] = set()
    for child, of in parent.items():
        if of in spine and child not in spine and _opens_a_prompt(rows[child]):
            pending = [child]
            while pending:
                node = pending.pop()
                if node not in abandoned:
                    abandoned.add(node)
                    pending.extend(children.get(node, []))
    return {i for i in messages if i not in abandoned}, broken


def _opens_a_prompt(row: dict[str, Any]) -> bool:
    """A user line that says something (not only tool results)."""
    if row.get("type") != "user":
        return False
    message = row.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return not isinstance(content, list) or not any(block.get("type") == "tool_result" for block in _blocks(row))


def _blocks(row: dict[str, Any]) -> list[dict[str, Any]]:
    message = row.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def session_recording(rows: list[dict[str, Any]], path: Path) -> Recording | Skip:
    """The conversation of one session file's parsed lines, or why it cannot be one."""
    sidechain = [row for row in rows if row.get("type") in ("user", "assistant") and row.get("isSidechain")]
    is_subagent = bool(sidechain) and len(sidechain) == sum(row.get("type") in ("user", "assistant") for row in rows)
    agent = next((row.get("agentId") for row in sidechain if row.get("agentId")), None) if is_subagent else None
    if isinstance(agent, str) and agent.startswith(COMPACTION_AGENT):
        return Skip(str(path), f"Claude Code's compaction call (agent {agent}), not a conversation of its own")
    if not is_subagent:
        rows = [row for row in rows if not row.get("isSidechain")]
    kept, broken = _kept(rows)
    transcript = Transcript()
    left_out = {"thinking": 0, "other_branches": 0, "compaction_summaries": 0, "sidechain_lines": 0}
    left_out["sidechain_lines"] = 0 if is_subagent else len(sidechain)
    points: list[dict[str, Any]] = []
    model: str | None = None
    reply_id: Any = None
    for index, row in enumerate(rows):
        kind = row.get("type")
        if kind == "system" and row.get("subtype") == "compact_boundary":
            details = row.get("compactMetadata") if isinstance(row.get("compactMetadata"), dict) else {}
            points.append({"at_message": len(transcript.messages), "trigger": details.get("trigger"),
                           "tokens_before": details.get("preTokens")})
            continue
        if kind not in ("user", "assistant"):
            continue
        if index not in kept:
            left_out["other_branches"] += 1
            continue
        message = row.get("message")
        if not isinstance(message, dict):
            return Skip(str(path), f"a {kind} line ({row.get('uuid')}) has no 'message' object")
        if row.get("isCompactSummary"):
            left_out["compaction_summaries"] += 1
            continue
        if kind == "assistant":
            if message.get("model") and message.get("model") != SYNTHETIC_MODEL:
                model = str(message["model"])
            same_reply = message.get("id") is not None and message.get("id") == reply_id
            reply_id = message.get("id")
            problem = _assistant(transcript, message.get("content"), same_reply, left_out)
        else:
            reply_id = None
            problem = _user(transcript, message.get("content"))
        if problem:
            return Skip(str(path), f"line {row.get('uuid')}: {problem}")
    session = next((row.get("sessionId") for row in rows if row.get("sessionId")), None) or path.stem
    versions = sorted({str(row["version"]) for row in rows if row.get("version")})
    name = f"claude-code/{session}" + (f"/{agent}" if is_subagent and agent else "")
    return finished(Recording(
        id=name, messages=transcript.messages, model=model, source=f"Claude Code {path}",
        meta={"importer": "claude-code", "session_id": session, "agent_id": agent, "versions": versions,
              "compressions": len(points), "compression_points": points, "left_out": left_out,
              "broken_links": broken}), str(path))


def _assistant(transcript: Transcript, content: Any, same_reply: bool, left_out: dict[str, int]) -> str | None:
    """Add one assistant line's blocks, to the previous assistant message when it is the same reply."""
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content_text(content)}]
    for block in blocks:
        if not isinstance(block, dict):
            return f"an assistant content block is a {json_kind(block)}"
        kind = block.get("type")
        if kind in ("thinking", "redacted_thinking"):
            left_out["thinking"] += 1
        elif kind == "text":
            last = transcript.messages[-1] if transcript.messages else None
            text = content_text(block.get("text"))
            if same_reply and last is not None and last["role"] == "assistant":
                last["content"] = f"{last['content']}\n{text}" if last["content"] else text
            else:
                transcript.say("assistant", text)
            same_reply = True
        elif kind == "tool_use":
            if not same_reply or not transcript.messages or transcript.messages[-1]["role"] != "assistant":
                transcript.say("assistant", "")
            transcript.call(str(block.get("id") or ""), str(block.get("name") or ""), block.get("input"))
            same_reply = True
        else:
            return f"unknown assistant content block {kind!r}"
    return None


def _user(transcript: Transcript, content: Any) -> str | None:
    """Add one user line: its tool results, then its text (images are left out)."""
    if not isinstance(content, list):
        transcript.say("user", content)
        return None
    texts = []
    for block in content:
        if not isinstance(block, dict):
            return f"a user content block is a {json_kind(block)}"
        if block.get("type") == "tool_result":
            transcript.answer(str(block.get("tool_use_id") or ""), block.get("content"))
        elif block.get("type") == "text":
            texts.append(content_text(block.get("text")))
    if texts:
        transcript.say("user", "\n".join(texts))
    return None


FORMAT = SourceFormat("claude-code", "a Claude Code session log (~/.claude/projects/*/*.jsonl)", _recognises, _read)
