"""The pending file: batches survive the writer that appended them and are committed exactly once."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

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
