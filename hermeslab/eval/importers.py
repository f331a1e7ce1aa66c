"""Recordings from elsewhere: OpenAI chat JSONL, hermeslab's lab, and a Hermes ``state.db``.

Every importer answers with `Recording`s in the recorded-session format, so an
imported conversation can be replayed and compared like the shared datasets.

**What a recording holds.** A compressed conversation is imported as its full
original transcript — every message the user, the model and the tools
produced, in order, with the handoff summaries and the rewritten copies that
compression inserted left out. That is what a replay needs: an A/B comparison
re-runs compression on the whole conversation under other settings. Where the
compressions happened is kept in ``meta["compression_points"]``.

* **Lab** (exact): the compression records say which rows a compression wrote
  (the first ``messages_after`` rows of a rotated child; the rows from
  ``archived_before_seq`` on for an in-place compression). Each point also
  keeps that rewritten ``context``, so the model's view at any step is the
  ``context`` of the latest point before it followed by the transcript from its
  ``at_message`` on.
* **Hermes state.db** (reconstructed): Hermes marks no row as written by a
  compression, so a block of compaction rows is recognised by its content — a
  run of consecutive rows holding a handoff summary or a note Hermes adds when
  it compacts (the preserved task list, the stand-in user turn), together with
  the rows around it that repeat earlier messages (same tool-call id, or same
  role and text). A repeated message outside such a run is a genuine repeat and
  is kept. Rewound rows (``active=0, compacted=0``: taken back by the user) are
  left out; rows archived by in-place compaction (``compacted=1``) are the
  transcript. Hermes keeps the system prompt apart from the messages; the
  root session's stored prompt opens the recording.

Lineages are walked with a set of visited sessions, so a cycle in the
``parent_session_id`` links ends the walk instead of looping.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hermeslab.core.config import Config
from hermeslab.core.messages import text_of
from hermeslab.store import Lab
from hermeslab.store import open as open_lab
from hermeslab.tools import builtin_registry

from .recording import Recording, RecordingsFile, json_kind

Message = dict[str, Any]

# ---------------------------------------------------------------- OpenAI chat JSONL

#: Keys the OpenAI SDK writes as null or empty on every message; they carry nothing.
_EMPTY_SDK_KEYS = ("refusal", "audio", "function_call", "annotations", "tool_calls")


def import_openai_jsonl(path: str | Path) -> RecordingsFile:
    """Recordings from OpenAI chat JSONL: ``{"messages": [...], "tools"?: [...]}`` lines or bare message lists.

    Iterate the result; lines that cannot be imported are in its ``problems``.
    A line's ``id`` is its own ``id`` when it has one, else ``<file stem>/<line>``.
    Fine-tuning ``weight`` keys and the SDK's empty fields are dropped, a missing
    assistant content becomes ``""`` and text-only content parts are joined.
    """
    source = Path(path).expanduser()
    stem = source.stem

    def parse(data: Any, line: int) -> dict[str, Any]:
        if isinstance(data, list):
            data = {"messages": data}
        if not isinstance(data, dict):
            raise ValueError(f"expected an object with 'messages' or a list of messages, got {json_kind(data)}")
        if "messages" not in data:
            raise ValueError(f"no 'messages' in this line (keys: {', '.join(sorted(data)) or 'none'})")
        messages = data["messages"]
        line_id = data.get("id")
        return {
            "id": line_id if isinstance(line_id, str) and line_id else f"{stem}/{line}",
            "source": str(source),
            "license": None,
            "model": data.get("model") if isinstance(data.get("model"), str) else None,
            "messages": [_openai_message(m) for m in messages] if isinstance(messages, list) else messages,
            "tools": data.get("tools"),
            "meta": {"importer": "openai", "line": line},
        }

    return RecordingsFile(source, parse)


def _openai_message(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    clean = {key: value for key, value in message.items()
             if key != "weight" and not (key in _EMPTY_SDK_KEYS and value in (None, []))}
    content = clean.get("content")
    if content is None and clean.get("role") == "assistant":
        clean["content"] = ""
    elif isinstance(content, list) and content and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content):
        clean["content"] = text_of(clean)
    calls = clean.get("tool_calls")
    if isinstance(calls, list):
        clean["tool_calls"] = [{"type": "function", **call} if isinstance(call, dict) and "type" not in call else call
                               for call in calls]
    return clean


# ---------------------------------------------------------------- hermeslab's lab


def import_lab(lab: Lab | str | Path, session_id: str, *, tools: list[dict[str, Any]] | None = None) -> Recording:
    """The logical conversation ``session_id`` belongs to, from its root session to its newest continuation.

    Only compression rotations are followed (a branch is a conversation of its
    own). The lab keeps no tool schemas; pass the ones that were offered as
    ``tools``. The recording's id is the root session's id.
    """
    lab = lab if isinstance(lab, Lab) else open_lab(lab)
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    sessions = {row["id"]: row for row in _records(lab.sql(
        "SELECT id, parent_session_id, reason, model, title, started_at, end_reason, context_length, config_hash "
        "FROM sessions"))}
    if session_id not in sessions:
        raise ValueError(f"no session {session_id!r} in the lab {lab.path}")
    chain = lab_chain(sessions, session_id)
    rows = _records(lab.sql(
        "SELECT session_id, seq, turn, role, content, tool_calls, tool_call_id FROM messages "
        "WHERE list_contains($ids, session_id) ORDER BY seq", {"ids": chain}))
    compressions = _records(lab.sql(
        "SELECT session_id, trigger, mode, new_session_id, archived_before_seq, messages_after, "
        "tokens_before, tokens_after FROM compressions "
        "WHERE list_contains($ids, session_id) AND coalesce(mode, '') <> 'none' ORDER BY created_at",
        {"ids": chain}))
    transcript, points = lab_transcript(chain, rows, compressions)
    root, tip = sessions[chain[0]], sessions[chain[-1]]
    turns = [row["turn"] for row in rows if row["turn"] is not None]
    return Recording(
        id=root["id"], messages=transcript, tools=tools or None, model=tip["model"],
        source=f"hermeslab lab {lab.path.name}: session {root['id']}",
        meta={"importer": "hermeslab-lab", "title": root["title"], "lineage": chain,
              "compressions": len(points), "compression_points": points, "turns": max(turns, default=0),
              "context_length": tip["context_length"], "config_hash": tip["config_hash"],
              "end_reason": tip["end_reason"]})


def builtin_tool_schemas(config: Config, messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The built-in tool schemas a logged session was offered, as near as the log can tell.

    The lab keeps no schemas: this is every built-in tool ``config`` enables,
    plus any other built-in tool the session called (the terminal, when it was
    enabled for that run only).
    """
    called = {call["function"]["name"] for message in messages for call in message.get("tool_calls", [])}
    here = config.with_overrides({"tools.workspace": "."})  # schemas do not depend on the folder
    offered = {schema["function"]["name"] for schema in builtin_registry(here.tools).schemas()}
    every = builtin_registry(here.with_overrides({"tools.terminal.enabled": True}).tools)
    return [schema for schema in every.schemas() if schema["function"]["name"] in offered | called]


def lab_chain(sessions: dict[str, dict[str, Any]], session_id: str) -> list[str]:
    """Session ids of one logical conversation, root first: compression parents back, continuations forward."""
    def parent(sid: str) -> str | None:
        row = sessions[sid]
        linked = row["parent_session_id"]
        return linked if row["reason"] == "compression" and linked in sessions else None

    def rank(sid: str) -> tuple[Any, str]:
        return sessions[sid]["started_at"], sid

    children: dict[str, list[str]] = {}
    for sid in sorted(sessions, key=rank):
        linked = parent(sid)
        if linked is not None:
            children.setdefault(linked, []).append(sid)
    return _walk(session_id, parent, lambda sid: children.get(sid, [])[-1:], rank)


def _walk(start: str, parent: Callable[[str], str | None], next_of: Callable[[str], list[str]],
          rank: Callable[[str], Any]) -> list[str]:
    """The chain through ``start``: up to its root, then down the first unseen continuation of each session.

    When the parent links loop, the loop's lowest-ranked session is taken as the root.
    """
    path = [start]
    while (up := parent(path[-1])) is not None:
        if up in path:
            path = [min(path[path.index(up):], key=rank)]
            break
        path.append(up)
    chain = [path[-1]]
    seen = set(chain)
    while True:
        step = next((sid for sid in next_of(chain[-1]) if sid not in seen), None)
        if step is None:
            return chain
        seen.add(step)
        chain.append(step)


def lab_transcript(chain: list[str], rows: list[dict[str, Any]],
                   compressions: list[dict[str, Any]]) -> tuple[list[Message], list[dict[str, Any]]]:
    """The original transcript of a chain of lab sessions, and where each compression rewrote the context."""
    by_session: dict[str, list[dict[str, Any]]] = {sid: [] for sid in chain}
    for row in rows:
        by_session[row["session_id"]].append(row)
    transcript: list[Message] = []
    points: list[dict[str, Any]] = []
    for position, sid in enumerate(chain):
        rewrites = sorted(((rec["archived_before_seq"], rec) for rec in compressions
                           if rec["session_id"] == sid and rec["mode"] == "in_place"
                           and rec["archived_before_seq"] is not None), key=lambda item: item[0])
        if position:
            rewrites.insert(0, (0, _rotation_record(compressions, chain[position - 1], sid)))
        pending = list(rewrites)
        current: tuple[int, int, dict[str, Any]] | None = None
        for row in sorted(by_session[sid], key=lambda r: r["seq"]):
            while pending and row["seq"] >= pending[0][0]:
                start, rec = pending.pop(0)
                current = (start, start + int(rec["messages_after"] or 0), _point(rec, len(transcript)))
                points.append(current[2])
            message = _lab_message(row)
            if current is not None and current[0] <= row["seq"] < current[1]:
                current[2]["context"].append(message)
            else:
                transcript.append(message)
        for _, rec in pending:
            points.append(_point(rec, len(transcript)))
    return transcript, points


def _rotation_record(compressions: list[dict[str, Any]], parent: str, child: str) -> dict[str, Any]:
    """The parent's compression that started ``child`` (files older than the mode column name no child)."""
    own = [rec for rec in compressions if rec["session_id"] == parent and rec["mode"] != "in_place"]
    named = [rec for rec in own if rec["new_session_id"] == child]
    if named or own:
        return (named or own)[-1]
    raise ValueError(f"session {child!r} continues {parent!r} after a compression, but the lab has no "
                     "compression record for it")


def _point(rec: dict[str, Any], at: int) -> dict[str, Any]:
    return {"at_message": at, "session_id": rec["session_id"], "mode": rec["mode"] or "rotation",
            "new_session_id": rec["new_session_id"], "trigger": rec["trigger"],
            "tokens_before": rec["tokens_before"], "tokens_after": rec["tokens_after"], "context": []}


def _lab_message(row: dict[str, Any]) -> Message:
    message: Message = {"role": row["role"], "content": _text(row["content"])}
    if row["tool_calls"]:
        message["tool_calls"] = [_clean_call(call) for call in json.loads(row["tool_calls"])]
    if row["tool_call_id"]:
        message["tool_call_id"] = row["tool_call_id"]
    return message


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as dicts with SQL NULL as None (pandas reads it as NaN)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


# ---------------------------------------------------------------- Hermes state.db

#: Openings of the handoff summaries Hermes writes (current and older releases).
HERMES_SUMMARY_MARKERS = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
#: Opening of a summary Hermes merged into the first kept message instead of adding its own.
HERMES_MERGED_MARKER = "[PRIOR CONTEXT"
#: Openings of the user messages Hermes adds when it compacts: the preserved task list and the stand-in turn.
HERMES_COMPACTION_NOTES = ("[Your active task list was preserved", "Continue from the compressed conversation")
#: Hermes's JSON encoding of non-string content.
_HERMES_JSON_CONTENT = "\x00json:"
_HERMES_SESSION_COLUMNS = ("id", "source", "model", "model_config", "system_prompt", "parent_session_id",
                           "started_at", "end_reason", "title", "input_tokens", "output_tokens")


def import_hermes_state(path: str | Path, *, session_id: str | None = None) -> list[Recording]:
    """One recording per logical conversation in a Hermes ``state.db`` (only ``session_id``'s when given).

    The file is opened read-only with the standard library's ``sqlite3``.
    """
    db_path = Path(path).expanduser()
    if not db_path.is_file():
        raise FileNotFoundError(f"no Hermes state database at {db_path}")
    try:
        with closing(sqlite3.connect(f"{db_path.absolute().as_uri()}?mode=ro", uri=True)) as con:
            con.row_factory = sqlite3.Row
            sessions = _hermes_sessions(con, db_path)
            chains = hermes_chains(sessions)
            if session_id is not None:
                chains = [chain for chain in chains if session_id in chain]
                if not chains:
                    raise ValueError(f"no session {session_id!r} in {db_path}")
            return [_hermes_recording(con, db_path, sessions, chain) for chain in chains]
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"cannot read {db_path} as a Hermes state database: {exc}") from None


def _hermes_sessions(con: sqlite3.Connection, db_path: Path) -> dict[str, dict[str, Any]]:
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"sessions", "messages"} <= tables:
        raise ValueError(f"{db_path} is not a Hermes state database: it has no 'sessions' and 'messages' tables")
    present = {row[1] for row in con.execute("PRAGMA table_info(sessions)")}
    wanted = [column for column in _HERMES_SESSION_COLUMNS if column in present]
    rows = con.execute(f"SELECT {', '.join(wanted)} FROM sessions").fetchall()
    return {row["id"]: {column: (row[column] if column in present else None) for column in _HERMES_SESSION_COLUMNS}
            for row in rows}


def hermes_chains(sessions: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Every logical conversation as its chain of session ids, each session in exactly one chain.

    A session continues its parent when the parent ended with ``compression``
    and the session is not a branch, a delegated subagent or a tool session.
    Chains are listed by the start of their root session.
    """
    def parent(sid: str) -> str | None:
        row = sessions[sid]
        linked = row["parent_session_id"]
        if linked not in sessions or sessions[linked]["end_reason"] != "compression":
            return None
        config = _json_object(row["model_config"])
        if row["source"] == "tool" or "_branched_from" in config or "_delegate_from" in config:
            return None
        return linked

    def rank(sid: str) -> tuple[float, str]:
        return sessions[sid]["started_at"] or 0.0, sid

    ordered = sorted(sessions, key=rank)
    children: dict[str, list[str]] = {}
    for sid in ordered:
        linked = parent(sid)
        if linked is not None:
            children.setdefault(linked, []).append(sid)
    chains: list[list[str]] = []
    placed: set[str] = set()

    def unplaced_parent(sid: str) -> str | None:
        linked = parent(sid)
        return None if linked in placed else linked

    for sid in ordered:
        if sid not in placed:
            chain = _walk(sid, unplaced_parent, lambda s: [c for c in children.get(s, []) if c not in placed], rank)
            placed.update(chain)
            chains.append(chain)
    return chains


def _hermes_recording(con: sqlite3.Connection, db_path: Path, sessions: dict[str, dict[str, Any]],
                      chain: list[str]) -> Recording:
    marks = ", ".join("?" for _ in chain)
    columns = {row[1] for row in con.execute("PRAGMA table_info(messages)")}
    # Files from before Hermes archived rows have neither flag: every row is active.
    flags = ", ".join(name if name in columns else f"{int(name == 'active')} AS {name}"
                      for name in ("active", "compacted"))
    rows = con.execute(
        f"SELECT session_id, role, content, tool_call_id, tool_calls, {flags} FROM messages "
        f"WHERE session_id IN ({marks}) ORDER BY id", chain).fetchall()
    position = {sid: index for index, sid in enumerate(chain)}
    segments: list[list[Message]] = [[] for _ in chain]
    rewound = 0
    for row in sorted(rows, key=lambda r: position[r["session_id"]]):
        if not row["active"] and not row["compacted"]:
            rewound += 1
            continue
        segments[position[row["session_id"]]].append(_hermes_message(row))
    rebuilt = HermesTranscript()
    for index, segment in enumerate(segments):
        rebuilt.add_segment(segment, rotated=index > 0)
    root, tip = sessions[chain[0]], sessions[chain[-1]]
    system = [{"role": "system", "content": root["system_prompt"]}] if root["system_prompt"] else []
    shift = len(system)
    modes = {point["mode"] for point in rebuilt.points}
    return Recording(
        id=root["id"], messages=system + rebuilt.messages, model=tip["model"] or root["model"],
        source=f"hermes {db_path.name}: session {root['id']}",
        meta={"importer": "hermes-state", "title": root["title"], "lineage": chain,
              "hermes_source": root["source"], "shape": "+".join(sorted(modes)) or "none",
              "compressions": len(rebuilt.points),
              "compression_points": [{**point, "at_message": point["at_message"] + shift}
                                     for point in rebuilt.points],
              "left_out": {**rebuilt.left_out, "rewound": rewound}, "end_reason": tip["end_reason"],
              "input_tokens": sum(sessions[sid]["input_tokens"] or 0 for sid in chain),
              "output_tokens": sum(sessions[sid]["output_tokens"] or 0 for sid in chain)})


@dataclass
class HermesTranscript:
    """Rebuilds the original transcript from Hermes rows, leaving compaction blocks out (see the module doc).

    Rows are fed one session segment at a time. Rows that may belong to a
    compaction block are held back as a run until a certainly original row, or
    the end of the segment, decides the run: left out when it holds a summary,
    a compaction note or a repeated tool call or result; kept when it only
    repeats text.
    """

    messages: list[Message] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=lambda: {"summaries": 0, "compaction_notes": 0, "copies": 0})
    _call_ids: set[str] = field(default_factory=set)
    _result_ids: set[str] = field(default_factory=set)
    _texts: set[tuple[str, str]] = field(default_factory=set)

    def add_segment(self, segment: Iterable[Message], *, rotated: bool) -> None:
        """Add one session's rows; ``rotated`` when the session continues the previous one after a compression."""
        run: list[tuple[Message, str]] = []
        run_start = 0
        for index, message in enumerate(segment):
            kind = self._kind(message)
            if kind == "original":
                self._settle(run, "rotation" if rotated and run_start == 0 else "in_place")
                run = []
                self._keep(message)
                continue
            if not run:
                run_start = index
            run.append((message, kind))
        self._settle(run, "rotation" if rotated and run_start == 0 else "in_place")

    def _kind(self, message: Message) -> str:
        text = message["content"]
        opening = text.lstrip()
        if opening.startswith(HERMES_SUMMARY_MARKERS) or (
                opening.startswith(HERMES_MERGED_MARKER) and HERMES_SUMMARY_MARKERS[0] in text):
            return "summaries"
        if message["role"] == "user" and opening.startswith(HERMES_COMPACTION_NOTES):
            return "compaction_notes"
        ids = [call["id"] for call in message.get("tool_calls", [])]
        if any(call_id in self._call_ids for call_id in ids):
            return "copies"
        if message["role"] == "tool":
            return "copies" if message.get("tool_call_id") in self._result_ids else "original"
        if not ids and (message["role"], text) in self._texts:
            return "repeat"
        return "original"

    def _settle(self, run: list[tuple[Message, str]], mode: str) -> None:
        if all(kind == "repeat" for _, kind in run):
            for message, _ in run:
                self._keep(message)
            return
        for _, kind in run:
            self.left_out["copies" if kind == "repeat" else kind] += 1
        if any(kind == "summaries" for _, kind in run):
            self.points.append({"at_message": len(self.messages), "mode": mode})

    def _keep(self, message: Message) -> None:
        self.messages.append(message)
        ids = [call["id"] for call in message.get("tool_calls", [])]
        self._call_ids.update(ids)
        if message["role"] == "tool":
            self._result_ids.add(message.get("tool_call_id"))
        elif not ids:
            self._texts.add((message["role"], message["content"]))


def _hermes_message(row: sqlite3.Row) -> Message:
    message: Message = {"role": row["role"], "content": _text(_hermes_content(row["content"]))}
    calls = _json_list(row["tool_calls"])
    if calls:
        message["tool_calls"] = [_clean_call(call) for call in calls]
    if row["tool_call_id"]:
        message["tool_call_id"] = row["tool_call_id"]
    return message


def _hermes_content(content: Any) -> Any:
    if isinstance(content, str) and content.startswith(_HERMES_JSON_CONTENT):
        try:
            return json.loads(content[len(_HERMES_JSON_CONTENT):])
        except json.JSONDecodeError:
            return content
    return content


# ---------------------------------------------------------------- shared helpers


def _text(content: Any) -> str:
    """Content as the recorded-session format wants it: a string (text parts joined, null as "")."""
    if content is None:
        return ""
    if isinstance(content, str):
        if content.startswith("[") and content.endswith("]"):
            try:
                parts = json.loads(content)
            except json.JSONDecodeError:
                return content
            if isinstance(parts, list) and parts and all(isinstance(p, dict) and "type" in p for p in parts):
                return text_of({"content": parts})
        return content
    if isinstance(content, list):
        return text_of({"content": content})
    return str(content)


def _clean_call(call: Any) -> dict[str, Any]:
    """A stored tool call in the plain OpenAI shape (arguments as a JSON string, extra keys dropped)."""
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call.get("id", ""), "type": "function",
            "function": {"name": function.get("name", ""), "arguments": arguments}}


def _json_list(text: Any) -> list[Any]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return []
    return value if isinstance(value, list) else []


def _json_object(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
