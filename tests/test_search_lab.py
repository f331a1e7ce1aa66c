"""The search index beside a lab: indexed on commit, caught up from the lab, rebuilt from it; the tool."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from hermeslab.core.config import Config
from hermeslab.core.events import MessageAdded, SessionStarted, TurnFinished
from hermeslab.runtime import Runtime
from hermeslab.search.labsync import LabSearch, index_path_for
from hermeslab.store import StoreWriter
from hermeslab.store.schema import open_lab_file
from hermeslab.tools.session_search import format_result, session_search_tool


def turn_events(session: str, texts: list[str], *, parent: str | None = None, title: str | None = None,
                first_seq: int = 0) -> list:
    events = [SessionStarted(session_id=session, parent_session_id=parent, title=title)]
    for offset, text in enumerate(texts):
        seq = first_seq + offset
        role = "user" if seq % 2 == 0 else "assistant"
        events.append(MessageAdded(session_id=session, turn=1, message_id=f"{session}-{seq}", parent_id=None,
                                   seq=seq, message={"role": role, "content": text}))
    events.append(TurnFinished(session_id=session, turn=1))
    return events


def write(lab, events, *, search: LabSearch | None = None, redact=None) -> None:
    with StoreWriter(lab, redact=redact) as writer:
        if search is not None:
            writer.on_commit(search.record)
        for event in events:
            writer.handle(event)


def test_a_committed_message_is_searchable_without_touching_the_lab(tmp_path):
    lab = tmp_path / "lab.duckdb"
    search = LabSearch(lab)
    write(lab, turn_events("a", ["where is the platypus report", "in reports/platypus.md"], title="Platypus"),
          search=search)
    assert index_path_for(lab) == tmp_path / "lab.search.sqlite"
    hits = search.index.search("platypus").hits  # the index alone: no catch-up from the lab
    assert [(hit.root_session_id, hit.title) for hit in hits] == [("a", "Platypus")]
    assert search.catch_up() == 0  # everything the lab holds is indexed already


def test_the_index_holds_the_redacted_text(tmp_path):
    lab = tmp_path / "lab.duckdb"
    search = LabSearch(lab)
    write(lab, turn_events("a", ["the token is HUNTER2SECRET"]), search=search,
          redact=lambda text: text.replace("HUNTER2SECRET", "[redacted]"))
    assert search.search("HUNTER2SECRET").hits == []
    assert search.search("token").hits[0].snippet.endswith("[redacted]")


def test_rows_written_without_the_hook_are_caught_up_from_the_lab(tmp_path):
    lab = tmp_path / "lab.duckdb"
    search = LabSearch(lab)
    write(lab, turn_events("a", ["hooked message about kelp"]), search=search)
    write(lab, turn_events("b", ["unhooked message about kelp", "and more kelp"], parent="a"))
    assert search.index.search("kelp").hits[0].session_id == "a"
    result = search.search("kelp", limit=5)  # catches up first: b is a's child, so one conversation
    assert [(hit.root_session_id, hit.session_id) for hit in result.hits] == [("a", "b")]
    assert search.index.stats()["messages"] == 3
    assert search.catch_up(force=True) == 0


def test_a_second_process_writing_the_lab_becomes_searchable(tmp_path):
    lab = tmp_path / "lab.duckdb"
    search = LabSearch(lab)
    write(lab, turn_events("local", ["local words"]), search=search)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from test_search_lab import turn_events, write
        from hermeslab.search.labsync import LabSearch
        write({str(lab)!r}, turn_events("hooked", ["remote narwhal with hook"]), search=LabSearch({str(lab)!r}))
        write({str(lab)!r}, turn_events("plain", ["remote narwhal without hook"]))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=180)
    assert [hit.session_id for hit in search.index.search("narwhal", limit=5).hits] == ["hooked"]
    assert {hit.session_id for hit in search.search("narwhal", limit=5).hits} == {"hooked", "plain"}


def test_a_busy_lab_does_not_block_the_search(tmp_path):
    lab = tmp_path / "lab.duckdb"
    write(lab, turn_events("a", ["gecko notes"]))
    search = LabSearch(lab, lock_timeout=0.2)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with open_lab_file(lab, read_only=False, timeout=5):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        assert search.search("gecko").hits == []  # the lab is busy: the index answers as it is
    finally:
        release.set()
        holder.join()
    assert [hit.session_id for hit in search.search("gecko").hits] == ["a"]


def test_rebuild_from_the_lab_gives_the_same_answers(tmp_path):
    lab = tmp_path / "lab.duckdb"
    search = LabSearch(lab)
    write(lab, turn_events("a", ["alpha beta gamma", "beta beta delta"], title="first"), search=search)
    write(lab, turn_events("b", ["gamma epsilon", "beta"], parent="a", first_seq=2), search=search)
    write(lab, turn_events("c", ["delta zeta", "unrelated words"]), search=search)
    queries = ["beta", "gamma delta", "zeta", '"beta delta"', "words"]
    before = {q: [(h.root_session_id, h.message_id, round(h.score, 9)) for h in search.search(q, limit=5).hits]
              for q in queries}
    assert search.rebuild() == 6
    after = {q: [(h.root_session_id, h.message_id, round(h.score, 9)) for h in search.search(q, limit=5).hits]
             for q in queries}
    assert after == before
    assert search.index.lab_rowid >= 5


def test_the_runtime_registers_the_tool_and_leaves_out_the_current_conversation(tmp_path):
    config = Config().with_overrides({"store.path": str(tmp_path / "lab.duckdb"), "tools.workspace": str(tmp_path)})
    with Runtime(config) as runtime:
        assert "session_search" in runtime.tools
        runtime.agent.chat("please list the files for the aardvark audit")
        first = runtime.agent.session.id
        tool = runtime.tools.get("session_search")
        runtime.writer.flush()
        assert tool.handler({"query": "aardvark"}).startswith("No earlier conversation")  # it is the current one
        runtime.agent.new_session()
        answer = tool.handler({"query": "aardvark audit", "limit": 2})
        assert f"session {first}" in answer and ">>>aardvark<<<" in answer
        assert tool.read_only and tool.idempotent
    disabled = Config().with_overrides({"store.enabled": False, "tools.workspace": str(tmp_path)})
    with Runtime(disabled) as runtime:
        assert "session_search" not in runtime.tools


def test_the_tool_reports_an_empty_query_and_formats_hits(tmp_path):
    from hermeslab.tools import ToolError

    lab = tmp_path / "lab.duckdb"
    search = LabSearch(lab)
    write(lab, turn_events("a", ["first message", "the mongoose answer", "last message"], title="Mongoose"),
          search=search)
    tool = session_search_tool(search, lambda: None)
    with pytest.raises(ToolError, match="at least one word"):
        tool.handler({"query": "   "})
    text = tool.handler({"query": "mongoose"})
    lines = text.splitlines()
    assert lines[0] == "1 earlier conversation(s) match 'mongoose':"
    assert lines[1].startswith("1. session a — Mongoose — ")
    assert lines[2] == "   before [user]: first message"
    assert lines[3] == "   match [assistant]: the >>>mongoose<<< answer"
    assert lines[4] == "   after [user]: last message"
    assert format_result(search.search("nothing here")) == "No earlier conversation matches 'nothing here'."
