"""Building an index file from scratch in one pass: rows as they come, then all postings sorted at once.

Used by ``SearchIndex.rebuild`` on a new file nobody reads yet, so it writes
without a journal and leaves nothing pending: every message is merged.
"""

from __future__ import annotations

import sqlite3
from array import array
from typing import Iterable

import numpy as np

from hermeslab.search import storage
from hermeslab.search.documents import MessageDoc, SessionInfo
from hermeslab.search.postings import MAX_TF, all_blocks
from hermeslab.search.storage import append_chunks, block_key, transaction
from hermeslab.search.tokens import analysed

_INSERT_DOC = ("INSERT INTO docs (doc, message_id, session, seq, role, created_at, length, text) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_ROWS_PER_INSERT = 10_000


def bulk_build(con: sqlite3.Connection, docs: Iterable[MessageDoc], sessions: Iterable[SessionInfo],
               lab_rowid: int) -> int:
    """Fill the empty index at ``con``; returns the messages indexed (repeated message ids count once)."""
    session_idx: dict[str, int] = {}

    def session_of(session_id: str) -> int:
        return session_idx.setdefault(session_id, len(session_idx))

    infos = {s.id: s for s in sessions}
    for session_id in infos:
        session_of(session_id)
    term_ids: dict[str, int] = {}
    post_terms, post_docs, post_tfs, post_nexts = array("I"), array("I"), array("H"), array("H")
    lengths, doc_sessions = array("I"), array("i")
    seen: set[str] = set()
    batch: list[tuple] = []
    with transaction(con):
        for doc in docs:
            if not isinstance(doc, MessageDoc):
                raise TypeError(f"rebuild() takes MessageDoc items, got {type(doc).__name__}")
            if doc.message_id in seen:
                continue
            seen.add(doc.message_id)
            number = len(lengths)
            counts, length, successors = analysed(doc.text)
            post_terms.extend([term_ids.setdefault(term, len(term_ids)) for term in counts])
            post_docs.extend([number] * len(counts))
            post_tfs.extend([min(tf, MAX_TF) for tf in counts.values()])
            post_nexts.extend([successors.get(term, 0) for term in counts])
            lengths.append(length)
            doc_sessions.append(session_of(doc.session_id))
            batch.append((number, doc.message_id, doc_sessions[-1], doc.seq, doc.role, doc.created_at, length,
                          doc.text))
            if len(batch) >= _ROWS_PER_INSERT:
                con.executemany(_INSERT_DOC, batch)
                batch.clear()
        con.executemany(_INSERT_DOC, batch)
        n_docs = len(lengths)
        length_array = np.frombuffer(lengths, np.uint32) if n_docs else np.zeros(0, np.uint32)
        total = int(length_array.sum())
        avgdl = total / n_docs if n_docs else 1.0
        _write_blocks(con, np.frombuffer(post_terms, np.uint32), np.frombuffer(post_docs, np.uint32),
                      np.frombuffer(post_tfs, np.uint16), np.frombuffer(post_nexts, np.uint16), length_array, avgdl)
        df = np.bincount(np.frombuffer(post_terms, np.uint32), minlength=len(term_ids)) if term_ids else []
        con.executemany("INSERT INTO terms (term, id, df) VALUES (?, ?, ?)",
                        ((term, term_id, int(df[term_id])) for term, term_id in term_ids.items()))
        append_chunks(con, 0, length_array, np.frombuffer(doc_sessions, np.int32) if n_docs
                      else np.zeros(0, np.int32))
        con.executemany("INSERT INTO sessions (idx, id, parent, title, started_at, source) VALUES (?, ?, ?, ?, ?, ?)",
                        [(idx, session_id, infos[session_id].parent_id if session_id in infos else None,
                          infos[session_id].title if session_id in infos else None,
                          infos[session_id].started_at if session_id in infos else None,
                          infos[session_id].source if session_id in infos else None)
                         for session_id, idx in session_idx.items()])
        storage.write_meta(con, {"docs": n_docs, "total_length": total, "terms": len(term_ids),
                                 "sessions": len(session_idx), "merged_docs": n_docs, "merges": 0,
                                 "sessions_version": 0, "lab_rowid": int(lab_rowid)})
    return n_docs


def _write_blocks(con: sqlite3.Connection, post_terms: np.ndarray, post_docs: np.ndarray, post_tfs: np.ndarray,
                  post_nexts: np.ndarray, lengths: np.ndarray, avgdl: float) -> None:
    blocks = all_blocks(post_terms, post_docs, post_tfs, post_nexts, lengths, avgdl)
    con.executemany("INSERT INTO blocks (key, bound, avgdl, size, docs, tfs, nexts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    ((block_key(term_id, block_id), block.bound, block.avgdl, len(block.docs), *block.encode())
                     for term_id, block_id, block in blocks))
