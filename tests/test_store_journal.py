"""The pending file: batches survive the writer that appended them and are committed exactly once."""

from __future__ import annotations

import fcntl
import os
from datetime import datetime
from pathlib import Path

import pytest

from hermeslab.core.events import SessionEnded, SessionStarted
from hermeslab.store import Lab, StoreWriter
from hermeslab.store.batch import Batch
from hermeslab.store import journal as journal_module
from hermeslab.store.journal import Journal, decode, encode, orphans, pending_dir
from hermeslab.store.rows import RowBuilder
from test_store import Conversation


def batches(conversation: Conversation, turns: range) -> list[Batch]:
    """One batch per turn, as the writer builds them (the first one starts the session)."""
    builder, built = RowBuilder(), []
    for turn in turns:
        batch = Batch()
        for event in ([conversation.start()] if turn == turns[0] else []) + conversation.turn(turn):
            builder.add(event, batch)
        built.append(batch)
    return built


def test_a_batch_comes_back_from_its_line_unchanged():
    batch = Batch()
    batch.add("messages", {"id": "m1", "content": "ünïcode \n \"quoted\"", "tokens": None, "active": True,
                           "created_at": datetime(2025, 1, 2, 3, 4, 5, 678901), "latency_ms": 1.5})
    batch.lifecycle.append(("end", {"id": "s1", "ended_at": datetime(2025, 1, 2), "end_reason": None}))
    batch.count("s1", "message_count", 1)
    batch.touch("s1", 1735786800.25)
    batch.archives.append(("s1", 7))
    line = encode(batch)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line) == batch


def test_a_dead_writers_batches_are_committed_once_and_a_cut_line_is_dropped(tmp_path: Path):
    lab_path = tmp_path / "lab.duckdb"
    first, second, third = batches(Conversation(), range(1, 4))
    with StoreWriter(lab_path) as writer:  # the first batch reached the lab before the "kill"
        writer._write(first)
    journal = Journal(lab_path)
    journal.append(first)
    journal.append(second)
    [kept] = journal.close()  # uncommitted batches stay on disk
    with kept.open("ab") as file:
        file.write(encode(third)[:-20])  # the batch being appended when the process died
    StoreWriter(lab_path).close()
    lab = Lab(lab_path)
    assert list(lab.turns("s1")["turn"]) == [1, 2]
    session = lab.sessions().iloc[0]
    assert session["api_call_count"] == 4 and session["message_count"] == 8  # the first batch counted once
    assert not pending_dir(lab_path).exists()


def test_a_live_writers_pending_file_is_left_alone(tmp_path: Path):
    lab_path = tmp_path / "lab.duckdb"
    journal = Journal(lab_path)
    journal.append(batches(Conversation(), range(1, 2))[0])
    assert list(orphans(lab_path)) == []  # its lock is held, even by this very process
    with StoreWriter(lab_path) as writer:
        writer.handle(SessionStarted(session_id="other"))
    assert len(list(pending_dir(lab_path).iterdir())) == 1
    assert Lab(lab_path).sessions()["id"].tolist() == ["other"]
    journal.committed(1)
    assert journal.close() == [] and not pending_dir(lab_path).exists()


def test_long_stretches_of_uncommitted_batches_go_to_files_deleted_as_the_lab_catches_up(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(journal_module, "SEGMENT_BYTES", 1)  # a new file for every batch
    lab_path = tmp_path / "lab.duckdb"
    chat, builder = Conversation(), RowBuilder()
    built = []
    # The session ends, then is reopened: applied in the other order, it would read ended.
    for events in ([chat.start(), *chat.turn(1)], chat.turn(2), [SessionEnded(session_id="s1")],
                   [chat.start(reason="resume"), *chat.turn(3)]):
        built.append(Batch())
        for event in events:
            builder.add(event, built[-1])
    journal = Journal(lab_path)
    assert [journal.append(batch) for batch in built] == [1, 2, 3, 4]
    assert len(list(pending_dir(lab_path).iterdir())) == 4
    journal.committed(1)  # as if the first batch had reached the lab
    with StoreWriter(lab_path) as writer:
        writer._write(built[0])
    files = sorted(pending_dir(lab_path).iterdir())
    assert [decode(path.read_bytes()) for path in files] == built[1:]  # named in the order they were begun
    assert journal.close() == files
    StoreWriter(lab_path).close()  # adopts them in that order
    lab = Lab(lab_path)
    assert list(lab.turns("s1")["turn"]) == [1, 2, 3]
    assert lab.sessions()["ended_at"].isna().all() and lab.sessions()["api_call_count"].tolist() == [6]


@pytest.mark.parametrize("adopter", ["deletes it", "still holds it"])
def test_a_new_pending_file_taken_for_an_orphan_before_its_lock_is_replaced(tmp_path: Path, monkeypatch, adopter):
    """A pending file exists for a moment before its writer locks it. A writer adopting orphans in that moment
    takes it for a dead writer's empty file: it deletes it, or still holds its lock when the new file's writer
    tries to lock it. Either way the rows must land in a file the next writer finds, or a kill loses them."""
    lab_path = tmp_path / "lab.duckdb"
    flock, held = fcntl.flock, []

    def adoption_before_the_lock(fd, operation):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY and not held:  # the file just created
            held.extend(orphans(lab_path))  # the adopter's own locks are taken on read-only descriptors
            assert [orphan.batches for orphan in held] == [[]]
            if adopter == "deletes it":
                held[0].discard()  # what a writer does with an orphan that holds nothing
        return flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", adoption_before_the_lock)
    first = batches(Conversation(), range(1, 2))[0]  # it starts the session
    journal = Journal(lab_path)
    journal.append(first)
    assert held, "the adoption never ran"
    if adopter == "still holds it":
        held[0].discard()
    assert list(orphans(lab_path)) == []  # the writer is alive: its file is locked
    assert [decode(path.read_bytes()) for path in pending_dir(lab_path).glob("*.jsonl")] == [first]
    assert len(journal.close()) == 1  # as a killed writer leaves it
    StoreWriter(lab_path).close()
    assert Lab(lab_path).sessions()["message_count"].tolist() == [4]
