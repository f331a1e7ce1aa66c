"""A failed turn's unanswered input leaves the active history in the lab too; an older lab learns its totals."""

from __future__ import annotations

import duckdb

from hermeslab.agent import Agent
from hermeslab.core.config import Config
from hermeslab.core.events import EventBus
from hermeslab.core.provider import ProviderError, StreamDelta
from hermeslab.store import StoreWriter
from hermeslab.store import open as open_lab
from hermeslab.store.schema import MIGRATIONS, SCHEMA_VERSION, ensure_schema


class Refusing:
    name = "refusing"

    def complete(self, request):
        raise ProviderError("invalid api key", status=401, error_type="invalid_api_key")

    def stream(self, request):
        raise ProviderError("invalid api key", status=401, error_type="invalid_api_key")
        yield  # a generator, as a streaming provider is


def test_a_failed_turns_user_message_is_kept_but_no_longer_active(tmp_path):
    bus = EventBus()
    path = tmp_path / "lab.duckdb"
    with StoreWriter(path) as writer:
        writer.attach(bus)
        agent = Agent(Refusing(), config=Config(), bus=bus)
        result = agent.chat("are you there?")
        agent.close()
    assert result.status == "failed" and agent.messages[-1]["role"] == "system"
    lab = open_lab(path)
    rows = lab.messages(agent.session.id)
    user = rows[rows["role"] == "user"]
    assert list(user["content"]) == ["are you there?"]
    assert not user["active"].iloc[0] and not user["compacted"].iloc[0]
    assert [m["role"] for m in lab.history(agent.session.id)] == ["system"]  # a resume does not send it again


def test_an_older_lab_gets_its_all_call_totals_from_its_rows():
    con = duckdb.connect()
    ensure_schema(con, MIGRATIONS[:3])
    con.execute("INSERT INTO sessions (id, input_tokens) VALUES ('s', 100)")
    con.execute("INSERT INTO api_calls (session_id, purpose, prompt_tokens, completion_tokens) VALUES "
                "('s', 'turn', 100, 10), ('s', 'review', 40, 4), ('s', 'review', NULL, NULL)")
    assert ensure_schema(con) == SCHEMA_VERSION
    assert con.execute("SELECT all_api_call_count, all_input_tokens, all_output_tokens, input_tokens "
                       "FROM sessions").fetchone() == (3, 140, 14, 100)
    assert "server_model" in {c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'api_calls'").fetchall()}


class CutOff:
    """Streams the start of an answer, then the connection breaks (a server killed mid-answer)."""

    name = "cut-off"

    def complete(self, request):
        raise ProviderError("connection refused", error_type="APIConnectionError")

    def stream(self, request):
        yield StreamDelta(text="The first half of an answer ")
        raise ProviderError("the stream was interrupted after 28 characters: Connection error.",
                            body={"partial_text": "The first half of an answer ", "partial_tool_calls": []},
                            error_type="stream_interrupted")


def test_what_streamed_before_a_failure_is_kept_as_an_interrupted_answer(tmp_path):
    bus = EventBus()
    path = tmp_path / "lab.duckdb"
    config = Config().with_overrides({"agent.api_max_retries": 1})
    with StoreWriter(path) as writer:
        writer.attach(bus)
        agent = Agent(CutOff(), config=config, bus=bus, sleep=lambda seconds: None)
        result = agent.chat("tell me everything")
        agent.close()
    assert result.status == "failed" and result.usage.completion_tokens > 0
    assert agent.messages[-1] == {"role": "assistant", "content": "The first half of an answer ", "_interrupted": True}
    lab = open_lab(path)
    rows = lab.messages(agent.session.id)
    answer = rows[rows["role"] == "assistant"]
    assert list(answer["content"]) == ["The first half of an answer "] and answer["interrupted"].iloc[0]
    assert rows[rows["role"] == "user"]["active"].all()  # answered, if only in part: the question stays
    turn = lab.turns(agent.session.id).iloc[0]
    calls = lab.api_calls(agent.session.id)
    assert turn["completion_tokens"] == result.usage.completion_tokens
    assert calls["partial_text"].notna().any()
