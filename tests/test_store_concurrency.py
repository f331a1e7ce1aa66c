"""Several processes on one lab file: concurrent writers and readers, and writers killed mid-turn.

A killed writer loses at most its turn in flight: every turn it finished is in
the lab or in its pending file, which the next writer on the lab commits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from hermeslab.core.events import SessionStarted
from hermeslab.store import Lab, StoreWriter, schema

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

# A writer process. Usage: <lab path> <session id> <turns> <mode>
#   complete  - write every turn (flushing each), close, print DONE
#   back-to-back - write every turn without flushing, close, print DONE
#   die-back-to-back - write every turn without flushing, write half of one more at once, print READY
#             and wait to be killed
#   die       - write every turn, then half of one more, print READY and wait to be killed
#   exit      - write every turn, then half of one more, and end the script without close()
#   die-in-transaction - write every turn, then flush one more but stop inside its transaction
#             (after the messages are inserted, before the commit), print INSIDE and wait to be killed
#   adopted-<mode> - as <mode>, but the writer's adoption of orphans runs once more right between
#             the creation of its first pending file and the lock it takes on it
WRITER = r"""
import sys, time
from hermeslab.core.events import (ApiCallFinished, MessageAdded, SessionEnded, SessionStarted,
                                   ToolCallFinished, TurnFinished, TurnStarted)
from hermeslab.store import StoreWriter

path, sid, turns, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
writer = StoreWriter(path, lock_timeout=60)
seq = 0

if mode.startswith("adopted-"):
    import fcntl, os
    mode, flock = mode.removeprefix("adopted-"), fcntl.flock

    def adoption_before_the_lock(fd, operation):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:  # a pending file just created
            fcntl.flock = flock
            writer._adopt_orphans()
        return flock(fd, operation)

    fcntl.flock = adoption_before_the_lock

def message(turn, role, content, **extra):
    global seq
    seq += 1
    parent = f"{sid}-{seq - 1}" if seq > 1 else None
    return MessageAdded(session_id=sid, turn=turn, message_id=f"{sid}-{seq}", parent_id=parent, seq=seq,
                        message={"role": role, "content": content, **extra})

def turn_events(turn, padding=0):
    call = f"{sid}-call-{turn}"
    yield TurnStarted(session_id=sid, turn=turn, user_text=f"question {turn}")
    yield message(turn, "user", f"question {turn}")
    yield ApiCallFinished(session_id=sid, turn=turn, call_index=0, attempt=1, prompt_tokens=100, completion_tokens=10)
    function = {"name": "read_file", "arguments": "{}"}
    yield message(turn, "assistant", None, tool_calls=[{"id": call, "type": "function", "function": function}])
    yield ToolCallFinished(session_id=sid, turn=turn, tool_call_id=call, name="read_file", arguments="{}",
                           result="text")
    yield message(turn, "tool", "text", tool_call_id=call)
    for _ in range(padding):
        yield message(turn, "assistant", "filler " * 20)
    yield message(turn, "assistant", f"answer {turn}")
    yield TurnFinished(session_id=sid, turn=turn, final_text=f"answer {turn}", api_calls=1)

writer.handle(SessionStarted(session_id=sid, model="m"))
for turn in range(1, turns + 1):
    for event in turn_events(turn):
        writer.handle(event)
    if "back-to-back" not in mode:
        writer.flush()

if mode in ("complete", "back-to-back"):
    writer.handle(SessionEnded(session_id=sid, end_reason="done"))
    writer.close()
    print("DONE", flush=True)
elif mode == "exit":
    for event in list(turn_events(turns + 1))[:4]:
        writer.handle(event)
elif mode in ("die", "die-back-to-back"):
    for event in list(turn_events(turns + 1))[:4]:
        writer.handle(event)
    print("READY", flush=True)
    time.sleep(600)
elif mode == "die-in-transaction":
    from hermeslab.store import transaction as transaction_module
    insert = transaction_module._insert

    def insert_then_stall(con, table, rows, suffix=""):
        insert(con, table, rows, suffix)
        if table == "messages" and any(row["turn"] == turns + 1 for row in rows):
            print("INSIDE", flush=True)
            time.sleep(600)

    transaction_module._insert = insert_then_stall
    for event in turn_events(turns + 1, padding=2000):
        writer.handle(event)
    time.sleep(600)
"""


def start_writer(path: Path, session_id: str, turns: int, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), session_id, str(turns), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def counts(lab: Lab, session_id: str) -> dict[str, int]:
    row = lab.sql(
        """
        SELECT (SELECT count(*) FROM turns WHERE session_id = $s) AS turns,
               (SELECT count(*) FROM messages WHERE session_id = $s) AS messages,
               (SELECT count(*) FROM api_calls WHERE session_id = $s) AS api_calls,
               (SELECT count(*) FROM tool_calls WHERE session_id = $s) AS tool_calls,
               (SELECT count(*) FROM events WHERE session_id = $s) AS events,
               (SELECT message_count FROM sessions WHERE id = $s) AS message_count,
               (SELECT api_call_count FROM sessions WHERE id = $s) AS api_call_count
        """,
        {"s": session_id},
    )
    return {column: int(row.iloc[0][column]) for column in row.columns}


def expected(turns: int, *, ended: bool = False, padding: int = 0) -> dict[str, int]:
    """What N complete turns of the writer script leave behind (plus the session's start and end events)."""
    messages = 4 * turns + padding
    return {
        "turns": turns,
        "messages": messages,
        "api_calls": turns,
        "tool_calls": turns,
        "events": 1 + 4 * turns + messages + int(ended),
        "message_count": messages,
        "api_call_count": turns,
    }


@pytest.mark.parametrize("mode", ["complete", "back-to-back"])
def test_two_writer_processes_and_a_polling_reader_lose_nothing(tmp_path, mode):
    path, turns = tmp_path / "lab.duckdb", 25
    writers = [start_writer(path, session_id, turns, mode) for session_id in ("alpha", "beta")]
    lab, polls = Lab(path, lock_timeout=60), 0
    while any(process.poll() is None for process in writers):
        if path.exists():
            lab.sessions()  # raises if a read ever fails
            polls += 1
        time.sleep(0.01)
    for process in writers:
        out, err = process.communicate()
        assert process.returncode == 0, err
        assert out.strip() == "DONE"
    assert polls > 0
    for session_id in ("alpha", "beta"):
        assert counts(lab, session_id) == expected(turns, ended=True)
    sessions = lab.sessions().set_index("id")
    assert set(sessions.index) == {"alpha", "beta"} and set(sessions["end_reason"]) == {"done"}


def test_a_new_lab_file_appears_only_once_its_schema_is_written(tmp_path, monkeypatch):
    """A reader polling for the file (as above) must never find one DuckDB is still creating: DuckDB refuses
    a half-written file as "not a valid DuckDB database file" rather than as locked."""
    path, seen = tmp_path / "lab.duckdb", []
    real = schema.ensure_schema

    def spying(con, *args, **kwargs):
        seen.append(path.exists())
        return real(con, *args, **kwargs)

    monkeypatch.setattr(schema, "ensure_schema", spying)
    with schema.open_lab_file(path, read_only=False, timeout=5):
        pass
    assert seen[0] is False
    assert Lab(path).sessions().empty
    assert [p.name for p in tmp_path.iterdir()] == ["lab.duckdb"]  # the temporary file is gone


def test_without_hard_links_the_lab_is_made_in_place(tmp_path, monkeypatch):
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted")

    path = tmp_path / "lab.duckdb"
    monkeypatch.setattr(schema.os, "link", no_links)
    with schema.open_lab_file(path, read_only=False, timeout=5) as con:
        schema.ensure_schema(con)
    assert Lab(path).sessions().empty
    assert [p.name for p in tmp_path.iterdir()] == ["lab.duckdb"]


def test_two_processes_creating_one_lab_both_use_the_first_file(tmp_path):
    path = tmp_path / "lab.duckdb"
    writers = [start_writer(path, session_id, 3, "complete") for session_id in ("alpha", "beta")]
    for process in writers:
        out, err = process.communicate()
        assert process.returncode == 0, err
    assert set(Lab(path).sessions()["id"]) == {"alpha", "beta"}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".pending")) == ["lab.duckdb"]


def killed_writer(path, turns: int, mode: str) -> Lab:
    """A writer process that reports READY half-way through turn ``turns + 1``, killed there; the lab it
    left once the next writer has taken over its pending rows."""
    process = start_writer(path, "victim", turns, mode)
    try:
        assert process.stdout.readline().strip() == "READY", process.stderr.read()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    StoreWriter(path).close()  # the next writer on the lab commits what the killed one left pending
    lab = Lab(path)
    assert counts(lab, "victim") == expected(turns)
    assert lab.sql("SELECT count(*) AS n FROM events WHERE turn > $t", {"t": turns})["n"].tolist() == [0]
    assert list((path.parent / (path.name + ".pending")).glob("*.jsonl")) == []
    return lab


def test_a_writer_killed_mid_turn_leaves_exactly_its_finished_turns(tmp_path):
    lab = killed_writer(tmp_path / "lab.duckdb", 5, "die")
    assert list(lab.turns("victim")["turn"]) == [1, 2, 3, 4, 5]


def test_a_writer_killed_right_after_back_to_back_turns_keeps_every_finished_turn(tmp_path):
    killed_writer(tmp_path / "lab.duckdb", 30, "die-back-to-back")


def kill_a_writer_while_the_lab_is_locked(path, mode: str) -> None:
    """Session "victim" writes 12 turns in ``mode`` while another connection holds the lab, then is killed."""
    hold = duckdb.connect(str(path))  # another process's long transaction, as far as the writer can tell
    try:
        process = start_writer(path, "victim", 12, mode)
        try:
            assert process.stdout.readline().strip() == "READY", process.stderr.read()
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    finally:
        hold.close()


def test_a_writer_killed_while_the_lab_is_locked_loses_only_the_turn_in_flight(tmp_path):
    """No commit can happen before the kill: the finished turns survive in the pending file alone."""
    path = tmp_path / "lab.duckdb"
    kill_a_writer_while_the_lab_is_locked(path, "die-back-to-back")
    assert not Lab(path).sessions()["id"].isin(["victim"]).any()  # nothing of it reached the lab
    StoreWriter(path).close()
    assert counts(Lab(path), "victim") == expected(12)


def test_a_pending_file_adopted_before_its_writer_locked_it_loses_nothing(tmp_path):
    """Under load the committing thread, adopting orphans as it starts, once met the first pending file
    between its creation and its lock, and deleted it as empty: every row went to a deleted file, and
    the kill lost the session. The writer now begins another file, which the next writer adopts."""
    path = tmp_path / "lab.duckdb"
    kill_a_writer_while_the_lab_is_locked(path, "adopted-die-back-to-back")
    StoreWriter(path).close()
    assert counts(Lab(path), "victim") == expected(12)


def test_a_script_that_never_closes_its_writer_still_writes_everything(tmp_path):
    path, turns = tmp_path / "lab.duckdb", 2
    process = start_writer(path, "tidy", turns, "exit")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    found = counts(Lab(path), "tidy")
    assert found["turns"] == turns  # the unfinished turn has no turns row...
    assert found["events"] == expected(turns)["events"] + 4  # ...but its first events were written at exit


def test_a_writer_killed_inside_a_transaction_leaves_none_of_it(tmp_path):
    path, turns = tmp_path / "lab.duckdb", 3
    process = start_writer(path, "victim", turns, "die-in-transaction")
    try:
        assert process.stdout.readline().strip() == "INSIDE", process.stderr.read()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    lab = Lab(path)
    assert counts(lab, "victim") == expected(turns)
    assert lab.sql("SELECT count(*) AS n FROM messages WHERE turn > $t", {"t": turns})["n"].tolist() == [0]
    StoreWriter(path).close()  # the interrupted transaction's turn was finished: it is in the pending file
    assert counts(lab, "victim") == expected(turns + 1, padding=2000)


def test_a_reader_thread_and_the_writer_share_a_process(tmp_path):
    """The notebook case: an agent writes while the same kernel keeps querying."""
    path = tmp_path / "lab.duckdb"
    errors: list[BaseException] = []
    done = threading.Event()

    def poll() -> None:
        lab = Lab(path)
        try:
            while not done.is_set():
                if path.exists():
                    lab.sessions()
                    lab.events(kind="session_started")
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        with StoreWriter(path) as writer:
            for index in range(40):
                writer.handle(SessionStarted(session_id=f"s{index}"))
                writer.flush()
    finally:
        done.set()
        reader.join()
    assert errors == []
    assert len(Lab(path).sessions()) == 40
