"""The lab database: schema migrations, events → rows, totals, redaction, flushing, query helpers."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from hermeslab import store
from hermeslab.core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    ErrorEvent,
    EventBus,
    MessageAdded,
    Notice,
    RecoveryEvent,
    SessionEnded,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from hermeslab.store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Lab,
    Migration,
    SchemaError,
    StoreError,
    StoreWriteError,
    StoreWriter,
    ensure_schema,
    schema_version,
)
from hermeslab.store.journal import pending_dir
from hermeslab.store.rows import REDACTION_FAILED

TABLES = {"sessions", "messages", "turns", "api_calls", "tool_calls", "compressions", "recoveries", "errors", "events",
          "exam_cache"}


class Conversation:
    """Builds the events an agent would emit, with consistent ids, seqs and parent links."""

    def __init__(self, session_id: str = "s1", *, run_id: str | None = None):
        self.session_id = session_id
        self.run_id = run_id
        self.seq = 0
        self.last_message: str | None = None

    def _base(self, turn: int) -> dict:
        return {
            "session_id": self.session_id,
            "turn": turn,
            "trace_id": f"{self.session_id}/{turn}",
            "run_id": self.run_id,
        }

    def message(self, turn: int, message: dict, tokens: int = 5) -> MessageAdded:
        self.seq += 1
        message_id = f"{self.session_id}-m{self.seq}"
        event = MessageAdded(
            **self._base(turn),
            message_id=message_id,
            parent_id=self.last_message,
            seq=self.seq,
            message=message,
            tokens=tokens,
        )
        self.last_message = message_id
        return event

    def start(self, **fields) -> SessionStarted:
        return SessionStarted(**self._base(0), **fields)

    def turn(self, turn: int, *, user: str = "read notes.txt", result: str = "the notes", final: str = "done"):
        call_id = f"call-{self.session_id}-{turn}"
        arguments = json.dumps({"path": "notes.txt"})
        base = self._base(turn)
        return [
            TurnStarted(**base, user_text=user),
            self.message(turn, {"role": "user", "content": user}),
            ApiCallStarted(**base, call_index=0, attempt=1, estimated_prompt_tokens=90, message_count=2),
            TextDelta(**base, text="thinking"),
            ApiCallFinished(
                **base,
                call_index=0,
                attempt=1,
                model="m",
                estimated_prompt_tokens=90,
                prompt_tokens=100 * turn,
                completion_tokens=7,
                cache_read_tokens=3,
                cache_write_tokens=2,
                reasoning_tokens=1,
                latency_ms=12.5,
                finish_reason="tool_calls",
            ),
            self.message(
                turn,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": arguments}}
                    ],
                },
            ),
            ToolCallStarted(**base, tool_call_id=call_id, name="read_file", arguments=arguments),
            ToolCallFinished(
                **base, tool_call_id=call_id, name="read_file", arguments=arguments, result=result, duration_ms=4.0
            ),
            self.message(turn, {"role": "tool", "tool_call_id": call_id, "content": result}),
            ApiCallFinished(
                **base,
                call_index=1,
                attempt=1,
                model="m",
                prompt_tokens=100 * turn + 20,
                completion_tokens=5,
                finish_reason="stop",
            ),
            self.message(turn, {"role": "assistant", "content": final}),
            TurnFinished(
                **base,
                status="completed",
                final_text=final,
                api_calls=2,
                prompt_tokens=200 * turn + 20,
                completion_tokens=12,
            ),
        ]


@pytest.fixture
def lab_path(tmp_path: Path) -> Path:
    return tmp_path / "lab.duckdb"


def write(path: Path, events, **writer_options) -> Lab:
    with StoreWriter(path, **writer_options) as writer:
        for event in events:
            writer.handle(event)
    return Lab(path)


def all_text(lab: Lab) -> str:
    """Every stored value of every table, as one string (to look for leaked secrets)."""
    return "\n".join(lab.sql(f"SELECT * FROM {table}").astype(str).to_csv() for table in sorted(TABLES))


def wait_for(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


# ---------------------------------------------------------------- schema


def test_fresh_database_gets_every_table_and_the_current_version():
    con = duckdb.connect()
    assert schema_version(con) == 0
    assert ensure_schema(con) == SCHEMA_VERSION
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert tables == TABLES | {"schema_version"}
    query = "SELECT column_name FROM duckdb_columns() WHERE table_name = 'messages'"
    columns = [column for (column,) in con.execute(query).fetchall()]
    assert columns[:3] == ["id", "session_id", "seq"] and {"active", "compacted", "tool_name", "run_id"} <= set(columns)
    assert ensure_schema(con) == SCHEMA_VERSION  # idempotent
    assert con.execute("SELECT count(*) FROM schema_version").fetchone() == (len(MIGRATIONS),)


def test_only_missing_migrations_are_applied():
    first = Migration(1, "one table", ("CREATE TABLE a (x INTEGER)",))
    second = Migration(2, "another", ("CREATE TABLE b (y INTEGER)",))
    con = duckdb.connect()
    assert ensure_schema(con, [first]) == 1
    con.execute("INSERT INTO a VALUES (1)")
    assert ensure_schema(con, [first, second]) == 2  # would fail if `a` were created again
    assert con.execute("SELECT * FROM a").fetchall() == [(1,)]
    assert con.execute("SELECT version FROM schema_version ORDER BY version").fetchall() == [(1,), (2,)]


def test_a_failing_migration_leaves_the_database_untouched():
    good = Migration(1, "ok", ("CREATE TABLE a (x INTEGER)",))
    bad = Migration(2, "broken", ("CREATE TABLE b (y INTEGER)", "CREATE TABLE nonsense ("))
    con = duckdb.connect()
    ensure_schema(con, [good])
    with pytest.raises(duckdb.Error):
        ensure_schema(con, [good, bad])
    assert schema_version(con) == 1
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'b'").fetchone() == (0,)


def test_a_newer_file_and_gapped_migrations_are_refused():
    con = duckdb.connect()
    ensure_schema(con, [Migration(1, "a", ()), Migration(2, "b", ())])
    with pytest.raises(SchemaError, match="newer than the 1"):
        ensure_schema(con, [Migration(1, "a", ())])
    with pytest.raises(SchemaError, match="without gaps"):
        ensure_schema(duckdb.connect(), [Migration(1, "a", ()), Migration(3, "c", ())])


# ---------------------------------------------------------------- events → rows


def full_session() -> list:
    chat = Conversation("s1", run_id="run-7")
    base = {"session_id": "s1", "turn": 1, "trace_id": "s1/1", "run_id": "run-7"}
    start = chat.start(
        model="m",
        source="notebook",
        title="first",
        system_prompt="be brief",
        config_hash="abc",
        context_length=8000,
        reason="new",
    )
    turn = chat.turn(1)
    extras = [
        CompressionEvent(
            **base,
            trigger="preflight",
            tokens_before=900,
            tokens_after=300,
            messages_before=40,
            messages_after=12,
            compress_start=2,
            compress_end=30,
            summary_tokens=150,
            duration_ms=80.0,
            details={"pruned": [3, 4], "reason": "threshold"},
        ),
        RecoveryEvent(**base, fault_class="rate_limit", action="retry", attempt=2, delay_s=1.5, outcome="recovered"),
        ErrorEvent(**base, error_class="rate_limit", message="429 slow down", status_code=429),
        Notice(**base, level="warning", text="memory is nearly full"),
    ]
    return [
        start,
        *turn[:-1],
        *extras,
        turn[-1],
        SessionEnded(session_id="s1", turn=1, run_id="run-7", end_reason="cli_close"),
    ]


def test_every_event_becomes_rows_in_its_table(lab_path):
    lab = write(lab_path, full_session())

    session = lab.sessions().iloc[0]
    assert (session["id"], session["model"], session["source"], session["title"]) == ("s1", "m", "notebook", "first")
    assert (session["system_prompt"], session["config_hash"], session["context_length"]) == ("be brief", "abc", 8000)
    assert (session["reason"], session["end_reason"], session["run_id"]) == ("new", "cli_close", "run-7")
    assert session["ended_at"] >= session["started_at"]

    messages = lab.messages("s1")
    assert list(messages["role"]) == ["user", "assistant", "tool", "assistant"]
    assert list(messages["seq"]) == [1, 2, 3, 4]
    assert messages["active"].all() and not messages["compacted"].any()
    assert set(messages["trace_id"]) == {"s1/1"} and set(messages["run_id"]) == {"run-7"}

    turns = lab.turns("s1")
    assert len(turns) == 1
    turn = turns.iloc[0]
    expected_turn = ["read notes.txt", "completed", "done", 2]
    assert turn[["user_text", "status", "final_text", "api_calls"]].tolist() == expected_turn
    assert turn["started_at"] <= turn["ended_at"]

    calls = lab.api_calls("s1")
    assert list(calls["call_index"]) == [0, 1]
    first = calls.iloc[0]
    assert (first["prompt_tokens"], first["completion_tokens"], first["cache_read_tokens"]) == (100, 7, 3)
    assert (first["latency_ms"], first["finish_reason"], bool(first["usage_estimated"])) == (12.5, "tool_calls", False)

    tools = lab.tool_calls("s1")
    assert list(tools["name"]) == ["read_file"] and tools.iloc[0]["result"] == "the notes"
    assert tools.iloc[0]["duration_ms"] == 4.0 and not tools.iloc[0]["is_error"]

    compression = lab.compressions("s1").iloc[0]
    assert compression[["trigger", "tokens_before", "tokens_after"]].tolist() == ["preflight", 900, 300]
    assert json.loads(compression["details"]) == {"pruned": [3, 4], "reason": "threshold"}

    recovery = lab.recoveries("s1").iloc[0]
    assert recovery[["fault_class", "action", "attempt", "delay_s"]].tolist() == ["rate_limit", "retry", 2, 1.5]

    error = lab.errors("s1").iloc[0]
    expected_error = ["rate_limit", "429 slow down", 429, False]
    assert error[["error_class", "message", "status_code", "fatal"]].tolist() == expected_error

    events = lab.events("s1")
    kinds = list(events["kind"])
    assert "text_delta" not in kinds
    assert kinds[0] == "session_started" and kinds[-1] == "session_ended"
    assert kinds.count("message_added") == 4 and "notice" in kinds and "api_call_started" in kinds
    notice = json.loads(events[events["kind"] == "notice"].iloc[0]["payload"])
    assert notice == {"level": "warning", "text": "memory is nearly full"}
    added = json.loads(events[events["kind"] == "message_added"].iloc[0]["payload"])
    assert added["message_id"] == "s1-m1" and added["role"] == "user" and "message" not in added


def test_session_totals_add_up_calls_messages_and_tools(lab_path):
    chat = Conversation()
    lab = write(lab_path, [chat.start(), *chat.turn(1), *chat.turn(2)])
    session = lab.sessions().iloc[0]
    assert session["api_call_count"] == 4
    assert session["input_tokens"] == (100 + 120) + (200 + 220)
    assert session["output_tokens"] == 4 * 6
    assert (session["cache_read_tokens"], session["cache_write_tokens"], session["reasoning_tokens"]) == (6, 4, 2)
    assert (session["message_count"], session["tool_call_count"]) == (8, 2)
    assert pd.isna(session["estimated_cost_usd"])


def test_messages_form_a_tree_through_parent_ids(lab_path):
    chat = Conversation()
    lab = write(lab_path, [chat.start(), *chat.turn(1), *chat.turn(2)])
    messages = lab.messages("s1").set_index("id")
    node, chain = chat.last_message, []
    while node is not None:
        chain.append(node)
        parent = messages.loc[node, "parent_id"]
        node = None if pd.isna(parent) else parent
    assert chain[::-1] == list(messages.index)


def test_list_content_and_tool_calls_round_trip_as_json(lab_path):
    chat = Conversation()
    content = [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    start, listed = chat.start(), chat.message(1, {"role": "user", "content": content})
    lab = write(lab_path, [start, listed, *chat.turn(1)])
    messages = lab.messages("s1")
    assert json.loads(messages.iloc[0]["content"]) == content
    calls = json.loads(messages.iloc[2]["tool_calls"])
    assert calls[0]["function"] == {"name": "read_file", "arguments": json.dumps({"path": "notes.txt"})}


def test_tool_results_are_named_after_the_call_they_answer(lab_path):
    chat = Conversation()
    start, turn = chat.start(), chat.turn(1)
    named = chat.message(1, {"role": "tool", "tool_call_id": "other", "name": "explicit", "content": "x"})
    unknown = chat.message(1, {"role": "tool", "tool_call_id": "never-seen", "content": "x"})
    lab = write(lab_path, [start, *turn, named, unknown])
    messages = lab.messages("s1")
    names = [None if pd.isna(name) else name for name in messages["tool_name"]]
    assert names == [None, None, "read_file", None, "explicit", None]


def test_redaction_reaches_every_stored_copy_of_a_secret(lab_path):
    secret = "sk-proj-ABCDEFGHIJKLMNOP0123456789"
    chat = Conversation()
    listed = chat.message(1, {"role": "user", "content": [{"type": "text", "text": f"key {secret}"}]})
    events = [
        chat.start(system_prompt=f"use {secret}"),
        *chat.turn(1, user=f"my key is {secret}", result=f"found {secret}", final=f"stored {secret}"),
        listed,
        ErrorEvent(session_id="s1", turn=1, error_class="auth", message=f"bad key {secret}"),
        ApiCallFinished(session_id="s1", turn=1, call_index=2, attempt=1, error_message=f"rejected {secret}",
                        finish_reason="partial", partial_text=f"so far {secret}"),
    ]
    login = {"name": "login", "arguments": json.dumps({"key": secret})}
    events.append(
        chat.message(1, {"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "function": login}]})
    )
    lab = write(lab_path, events, redact=lambda text: text.replace(secret, "[REDACTED]"))
    stored = all_text(lab)
    assert secret not in stored
    assert "my key is [REDACTED]" in stored and "found [REDACTED]" in stored
    failed = lab.sql("SELECT partial_text FROM api_calls WHERE finish_reason = 'partial'")["partial_text"].tolist()
    assert failed == ["so far [REDACTED]"]  # the text a failed call had received is kept, redacted
    assert json.loads(lab.messages("s1").iloc[-1]["tool_calls"])[0]["function"]["arguments"] == '{"key": "[REDACTED]"}'


def test_a_failing_redactor_stores_a_marker_not_the_text(lab_path, caplog):
    def redact(text: str) -> str:
        if "boom" in text:
            raise RuntimeError("redactor bug")
        return text

    chat = Conversation()
    with caplog.at_level(logging.ERROR, logger="hermeslab.store.rows"):
        lab = write(lab_path, [chat.start(), *chat.turn(1, user="boom secret")], redact=redact)
    messages = lab.messages("s1")
    assert messages.iloc[0]["content"] == REDACTION_FAILED
    assert messages.iloc[-1]["content"] == "done"
    assert "boom secret" not in all_text(lab)
    assert "redaction failed" in caplog.text


def test_lone_surrogates_are_stored_as_replacement_characters(lab_path):
    chat = Conversation()
    lab = write(lab_path, [chat.start(), chat.message(1, {"role": "user", "content": "bad \ud83d half"})])
    assert lab.messages("s1").iloc[0]["content"] == "bad \ufffd half"


def test_events_of_an_unstarted_session_still_get_a_session_row(lab_path):
    chat = Conversation("orphan")
    lab = write(lab_path, chat.turn(1))
    session = lab.sessions().iloc[0]
    assert session["id"] == "orphan" and session["api_call_count"] == 2 and session["message_count"] == 4
    assert pd.notna(session["started_at"])


def test_a_restarted_session_is_reopened_and_keeps_its_counts(lab_path):
    chat = Conversation()
    with StoreWriter(lab_path) as writer:
        for event in [chat.start(model="m"), *chat.turn(1), SessionEnded(session_id="s1", end_reason="cli_close")]:
            writer.handle(event)
        writer.flush()
        assert Lab(lab_path).sessions().iloc[0]["end_reason"] == "cli_close"
        for event in [chat.start(model="other", reason="resume"), *chat.turn(2)]:
            writer.handle(event)
        writer.handle(SessionEnded(session_id="s1", end_reason="new_session"))
        writer.handle(SessionEnded(session_id="s1", end_reason="stale"))
    sessions = Lab(lab_path).sessions()
    assert len(sessions) == 1
    session = sessions.iloc[0]
    assert (session["model"], session["reason"], session["end_reason"]) == ("m", "new", "new_session")
    assert session["api_call_count"] == 4 and session["message_count"] == 8


def test_a_redelivered_message_is_stored_once(lab_path):
    chat = Conversation()
    first = chat.message(1, {"role": "user", "content": "hi"})
    with StoreWriter(lab_path) as writer:
        writer.handle(chat.start())
        writer.handle(first)
        writer.flush()
        writer.handle(first)
        writer.handle(chat.message(1, {"role": "assistant", "content": "hello"}))
    messages = Lab(lab_path).messages("s1")
    assert list(messages["content"]) == ["hi", "hello"]


def test_an_event_that_cannot_be_stored_is_skipped_and_logged(lab_path, caplog):
    chat = Conversation()
    broken = ApiCallFinished(session_id="s1", turn=1, call_index=0, attempt=1, prompt_tokens="lots")
    with caplog.at_level(logging.ERROR, logger="hermeslab.store.writer"):
        lab = write(lab_path, [chat.start(), broken, *chat.turn(1)])
    assert len(lab.api_calls("s1")) == 2
    assert "api_call_finished event of session s1 cannot be stored" in caplog.text


def test_handle_rejects_what_it_cannot_store(lab_path):
    writer = StoreWriter(lab_path)
    with pytest.raises(TypeError, match="expects a hermeslab Event, got dict"):
        writer.handle({"kind": "turn_started"})
    with pytest.raises(ValueError, match="without a session_id"):
        writer.handle(TurnStarted(session_id=""))
    with pytest.raises(TypeError, match="message must be a dict"):
        writer.handle(MessageAdded(session_id="s1", message_id="m", parent_id=None, seq=1, message="hi"))
    with pytest.raises(ValueError, match="non-empty message_id"):
        writer.handle(MessageAdded(session_id="s1", message_id="", parent_id=None, seq=1, message={}))
    writer.close()
    with pytest.raises(StoreError, match="closed"):
        writer.handle(TurnStarted(session_id="s1"))
    with pytest.raises(ValueError, match="lock_timeout"):
        StoreWriter(lab_path, lock_timeout=0)
    with pytest.raises(ValueError, match="max_commit_lag"):
        StoreWriter(lab_path, max_commit_lag=-1)
    with pytest.raises(TypeError, match="redact"):
        StoreWriter(lab_path, redact="yes")


def test_the_writer_snapshots_messages_the_caller_keeps_changing(lab_path):
    chat = Conversation()
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "content": "v1", "tool_calls": [call]}
    hold = duckdb.connect(str(lab_path))  # keeps the writer from writing until we change the message
    writer = StoreWriter(lab_path)
    writer.handle(chat.start())
    writer.handle(chat.message(1, message))
    message["content"] = "v2"
    message["tool_calls"][0]["function"]["arguments"] = '{"changed": true}'
    hold.close()
    writer.close()
    stored = Lab(lab_path).messages("s1").iloc[0]
    assert stored["content"] == "v1"
    assert json.loads(stored["tool_calls"])[0]["function"]["arguments"] == "{}"


# ---------------------------------------------------------------- flushing


def test_a_finished_turn_is_flushed_in_the_background(lab_path):
    chat = Conversation()
    bus = EventBus()
    writer = StoreWriter(lab_path)
    writer.attach(bus)
    for event in [chat.start(), *chat.turn(1)]:
        bus.publish(event)
    lab = Lab(lab_path)
    assert wait_for(lambda: lab_path.exists() and len(lab.turns("s1")) == 1)  # no flush() called
    assert len(lab.messages("s1")) == 4
    writer.close()
    bus.publish(TurnStarted(session_id="s1", turn=9))  # unsubscribed: nothing raised, nothing queued
    assert writer.pending == 0


def test_an_automatic_flush_stops_at_the_end_of_the_turn(lab_path):
    chat = Conversation()
    writer = StoreWriter(lab_path)
    for event in [chat.start(), *chat.turn(1), *chat.turn(2)[:4]]:
        writer.handle(event)
    lab = Lab(lab_path)
    assert wait_for(lambda: lab_path.exists() and len(lab.turns("s1")) == 1)
    assert lab.sql("SELECT count(*) AS n FROM events WHERE turn = 2")["n"].tolist() == [0]  # turn 2 is in flight
    writer.close()
    assert lab.sql("SELECT count(*) AS n FROM events WHERE turn = 2")["n"].tolist() == [3]  # TextDelta is not stored


def test_handle_never_waits_for_the_database(lab_path):
    chat = Conversation()
    writer = StoreWriter(lab_path, lock_timeout=60)
    hold = duckdb.connect(str(lab_path))  # the file is busy for as long as we hold it
    events = [chat.start(), *chat.turn(1), *chat.turn(2)]
    publisher = threading.Thread(target=lambda: [writer.handle(event) for event in events])
    publisher.start()
    publisher.join(timeout=10)
    assert not publisher.is_alive()  # every handle() returned while the file stayed locked
    [pending] = pending_dir(lab_path).glob("*.jsonl")
    assert pending.read_text().count("turn_finished") == 2  # both turns are safe from a kill
    hold.close()
    writer.flush()
    lab = Lab(lab_path)
    assert len(lab.turns("s1")) == 2 and len(lab.messages("s1")) == 8
    writer.close()
    assert not pending_dir(lab_path).exists()  # everything committed: the pending file and its folder are gone


@pytest.mark.parametrize("durable", [True, False])
def test_with_durable_turns_a_turn_ends_only_once_its_rows_are_in_the_pending_file(lab_path, durable):
    chat = Conversation()
    gate = threading.Event()

    def redact(text: str) -> str:
        if text == "slow":
            gate.wait(30)  # building turn 1's rows takes until the gate opens
        return text

    writer = StoreWriter(lab_path, redact=redact, lock_timeout=60, durable_turns=durable)
    writer.handle(chat.start())
    writer.flush()
    publisher = threading.Thread(target=lambda: [writer.handle(event) for event in chat.turn(1, final="slow")])
    publisher.start()
    publisher.join(timeout=0.5)
    assert publisher.is_alive() is durable  # durable: the turn's end waits for its rows, built on this thread
    gate.set()
    publisher.join(timeout=30)
    assert not publisher.is_alive()
    if durable:  # the turn is safe from a kill: in the pending file, or (emptied after its commit) in the lab
        [pending] = pending_dir(lab_path).glob("*.jsonl")
        assert "turn_finished" in pending.read_text() or len(Lab(lab_path).turns("s1")) == 1
    assert pending_dir(lab_path).is_dir() is durable  # without durable turns no pending file is written
    writer.close()
    assert len(Lab(lab_path).turns("s1")) == 1 and not pending_dir(lab_path).exists()


def test_with_no_commit_lag_allowed_a_new_turn_waits_until_the_previous_turn_is_committed(lab_path):
    chat = Conversation()
    writer = StoreWriter(lab_path, lock_timeout=60, max_commit_lag=0)
    writer.handle(chat.start())
    writer.flush()
    hold = duckdb.connect(str(lab_path))
    second_turn = chat.turn(2)
    for event in chat.turn(1):
        writer.handle(event)
    publisher = threading.Thread(target=lambda: [writer.handle(event) for event in second_turn])
    publisher.start()
    publisher.join(timeout=1.0)
    assert publisher.is_alive()  # turn 2 cannot start while turn 1 is still unwritten
    hold.close()
    publisher.join(timeout=30)
    assert not publisher.is_alive()
    assert len(Lab(lab_path).turns("s1")) >= 1  # turn 1 was committed before turn 2 went on
    writer.close()
    assert len(Lab(lab_path).turns("s1")) == 2


def test_a_new_turn_waits_only_for_turns_that_ended_longer_ago_than_the_commit_lag(lab_path):
    chat = Conversation()
    writer = StoreWriter(lab_path, lock_timeout=60, max_commit_lag=1.0)
    writer.handle(chat.start())
    writer.flush()
    hold = duckdb.connect(str(lab_path))
    try:
        for event in chat.turn(1):
            writer.handle(event)
        back_to_back = threading.Thread(target=lambda: [writer.handle(event) for event in chat.turn(2)])
        back_to_back.start()
        back_to_back.join(timeout=0.8)
        assert not back_to_back.is_alive()  # turn 1 ended just now: turn 2 went on while it was unwritten
        time.sleep(1.1)
        later = threading.Thread(target=lambda: [writer.handle(event) for event in chat.turn(3)])
        later.start()
        later.join(timeout=1.0)
        assert later.is_alive()  # turns 1 and 2 ended over a second ago and are still unwritten: turn 3 waits
    finally:
        hold.close()
    later.join(timeout=30)
    assert not later.is_alive()
    assert len(Lab(lab_path).turns("s1")) >= 2  # both were committed before turn 3 went on
    writer.close()
    assert len(Lab(lab_path).turns("s1")) == 3


def test_the_writer_reports_each_commit_and_how_long_each_turn_waited_for_it(lab_path):
    chat = Conversation()
    with StoreWriter(lab_path) as writer:
        for event in [chat.start(), *chat.turn(1), *chat.turn(2), *chat.turn(3)]:
            writer.handle(event)
        writer.flush()
        commits, lags, pending = writer.commit_latencies_ms, writer.commit_lags_ms, writer.pending_lags_ms
    assert 1 <= len(commits) <= 4 and all(ms > 0 for ms in commits)  # back-to-back turns may share a commit
    assert len(lags) == 4 and all(ms > 0 for ms in lags)  # the session's start and three turn ends
    assert len(pending) == 4 and all(0 < safe <= committed for safe, committed in zip(pending, lags))


def test_a_failed_flush_keeps_the_rows_for_the_next_one(lab_path):
    chat = Conversation()
    writer = StoreWriter(lab_path, lock_timeout=0.3)
    hold = duckdb.connect(str(lab_path))
    for event in [chat.start(), *chat.turn(1)]:
        writer.handle(event)
    with pytest.raises(StoreWriteError, match="stay queued"):
        writer.flush()
    for event in chat.turn(2):
        writer.handle(event)
    hold.close()
    writer.flush()
    writer.close()
    lab = Lab(lab_path)
    assert len(lab.turns("s1")) == 2 and len(lab.messages("s1")) == 8 and len(lab.api_calls("s1")) == 4
    session = lab.sessions().iloc[0]
    assert session["api_call_count"] == 4 and session["message_count"] == 8  # counted once, not per attempt


def test_close_says_so_when_rows_could_not_be_written(lab_path):
    chat = Conversation()
    writer = StoreWriter(lab_path, lock_timeout=0.2)
    hold = duckdb.connect(str(lab_path))
    for event in [chat.start(), *chat.turn(1)]:
        writer.handle(event)
    try:
        with pytest.raises(StoreWriteError, match=r"\d+ rows could not be written to .*lab.duckdb; they stay in"):
            writer.close()
    finally:
        hold.close()
    StoreWriter(lab_path).close()  # the next writer commits what the last one could not
    assert len(Lab(lab_path).turns("s1")) == 1


def test_the_writer_creates_the_default_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMESLAB_HOME", raising=False)
    assert store.default_lab_path() == tmp_path / ".hermeslab" / "lab.duckdb"
    chat = Conversation()
    write(store.default_lab_path(), [chat.start()])
    assert (tmp_path / ".hermeslab" / "lab.duckdb").is_file()
    assert store.open().sessions()["id"].tolist() == ["s1"]


# ---------------------------------------------------------------- reading


def test_a_missing_file_reads_as_an_empty_lab_and_is_not_created(lab_path):
    lab = store.open(lab_path)
    assert isinstance(lab, Lab) and lab.path == lab_path
    frames = {
        "sessions": lab.sessions(),
        "messages": lab.messages("s1"),
        "api_calls": lab.api_calls(),
        "tool_calls": lab.tool_calls("s1"),
        "turns": lab.turns(),
        "compressions": lab.compressions(),
        "recoveries": lab.recoveries(),
        "errors": lab.errors(),
        "events": lab.events(kind="notice"),
    }
    expected = duckdb.connect()
    ensure_schema(expected)
    for table, frame in frames.items():
        assert frame.empty
        columns = expected.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ?", [table]).fetchall()
        assert list(frame.columns) == [column for (column,) in columns]
    assert list(lab.turn_usage("s1").columns) == [
        "turn",
        "status",
        "api_calls",
        "tool_calls",
        "last_prompt_tokens",
        "prompt_tokens",
        "completion_tokens",
        "estimated_calls",
    ]
    assert lab.lineage("s1") == []
    assert not lab_path.exists()


def test_turn_usage_has_one_row_per_turn(lab_path):
    chat = Conversation()
    failed_last_call = ApiCallFinished(session_id="s1", turn=2, call_index=2, attempt=1, error_class="timeout")
    lab = write(lab_path, [chat.start(), *chat.turn(1), *chat.turn(2)[:-1], failed_last_call, chat.turn(2)[-1]])
    usage = lab.turn_usage("s1")
    columns = ["turn", "status", "api_calls", "tool_calls", "last_prompt_tokens", "prompt_tokens", "completion_tokens"]
    assert usage[columns].values.tolist() == [
        [1, "completed", 2, 1, 120, 220, 12],
        [2, "completed", 3, 1, 220, 420, 12],
    ]


def test_lineage_walks_parents_from_the_root_and_survives_cycles(lab_path):
    events = [
        SessionStarted(session_id="root"),
        SessionStarted(session_id="child", parent_session_id="root", reason="compression"),
        SessionStarted(session_id="grandchild", parent_session_id="child", reason="compression"),
        SessionStarted(session_id="stray", parent_session_id="gone"),
        SessionStarted(session_id="a", parent_session_id="b"),
        SessionStarted(session_id="b", parent_session_id="a"),
    ]
    lab = write(lab_path, events)
    assert lab.lineage("grandchild") == ["root", "child", "grandchild"]
    assert lab.lineage("root") == ["root"]
    assert lab.lineage("stray") == ["stray"]
    assert lab.lineage("a") == ["b", "a"]
    assert lab.lineage("nobody") == []


def test_events_filter_by_session_and_kind_in_order(lab_path):
    first, second = Conversation("s1"), Conversation("s2")
    lab = write(lab_path, [first.start(), second.start(), *first.turn(1), *second.turn(1)])
    finished = lab.events(kind="turn_finished")
    assert list(finished["session_id"]) == ["s1", "s2"]
    mine = lab.events("s2")
    assert set(mine["session_id"]) == {"s2"} and mine["event_seq"].is_monotonic_increasing
    assert list(lab.events("s2", kind="tool_call_finished")["turn"]) == [1]


def test_sql_takes_parameters_and_cannot_write(lab_path):
    chat = Conversation()
    lab = write(lab_path, [chat.start(), *chat.turn(1)])
    assert lab.sql("SELECT count(*) AS n FROM messages WHERE role = ?", ["tool"])["n"].tolist() == [1]
    assert lab.sql("SELECT count(*) AS n FROM messages WHERE role = $role", {"role": "user"})["n"].tolist() == [1]
    with pytest.raises(duckdb.Error, match="read-only"):
        lab.sql("DELETE FROM messages")
    with pytest.raises(ValueError, match="non-empty SQL"):
        lab.sql("  ")
    with pytest.raises(ValueError, match="session_id must be a non-empty string"):
        lab.messages(None)


def test_the_lab_refuses_a_directory_and_a_newer_file(tmp_path, lab_path):
    with pytest.raises(StoreError, match="is a directory"):
        Lab(tmp_path)
    con = duckdb.connect(str(lab_path))
    ensure_schema(con, [*MIGRATIONS, Migration(SCHEMA_VERSION + 1, "from the future", ())])
    con.close()
    with pytest.raises(SchemaError, match="upgrade hermeslab"):
        Lab(lab_path).sessions()


def test_the_lab_brings_an_empty_duckdb_file_up_to_date(lab_path):
    duckdb.connect(str(lab_path)).close()
    lab = Lab(lab_path)
    assert lab.sessions().empty
    con = duckdb.connect(str(lab_path), read_only=True)
    assert schema_version(con) == SCHEMA_VERSION
    con.close()


def test_a_turn_moved_to_a_child_session_by_a_compression_reads_continued(lab_path):
    parent, child, lone = Conversation("parent"), Conversation("child"), Conversation("lone")
    cut = parent.turn(2)
    rotated = child.turn(2)
    events = [parent.start(), *parent.turn(1), *cut[:5],
              child.start(parent_session_id="parent", reason="compression"), *rotated[4:], *child.turn(3),
              lone.start(), *lone.turn(1)[:5]]
    lab = write(lab_path, events)
    # A turn that never finished and went nowhere (a crash) stays without a status.
    assert lab.turn_usage("lone")["status"].isna().all()
    assert lab.turn_usage("parent")[["turn", "status", "api_calls"]].values.tolist() == [
        [1, "completed", 2], [2, "continued", 1]]
    assert lab.turn_usage("child")[["turn", "status"]].values.tolist() == [[2, "completed"], [3, "completed"]]
