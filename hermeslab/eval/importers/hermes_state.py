"""Hermes ``state.db``: one recording per logical conversation, its original transcript.

What a recording of a compressed conversation holds is said by
`hermeslab.recordings.lab`: the full original transcript, with the
compressions' points in ``meta``.

A Hermes ``state.db`` is reconstructed, since Hermes marks no row as written by
a compression: a block of compaction rows is recognised by its content — a
run of consecutive rows holding a handoff summary or a note Hermes adds when
it compacts (the preserved task list, the stand-in user turn), together with
the rows around it that repeat earlier messages (same tool-call id, or same
role and text). A repeated message outside such a run is a genuine repeat and
is kept. Rewound rows (``active=0, compacted=0``: taken back by the user) are
left out; rows archived by in-place compaction (``compacted=1``) are the
transcript. Hermes keeps the system prompt apart from the messages; the root
session's stored prompt opens the recording. Lineages are walked with a set of
visited sessions, so a cycle in the ``parent_session_id`` links ends the walk
instead of looping.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermeslab.core.messages import Message
from hermeslab.recordings import Recording, recorded_call, recorded_text
from hermeslab.recordings.lab import walk_chain

from .base import ImportOptions, Skip, SourceFormat
from .transcript import finished

#: Openings of the handoff summaries Hermes writes (current and older releases).
HERMES_SUMMARY_MARKERS = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
#: Opening of a summary Hermes merged into the first kept message instead of adding its own.
HERMES_MERGED_MARKER = "[PRIOR CONTEXT"
#: Openings of the user messages Hermes adds when it compacts: the preserved task list and the stand-in turn.
HERMES_COMPACTION_NOTES = ("[Your active task list was preserved", "Continue from the compressed conversation")
#: Openings of the background-review prompts some Hermes builds persisted into real sessions.
HERMES_REVIEW_PROMPTS = ("Review the conversation above and update the skill library",
                         "Review the conversation above and consider saving to memory")
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
    """Every session row, with the columns this file's Hermes release has (the others as None).

    Releases after 0.19 store a system prompt once, in ``system_prompts`` keyed
    by ``sessions.system_prompt_hash``, leaving ``sessions.system_prompt`` empty
    (hermes_state_compression.py of hermes-agent at commit 04c18865); the
    stored prompt is resolved through the hash when the file has that table.
    """
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"sessions", "messages"} <= tables:
        raise ValueError(f"{db_path} is not a Hermes state database: it has no 'sessions' and 'messages' tables")
    present = {row[1] for row in con.execute("PRAGMA table_info(sessions)")}
    wanted = [f"s.{column}" for column in _HERMES_SESSION_COLUMNS if column in present and column != "system_prompt"]
    own_prompt = "s.system_prompt" if "system_prompt" in present else "NULL"
    joined = ""
    if "system_prompt_hash" in present and "system_prompts" in tables:
        own_prompt = f"COALESCE(sp.prompt, {own_prompt})"
        joined = " LEFT JOIN system_prompts sp ON sp.hash = s.system_prompt_hash"
    rows = con.execute(f"SELECT {', '.join(wanted + [own_prompt + ' AS system_prompt'])} "
                       f"FROM sessions s{joined}").fetchall()
    found = set(rows[0].keys()) if rows else set()
    return {row["id"]: {column: (row[column] if column in found else None) for column in _HERMES_SESSION_COLUMNS}
            for row in rows}


def hermes_chains(sessions: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Every logical conversation as its chain of session ids, each session in exactly one chain.

    A session continues its parent when the parent ended with ``compression``
    and the session is not a branch, a delegated subagent, a reset (newer
    releases mark it ``_reset_from``) or a tool session.
    Chains are listed by the start of their root session.
    """
    def parent(sid: str) -> str | None:
        row = sessions[sid]
        linked = row["parent_session_id"]
        if linked not in sessions or sessions[linked]["end_reason"] != "compression":
            return None
        config = _json_object(row["model_config"])
        if row["source"] == "tool" or {"_branched_from", "_delegate_from", "_reset_from"} & set(config):
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
            chain = walk_chain(sid, unplaced_parent,
                               lambda s: [c for c in children.get(s, []) if c not in placed], rank)
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
    review_turns = 0
    for index, segment in enumerate(segments):
        segment, dropped = without_review_harness(segment)
        review_turns += dropped
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
              "left_out": {**rebuilt.left_out, "rewound": rewound, "review_harness": review_turns}, "end_reason": tip["end_reason"],
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


def without_review_harness(segment: list[Message]) -> tuple[list[Message], int]:
    """A session's rows without the background-review turns older Hermes builds wrote into it, and how many.

    Hermes's skill and memory review runs as a fork whose prompt (and the
    reply to it) some builds persisted into the real session; Hermes itself
    drops them when it reloads a session (``_strip_background_review_harness``
    in hermes_state.py of hermes-agent at commit 00025f69). Like Hermes, a
    prompt takes the assistant reply right after it along, unless it follows
    another such prompt (it then stands where that prompt's reply would be);
    the reply's tool results go too, so no call is left without its answer.
    """
    kept: list[Message] = []
    dropped = 0
    reply_due = after_prompt = False
    dropped_calls: set[str] = set()
    for message in segment:
        if message["role"] in ("user", "system") and message["content"].lstrip().startswith(HERMES_REVIEW_PROMPTS):
            dropped += 1
            reply_due, after_prompt = not after_prompt, True
            continue
        after_prompt = False
        if reply_due and message["role"] == "assistant":
            dropped += 1
            dropped_calls.update(call["id"] for call in message.get("tool_calls", []))
            reply_due = False
            continue
        reply_due = False
        if message["role"] == "tool" and message.get("tool_call_id") in dropped_calls:
            dropped += 1
            continue
        kept.append(message)
    return kept, dropped


def _hermes_message(row: sqlite3.Row) -> Message:
    message: Message = {"role": row["role"], "content": recorded_text(_hermes_content(row["content"]))}
    calls = _json_list(row["tool_calls"])
    if calls:
        message["tool_calls"] = [recorded_call(call) for call in calls]
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


# ---------------------------------------------------------------- JSON columns


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


# ---------------------------------------------------------------- as a source format

SQLITE_MAGIC = b"SQLite format 3\x00"


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    try:
        recordings = import_hermes_state(path, session_id=options.session)
    except ValueError as exc:
        yield Skip(str(path), str(exc))
        return
    for recording in recordings:
        yield finished(recording, f"{path}: session {recording.id}")


FORMAT = SourceFormat("hermes-state", "a Hermes state.db (SQLite): every conversation, compactions undone",
                      lambda sample: sample.head.startswith(SQLITE_MAGIC), _read)
