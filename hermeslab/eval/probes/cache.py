"""Every answer and judgement of the probe exam, kept in the lab under a content hash.

A row's key hashes what decided it: for an answer, the answerer's name, the
context as sent (messages and tool schemas), the question (and the gold, for
an answerer that reads it); for a judgement, the judge, the probe and the
answer. So a rerun, or another config whose compaction left the same
context, finds its answers here and makes no call.

The rows of one answerer or judge are read once when an exam starts. New rows
are written as they come: an answer that cost a call is written before the
next call is made, so an exam killed midway loses at most the answer in
flight; answers that cost nothing to redo are written in batches (at most
``FLUSH_SECONDS`` apart, and at the end). Without a lab the cache lives in
memory for one exam.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from hermeslab.store import Lab
from hermeslab.store.schema import ensure_schema, open_lab_file

#: Longest wait, in seconds, before answers that cost nothing to redo are written.
FLUSH_SECONDS = 1.0
KINDS = ("answer", "judgement", "questions")


@dataclass(frozen=True)
class Entry:
    """One cached result: the text, and for an answer the tokens its call took (NaN when unknown)."""

    value: str
    prompt_tokens: float = math.nan
    server_cached_tokens: float = math.nan


def message_digest(message: dict[str, Any]) -> str:
    """The content hash of one message as sent."""
    return hashlib.sha256(json.dumps(message, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def context_digest(message_digests: Sequence[str], tools: Sequence[dict[str, Any]] | None) -> str:
    """The content hash of a context: its messages' hashes in order and the tool schemas sent with them."""
    digest = hashlib.sha256(json.dumps(list(tools or []), sort_keys=True, ensure_ascii=False).encode())
    for item in message_digests:
        digest.update(item.encode())
    return digest.hexdigest()


def answer_key(answerer: str, context: str, question: str, gold: Any = None) -> str:
    """The key of one answer; ``gold`` only for an answerer that reads it."""
    payload = json.dumps([answerer, context, question, gold], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class ExamStore:
    """The exam's rows in a lab file (``lab`` a path or ``Lab``), or in memory (``lab`` None)."""

    def __init__(self, lab: str | Path | Lab | None, *, lock_timeout: float = 30.0):
        if lab is not None and not isinstance(lab, (str, Path, Lab)):
            raise TypeError(f"lab must be a path, a Lab or None, got {type(lab).__name__}")
        self.path = None if lab is None else (lab.path if isinstance(lab, Lab) else Path(lab).expanduser())
        if self.path is not None and self.path.is_dir():
            raise IsADirectoryError(f"{self.path} is a directory; a lab is a DuckDB file such as "
                                    f"{self.path / 'lab.duckdb'}")
        self.lock_timeout = lock_timeout
        self._rows: dict[str, Entry] = {}
        self._pending: list[tuple[Any, ...]] = []
        self._last_flush = time.monotonic()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open_lab_file(self.path, read_only=False, timeout=lock_timeout) as con:
                ensure_schema(con)

    def load(self, kind: str, identity: str) -> int:
        """Read every row of ``kind`` stored under ``identity``; returns how many there are."""
        if self.path is None:
            return 0
        with open_lab_file(self.path, read_only=True, timeout=self.lock_timeout) as con:
            rows = con.execute("SELECT key, value, prompt_tokens, server_cached_tokens FROM exam_cache "
                               "WHERE kind = ? AND identity = ?", [kind, identity]).fetchall()
        for key, value, prompt, cached in rows:
            self._rows[key] = Entry(value, math.nan if prompt is None else prompt,
                                    math.nan if cached is None else cached)
        return len(rows)

    def get(self, key: str) -> Entry | None:
        return self._rows.get(key)

    def put(self, key: str, kind: str, identity: str, question: str | None, entry: Entry, *, durable: bool) -> None:
        """Keep a row; ``durable`` writes it (and anything waiting) to the lab before returning."""
        if key in self._rows:
            return
        self._rows[key] = entry
        if self.path is None:
            return
        self._pending.append((key, kind, identity, question, entry.value, _or_none(entry.prompt_tokens),
                              _or_none(entry.server_cached_tokens), _utc_now()))
        if durable or time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write the rows waiting, in one transaction (rows already there are left as they are)."""
        self._last_flush = time.monotonic()
        if not self._pending or self.path is None:
            return
        frame = pd.DataFrame(self._pending, columns=["key", "kind", "identity", "question", "value",
                                                     "prompt_tokens", "server_cached_tokens", "created_at"])
        frame = frame.astype({"prompt_tokens": "float64", "server_cached_tokens": "float64"})
        with open_lab_file(self.path, read_only=False, timeout=self.lock_timeout) as con:
            con.register("exam_rows", frame)
            try:
                con.execute("INSERT OR IGNORE INTO exam_cache SELECT * FROM exam_rows")
            finally:
                con.unregister("exam_rows")
        self._pending = []


def _or_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else value


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)
