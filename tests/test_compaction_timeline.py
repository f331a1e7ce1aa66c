"""The compaction timeline: each message's fate, the timeline's counters, and the lab and a replay agreeing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.context.assemble import merge_summary, summary_text
from hermeslab.context.fates import DROPPED, FATES, KEPT, PRUNED, SUMMARISED, message_fates
from hermeslab.core.config import Config
from hermeslab.eval.recording import read_recordings
from hermeslab.eval.replay import replay
from hermeslab.notebook.timeline import show_timeline, timeline_html
from hermeslab.notebook.timeline_data import (
    ADDED,
    SUMMARY,
    CompactionView,
    MessageLine,
    Timeline,
    after_fates,
    compaction_view,
    preview,
)
from hermeslab.store import open as open_lab
from test_notebook_magics import shell  # noqa: F401  (the IPython shell with hermeslab loaded)

RECORDINGS = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"
SUMMARY_MESSAGE = {"role": "user", "content": summary_text("Earlier turns were summarised: the parser works.")}


def conversation(size: int) -> list[dict]:
    """A valid-looking history of distinct messages: system, then user / assistant-with-call / tool triples."""
    messages = [{"role": "system", "content": "You fix bugs."}]
    for n in range(size):
        messages += [{"role": "user", "content": f"request {n}"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{n}", "content": f"output {n} " + "x" * 200}]
    return messages


@st.composite
def compactions(draw):
    """A history, a middle range taken out, some tool outputs before it stubbed, and whether a summary replaced it."""
    messages = conversation(draw(st.integers(1, 8)))
    start = draw(st.integers(1, len(messages)))
    end = draw(st.integers(start, len(messages)))
    stubbed = draw(st.sets(st.sampled_from([i for i, m in enumerate(messages) if m["role"] == "tool"])))
    summarised = draw(st.booleans())
    return messages, start, end, stubbed, summarised


def compacted(messages, start, end, stubbed, summarised):
    after = [({**m, "content": "[old tool output cleared]"} if i in stubbed else m)
             for i, m in enumerate(messages) if not start <= i < end]
    if summarised:
        after.insert(start, dict(SUMMARY_MESSAGE))
    return after


@settings(max_examples=150, deadline=None)
@given(compactions())
def test_every_message_gets_the_fate_the_compaction_gave_it(case):
    messages, start, end, stubbed, summarised = case
    after = compacted(*case)
    fates = message_fates(messages, after, summarised=summarised)
    assert len(fates) == len(messages) and set(fates) <= set(FATES)
    for index, fate in enumerate(fates):
        if start <= index < end:
            assert fate == (SUMMARISED if summarised else DROPPED), (index, fates)
        else:
            assert fate == (PRUNED if index in stubbed else KEPT), (index, fates)


@settings(max_examples=100, deadline=None)
@given(compactions(), st.data())
def test_messages_named_as_dropped_are_dropped_even_beside_a_summary(case, data):
    messages, start, end, stubbed, _ = case
    after = compacted(messages, start, end, stubbed, True)
    named = data.draw(st.sets(st.integers(start, max(start, end - 1)))) if end > start else set()
    fates = message_fates(messages, after, summarised=True, dropped_indices=named)
    assert [i for i, f in enumerate(fates) if f == DROPPED] == sorted(named)


@settings(max_examples=100, deadline=None)
@given(compactions())
def test_the_after_side_marks_the_summary_and_keeps_the_rest(case):
    messages, start, end, stubbed, summarised = case
    after = compacted(*case)
    read = after_fates(messages, after)
    assert read.count(SUMMARY) == int(summarised)
    assert ADDED not in read
    assert read.count(PRUNED) == sum(1 for i in stubbed if not start <= i < end)


def test_a_summary_merged_ahead_of_a_message_keeps_that_message():
    messages = conversation(3)
    own = messages[4]  # request 1
    merged = merge_summary(dict(own), SUMMARY_MESSAGE["content"])
    after = messages[:1] + [merged] + messages[5:]
    fates = message_fates(messages, after, summarised=True)
    assert fates[4] == KEPT and fates[1:4] == [SUMMARISED] * 3


def test_a_message_repeated_later_is_matched_where_it_stays():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "continue"},
                {"role": "assistant", "content": "one"}, {"role": "user", "content": "continue"},
                {"role": "assistant", "content": "two"}]
    after = messages[:1] + [dict(SUMMARY_MESSAGE)] + messages[3:]
    assert message_fates(messages, after, summarised=True) == [KEPT, SUMMARISED, SUMMARISED, KEPT, KEPT]


def test_a_preview_is_one_short_line_naming_the_tool_called():
    line = preview({"role": "assistant", "content": "Let me look\n\nat it",
                    "tool_calls": [{"id": "a", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}]})
    assert line == 'Let me look at it → read_file({"path": "x"})'
    assert len(preview({"role": "tool", "content": "y" * 500})) == 90


def view(number: int, session: str, fates: list[str], before_tokens: int, after_tokens: int) -> CompactionView:
    messages = [({"role": "tool" if n % 2 else "user", "content": f"m{n}", "tool_call_id": "t"}, 5)
                for n in range(len(fates))]
    return compaction_view(number, session_id=session, turn=number, trigger="pressure", strategy="summary",
                           mode="rotation", tokens_before=before_tokens, tokens_after=after_tokens, before=messages,
                           fates=fates, after=[], summary_text="s")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(st.sampled_from(FATES), max_size=8),
                          st.integers(0, 5_000), st.integers(0, 5_000)), max_size=6))
def test_the_sessions_counters_add_up_to_the_conversations(items):
    views = tuple(view(n + 1, session, fates, before, after) for n, (session, fates, before, after) in enumerate(items))
    timeline = Timeline(session_id="c", sessions=("a", "b", "c"), compactions=views)
    total, parts = timeline.counters(), timeline.by_session().values()
    for field in ("compactions", "tokens_reclaimed", "tool_outputs_pruned", "messages_summarised", "messages_dropped"):
        assert getattr(total, field) == sum(getattr(part, field) for part in parts)
    assert total.tokens_reclaimed == sum(max(0, before - after) for _, _, before, after in items)
    assert total.tool_outputs_pruned == sum(1 for _, fates, _, _ in items
                                            for n, fate in enumerate(fates) if fate == PRUNED and n % 2)


def test_a_view_refuses_fates_that_do_not_fit_its_messages():
    with pytest.raises(ValueError, match="2 fates for 1 messages"):
        compaction_view(1, session_id="a", turn=1, trigger="t", strategy="s", mode="m", tokens_before=1,
                        tokens_after=1, before=[({"role": "user", "content": "x"}, 1)], fates=[KEPT, KEPT],
                        after=[], summary_text=None)
    with pytest.raises(ValueError, match="unknown message fate"):
        view(1, "a", ["vanished"], 1, 1)


def test_html_escapes_message_text():
    line = MessageLine("user", "<script>alert(1)</script>", 3, KEPT)
    timeline = Timeline("s", ("s",), (CompactionView(1, "s", 1, "manual", "summary", "rotation", 10, 5, (line,), (),
                                                     "<b>summary</b>"),))
    html = timeline_html(timeline)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;summary" in html


# ---------------------------------------------------------------- a lab and a replay of the same recording


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A recording replayed at a window small enough for two compactions, logged to a lab."""
    recording = list(read_recordings(RECORDINGS))[1]
    lab_path = tmp_path_factory.mktemp("timeline") / "lab.duckdb"
    run = replay(recording, Config().with_overrides({"model.context_length": 6_000}), store=lab_path)
    return run, open_lab(lab_path)


def test_the_lab_and_the_replay_show_the_same_compactions(replayed):
    run, lab = replayed
    from_run = show_timeline(run).timeline
    from_lab = show_timeline(lab, session=run.session_ids[-1]).timeline
    assert from_lab.counters() == from_run.counters()
    assert from_lab.counters().compactions >= 2 and from_lab.counters().messages_summarised > 0
    for ours, theirs in zip(from_lab.compactions, from_run.compactions, strict=True):
        assert [line.fate for line in ours.before] == [line.fate for line in theirs.before]
        assert [line.fate for line in ours.after] == [line.fate for line in theirs.after]
        assert [line.tokens for line in ours.before] == [line.tokens for line in theirs.before]
        assert ours.summary_text and ours.summary_text == theirs.summary_text
        assert [line.fate for line in ours.after].count(SUMMARY) == 1


def test_the_lab_row_holds_each_messages_fate_by_id_and_the_summary(replayed):
    run, lab = replayed
    rows = lab.compressions()
    applied = rows[rows["mode"] != "none"]
    for row in applied.itertuples():
        fates = json.loads(row.message_fates)
        assert len(fates) == row.messages_before and set(fates.values()) <= set(FATES)
        assert all(key.startswith(row.session_id) for key in fates)
        assert row.summary_text


def test_unknown_and_uncompacted_sessions_say_so_in_one_line(replayed):
    run, lab = replayed
    with pytest.raises(ValueError, match="^no session 'nope' in .*lab.duckdb$"):
        show_timeline(lab, session="nope")
    first = run.session_ids[0]
    assert repr(show_timeline(lab, session=first)).startswith(f"session {first}: 1 compaction")
    with pytest.raises(ValueError, match="name the session"):
        show_timeline(lab)
    with pytest.raises(ValueError, match="no lab file at"):
        show_timeline(lab.path.with_name("missing.duckdb"), session=first)


def test_a_replay_without_compactions_says_so(tmp_path):
    recording = list(read_recordings(RECORDINGS))[1]
    run = replay(recording, Config().with_overrides({"model.context_length": 200_000}), fast=True)
    shown = show_timeline(run)
    assert repr(shown) == f"session {recording.id}: no compactions"
    assert "hermeslab-timeline-empty" in shown._repr_html_()


# ---------------------------------------------------------------- %hermes timeline


def test_the_magic_shows_a_logged_conversation_and_refuses_an_unknown_one(shell, tmp_path):
    from IPython.core.error import UsageError

    recording = list(read_recordings(RECORDINGS))[1]
    run = replay(recording, Config().with_overrides({"model.context_length": 6_000}), store=tmp_path / "lab.duckdb")
    shell.run_line_magic("hermes", f"timeline {run.session_ids[-1]}")
    shown = shell.display_pub.outputs[-1]["data"]
    assert shown["text/plain"].startswith(f"session {run.session_ids[-1]}: 2 compactions"), shown
    with pytest.raises(UsageError, match="^no session 'nope' in .*lab.duckdb$"):
        shell.run_line_magic("hermes", "timeline nope")
    with pytest.raises(UsageError, match=r"^usage: %hermes timeline \[session id\]"):
        shell.run_line_magic("hermes", "timeline one two")


def test_the_magic_on_a_chat_that_has_not_run_says_so(shell, capsys):
    shell.run_line_magic("hermes", "timeline")
    assert "no compactions (nothing logged yet)" in capsys.readouterr().out


def test_a_lab_without_recorded_fates_shows_the_figures_and_says_what_is_missing(replayed, tmp_path):
    import shutil

    from hermeslab.store.schema import open_lab_file

    run, lab = replayed
    older = tmp_path / "older.duckdb"
    shutil.copy(lab.path, older)
    with open_lab_file(older, read_only=False, timeout=10) as con:
        con.execute("UPDATE compressions SET message_fates = NULL, summary_text = NULL")
    shown = show_timeline(older, session=run.session_ids[-1])
    views = shown.timeline.compactions
    assert len(views) >= 2 and not any(view.fates_known or view.before or view.summary_text for view in views)
    assert shown.timeline.counters().tokens_reclaimed == show_timeline(lab, session=run.session_ids[-1]) \
        .timeline.counters().tokens_reclaimed
    assert "was not recorded (a lab written by an older hermeslab)" in shown._repr_html_()


def test_an_ab_cells_fast_replay_gives_the_timeline_of_the_logged_one(replayed):
    """An A/B cell replays fast (no events, no lab); its compactions are the logged replay's, message for message."""
    run, _ = replayed
    recording = list(read_recordings(RECORDINGS))[1]
    fast = replay(recording, Config().with_overrides({"model.context_length": 6_000}), fast=True)
    logged, quick = show_timeline(run).timeline, show_timeline(fast).timeline
    assert quick.counters() == logged.counters()
    assert [[line.fate for line in v.before] for v in quick.compactions] == \
        [[line.fate for line in v.before] for v in logged.compactions]


def test_in_place_compactions_read_their_after_side_from_the_rewritten_history(tmp_path):
    recording = list(read_recordings(RECORDINGS))[1]
    config = Config().with_overrides({"model.context_length": 6_000, "compression.in_place": True})
    run = replay(recording, config, store=tmp_path / "lab.duckdb")
    assert len(run.session_ids) == 1  # no rotation: one session, its older rows archived
    from_lab = show_timeline(open_lab(tmp_path / "lab.duckdb"), session=run.session_ids[0]).timeline
    from_run = show_timeline(run).timeline
    assert {view.mode for view in from_lab.compactions} == {"in_place"} and len(from_lab.compactions) >= 2
    assert from_lab.counters() == from_run.counters()
    for ours, theirs in zip(from_lab.compactions, from_run.compactions, strict=True):
        assert [(line.fate, line.tokens) for line in ours.after] == [(line.fate, line.tokens) for line in theirs.after]


def test_an_ab_row_s_compactions_are_those_of_its_cell_replay():
    """``cell_replay`` gives the replay behind one A/B row: as many compactions as the row counts, timeline included."""
    from hermeslab.eval.ab import cell_replay, run_ab

    config = "seed,model.context_length=6000"
    frame = run_ab(RECORDINGS, {"small": config}, executor="serial", progress=False, limit=3)
    row = frame.sort_values("compressions").iloc[-1]
    assert row["compressions"] > 0
    run = cell_replay(RECORDINGS, config, row["session_id"])
    assert len(run.compressions) == row["compressions"]
    assert show_timeline(run).timeline.counters().compactions == sum(c.changed for c in run.compressions)
    with pytest.raises(ValueError, match="no session 'nope' in these recordings"):
        cell_replay(RECORDINGS, config, "nope")
