"""An estimate is never shown as measured: from the provider's missing usage to the lab's tables and every display."""

from __future__ import annotations

import io

import duckdb
from hypothesis import given, strategies as st

from hermeslab.agent import Agent
from hermeslab.console import ConsoleTranscript
from hermeslab.context.compactor import Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.core.config import Config
from hermeslab.core.events import (
    ApiCallFinished,
    ApiCallStarted,
    CompressionEvent,
    EventBus,
    SessionStarted,
    TurnFinished,
    TurnStarted,
)
from hermeslab.core.figures import compression_sizes
from hermeslab.core.provider import ChatResponse, Usage, usage_or_estimate
from hermeslab.core.tokens import count_text
from hermeslab.notebook.budget import BudgetMeter
from hermeslab.notebook.transcript import Transcript
from hermeslab.store import Lab, StoreWriter
from hermeslab.store.schema import MIGRATIONS, SCHEMA_VERSION, ensure_schema
from hermeslab.tools import builtin_registry

from scripted_provider import ScriptedProvider

S = {"session_id": "s1", "turn": 1, "trace_id": "t1"}


def reply(content: str = "Done.", usage: Usage | None = None, reasoning: str | None = None) -> ChatResponse:
    return ChatResponse(message={"role": "assistant", "content": content}, usage=usage, reasoning=reasoning)


# ---------------------------------------------------------------- the provider's usage, or ours


def test_reported_usage_is_taken_as_it_is():
    usage = Usage(prompt_tokens=812, completion_tokens=9, cache_read_tokens=500)
    assert usage_or_estimate(reply(usage=usage), 700) == (usage, False)


def test_no_usage_or_an_all_zero_one_is_our_estimate_of_prompt_reply_and_reasoning():
    for response in (reply("one two three", reasoning="think first"),
                     reply("one two three", Usage(), reasoning="think first")):
        usage, estimated = usage_or_estimate(response, 640)
        reasoning = count_text("think first")
        assert estimated and usage.prompt_tokens == 640
        assert (usage.completion_tokens, usage.reasoning_tokens) == (count_text("one two three") + reasoning, reasoning)


def test_a_report_without_a_prompt_count_keeps_its_reply_count_and_estimates_the_prompt():
    usage, estimated = usage_or_estimate(reply(usage=Usage(completion_tokens=42, reasoning_tokens=5)), 300)
    assert estimated and (usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens) == (300, 42, 5)


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.integers(1, 50_000))
def test_a_figure_is_flagged_estimated_exactly_when_the_provider_gave_no_prompt_count(prompt, completion, estimate):
    usage, estimated = usage_or_estimate(reply(usage=Usage(prompt_tokens=prompt, completion_tokens=completion)),
                                         estimate)
    assert estimated == (prompt == 0)
    assert usage.prompt_tokens == (estimate if estimated else prompt)
    if completion:
        assert usage.completion_tokens == completion


# ---------------------------------------------------------------- the lab's tables


def call(turn: int, index: int, *, prompt: int | None, estimated: bool, purpose: str = "turn",
         **fields) -> ApiCallFinished:
    return ApiCallFinished(**{**S, "turn": turn}, call_index=index, attempt=1, prompt_tokens=prompt,
                           completion_tokens=10, usage_estimated=estimated, purpose=purpose, **fields)


def turn(number: int, calls: list[ApiCallFinished]) -> list:
    prompt = sum(c.prompt_tokens or 0 for c in calls if c.purpose == "turn")
    return [TurnStarted(**{**S, "turn": number}, user_text="hi"), *calls,
            TurnFinished(**{**S, "turn": number}, api_calls=len(calls), prompt_tokens=prompt, completion_tokens=10)]


def written(path, events) -> Lab:
    with StoreWriter(path) as writer:
        for event in events:
            writer.handle(event)
    return Lab(path)


def test_turns_and_sessions_say_how_many_of_their_calls_were_estimated(tmp_path):
    events = [SessionStarted(**S, model="m"),
              *turn(1, [call(1, 0, prompt=900, estimated=False)]),
              *turn(2, [call(2, 0, prompt=1_000, estimated=True), call(2, 1, prompt=1_100, estimated=False),
                        call(2, 2, prompt=None, estimated=True, error_class="connection")]),
              *turn(3, [call(3, 0, prompt=1_300, estimated=True), call(3, 1, prompt=1_400, estimated=True)]),
              call(3, 0, prompt=1_500, estimated=True, purpose="review")]
    lab = written(tmp_path / "lab.duckdb", events)
    # A call that broke off after streaming part of a reply carries an estimate of that part: it counts too.
    assert lab.turns("s1")["estimated_calls"].tolist() == [0, 2, 2]
    usage = lab.turn_usage("s1")
    assert usage[["turn", "api_calls", "estimated_calls", "last_prompt_tokens"]].values.tolist() == [
        [1, 1, 0, 900], [2, 3, 2, 1_100], [3, 2, 2, 1_400]]
    session = lab.sessions().iloc[0]
    # The review's call is logged and marked, but counts in neither the session's nor a turn's figures.
    assert (session["api_call_count"], session["estimated_calls"], session["input_tokens"]) == (6, 4, 5_700)
    assert lab.api_calls("s1")["purpose"].tolist() == ["turn"] * 6 + ["review"]


def test_an_older_lab_learns_its_estimates_from_its_own_calls(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    ensure_schema(con, MIGRATIONS[:2])
    con.execute("INSERT INTO sessions (id) VALUES ('s1'), ('s2')")
    con.execute("INSERT INTO turns (session_id, turn, status) VALUES ('s1', 1, 'completed'), ('s1', 2, 'completed'),"
                " ('s2', 1, 'completed')")
    con.execute("INSERT INTO api_calls (session_id, turn, call_index, attempt, usage_estimated, error_class) VALUES "
                "('s1', 1, 0, 1, false, NULL), ('s1', 2, 0, 1, true, NULL), ('s1', 2, 1, 1, true, NULL), "
                "('s1', 2, 2, 1, false, 'timeout'), ('s2', 1, 0, 1, false, NULL)")
    con.close()
    lab = Lab(path)
    turns = lab.turns().sort_values(["session_id", "turn"])
    assert turns["estimated_calls"].tolist() == [0, 2, 0]
    assert lab.sessions().set_index("id")["estimated_calls"].to_dict() == {"s1": 2, "s2": 0}
    assert set(lab.api_calls()["purpose"]) == {"turn"}
    assert lab.sql("SELECT max(version) AS v FROM schema_version")["v"].iloc[0] == SCHEMA_VERSION


# ---------------------------------------------------------------- what people read


def console_lines(events, context_length=8_192) -> str:
    out = io.StringIO()
    console = ConsoleTranscript(out, context_length=context_length)
    for event in events:
        console(event)
    return out.getvalue()


def test_the_turn_line_has_one_prompt_figure_and_marks_estimates():
    measured = console_lines(turn(1, [call(1, 0, prompt=4_000, estimated=False),
                                      call(1, 1, prompt=4_590, estimated=False)]))
    assert measured == ("[turn 1 · completed · 2 calls · prompt 4,590 tokens (56.0% of the 8,192 window) · "
                        "turn total in 8,590 / out 10]\n\n")
    estimated = console_lines(turn(2, [call(2, 0, prompt=4_000, estimated=False),
                                       call(2, 1, prompt=4_590, estimated=True)]))
    assert "prompt ~4,590 tokens" in estimated and "turn total in ~8,590 / out ~10" in estimated
    assert "estimated for 1 of 2 calls (the server reported no usage; local count of the messages and tool schemas" \
           in estimated
    # A review call between turns neither moves the prompt figure nor counts as an estimate of the turn.
    after_review = console_lines([*turn(1, [call(1, 0, prompt=4_000, estimated=False)]),
                                  call(1, 0, prompt=9_999, estimated=True, purpose="review"),
                                  *turn(2, [call(2, 0, prompt=4_200, estimated=False)])])
    assert "9,999" not in after_review and "~" not in after_review


def test_the_notebook_footer_and_gauge_skip_review_calls_and_own_up_to_estimates():
    transcript = Transcript()
    meter = BudgetMeter(context_length=8_192, threshold=6_000)
    for event in turn(1, [call(1, 0, prompt=2_000, estimated=False),
                          call(1, 0, prompt=7_000, estimated=True, purpose="review")]):
        transcript.observe(event)
        meter.observe(event)
    assert "~" not in transcript.footer() and not transcript.usage_estimated
    assert meter.reported == 2_000 and not meter.estimated and meter.reading == "2,010"
    meter.observe(CompressionEvent(**S, trigger="pressure", tokens_before=5_000, tokens_after=1_000,
                                   prompt_tokens_before=6_100, prompt_tokens_after=2_100, mode="in_place"))
    assert meter.tokens == 2_100 and meter.estimated and meter.reading == "~2,100"


def test_a_compression_banner_speaks_of_the_prompt_as_sent_or_names_what_it_left_out():
    event = CompressionEvent(**S, trigger="preflight", tokens_before=3_388, tokens_after=1_051,
                             prompt_tokens_before=4_590, prompt_tokens_after=2_253, mode="rotation")
    assert compression_sizes(event) == "prompt ~4,590 → ~2,253 tokens (estimated, tool schemas included)"
    older = CompressionEvent(**S, trigger="preflight", tokens_before=3_388, tokens_after=1_051, mode="rotation")
    assert compression_sizes(older) == "3,388 → 1,051 tokens of messages (tool schemas not counted)"


# ---------------------------------------------------------------- through the agent


class Silent(ScriptedProvider):
    """A server that reports no usage (as llama.cpp ignoring ``stream_options.include_usage``)."""

    def _response(self, request, message):
        return ChatResponse(message={"role": "assistant", **message}, finish_reason="stop", usage=None, model="silent")


LONG = "The inventory report lists widget_{i} with 1{i}7 units in bin B-{i}. " * 12


def test_an_agent_on_a_silent_server_logs_and_shows_its_figures_as_estimates(tmp_path):
    config = Config().with_overrides({"tools.workspace": str(tmp_path), "model.context_length": 3000,
                                      "compression.summariser": "extractive", "agent.stream": False})
    bus, events, out = EventBus(), [], io.StringIO()
    bus.subscribe(events.append)
    bus.subscribe(ConsoleTranscript(out, context_length=3000))
    agent = Agent(Silent([{"content": LONG.format(i=i)} for i in range(6)]), config=config,
                  tools=builtin_registry(config.tools), bus=bus, sleep=lambda s: None,
                  compactor=Compactor(config, ExtractiveSummariser()))
    with StoreWriter(tmp_path / "lab.duckdb") as writer:
        writer.attach(bus)
        for i in range(5):
            agent.chat(f"Tell me about widget_{i}.")
        history, tools = list(agent.messages), agent.tools.schemas()
        assert agent.compress().changed
        agent.chat("And widget_5?")
    lab = Lab(tmp_path / "lab.duckdb")
    assert lab.turns()["estimated_calls"].tolist() == [1] * 6 and lab.sessions()["estimated_calls"].sum() == 6
    assert out.getvalue().count("estimated for its call") == 6
    compression = next(e for e in events if isinstance(e, CompressionEvent))
    # The banner's "before" is the prompt as the plot's calls count it: messages, tool schemas and priming.
    assert compression.prompt_tokens_before == agent.context.estimate(history, tools)
    assert compression.prompt_tokens_before > compression.tokens_before
    started = [e for e in events if isinstance(e, ApiCallStarted)][-1]
    user = agent.counter.count_message({"role": "user", "content": "And widget_5?"})
    assert started.estimated_prompt_tokens == compression.prompt_tokens_after + user
    assert f"prompt ~{compression.prompt_tokens_before:,} → ~{compression.prompt_tokens_after:,}" in out.getvalue()


def test_the_plot_draws_the_turns_calls_and_rings_the_estimated_ones(tmp_path):
    from hermeslab.plots import plot_token_usage

    events = [SessionStarted(**S, model="m"),
              *turn(1, [call(1, 0, prompt=900, estimated=False), call(1, 1, prompt=1_000, estimated=True)]),
              call(1, 0, prompt=5_000, estimated=False, purpose="review")]
    lab = written(tmp_path / "lab.duckdb", events)
    ax = plot_token_usage("s1", lab=lab, context_length=8_192).axes[0]
    line = next(line for line in ax.get_lines() if line.get_label() == "prompt tokens")
    assert list(line.get_ydata()) == [900, 1_000]
    rings = [c for c in ax.collections if c.get_label() == "estimated: the server reported no usage"]
    assert len(rings) == 1 and rings[0].get_offsets().tolist() == [[2, 1_000]]


def test_the_estimate_note_never_counts_more_estimated_calls_than_calls():
    from hermeslab.core.figures import estimate_note

    assert estimate_note(0, 3) == ""
    assert estimate_note(2, 1).startswith("estimated for its call (")
    assert estimate_note(3, 3).startswith("estimated for all its calls (")
    assert estimate_note(4, 3).startswith("estimated for all its calls (")
    assert estimate_note(1, 3).startswith("estimated for 1 of 3 calls (")
