"""The deterministic matcher, the perfect reader and the endpoint answerer's token figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermeslab.core.provider import ChatRequest, ChatResponse, Usage
from hermeslab.eval.probes.bank import BANK_TYPES, Probe
from hermeslab.eval.probes.judge import EndpointJudge, JudgeReplyError, MatchJudge, match_points
from hermeslab.eval.probes.readers import EndpointAnswerer, PerfectReader, SilentReader, call_usage
from hermeslab.eval.probes.text import UNKNOWN, normal_answer
from hermeslab.providers.server import LocalServer

#: Golds as the bank cuts them: at least four characters in normal form, never "unknown" itself.
golds = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=4, max_size=60).filter(
    lambda g: len(normal_answer(g)) >= 4 and normal_answer(g) != UNKNOWN)


@given(st.sampled_from(BANK_TYPES), golds)
def test_a_gold_against_itself_scores_two_and_unknown_scores_zero(probe_type, gold):
    assert match_points(probe_type, gold, gold) == 2
    assert match_points(probe_type, gold, f"  `{gold.upper()}`.  ") == 2 or gold.upper().casefold() != gold.casefold()
    for declined in (UNKNOWN, "Unknown.", "", "  "):
        assert match_points(probe_type, gold, declined) == 0


@given(st.lists(golds, min_size=2, max_size=5, unique_by=normal_answer))
def test_sets_score_by_overlap(members):
    gold = tuple(members)
    keys = [normal_answer(m) for m in members]
    if any(a != b and a in b for a in keys for b in keys):
        return  # one member inside another: a part would name both
    assert match_points("artifact", gold, "\n".join(members)) == 2
    assert match_points("artifact", gold, members[0]) == 1
    assert match_points("artifact", gold, UNKNOWN) == 0


def test_facts_and_sentences_score_partial_credit():
    assert match_points("recall", "src/app.py", "src/app.py") == 2
    assert match_points("recall", "src/app.py", "The file was src/app.py") == 1
    assert match_points("recall", "src/app.py", "src/main.py") == 0
    gold = "contain exactly one command connected with && or ||"
    assert match_points("constraint", gold, f"It must {gold}.") == 2
    assert match_points("constraint", gold, "exactly one command, connected with &&") == 1
    assert match_points("constraint", gold, "use the editor") == 0


def probe(gold, probe_type="recall"):
    return Probe("p1", probe_type, "What goes in the blank?", gold, 1, (0, 4), "rec", 0)


def test_the_perfect_reader_answers_the_gold_only_where_the_context_holds_it():
    reader = PerfectReader()
    context = [{"role": "system", "content": "Be brief."},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "terminal",
                                                                 "arguments": '{"command": "pytest -k Order_4711"}'}}]},
               {"role": "user", "content": [{"type": "text", "text": "Wrote  Notes.TXT\nand src/a.py"}]}]
    assert reader.answer(context, None, "q", probe=probe("order_4711")) == "order_4711"
    assert reader.answer(context, None, "q", probe=probe("notes.txt")) == "notes.txt"
    assert reader.answer(context[:1], None, "q", probe=probe("order_4711")) == UNKNOWN
    assert reader.answer(context, None, "q", probe=probe(("src/a.py", "src/b.py"), "artifact")) == "src/a.py"
    assert reader.answer(context, None, "q", probe=probe(("src/x.py",), "artifact")) == UNKNOWN
    assert SilentReader().answer(context, None, "q") == UNKNOWN
    with pytest.raises(ValueError, match="window"):
        PerfectReader(window=0)


def test_call_usage_reads_llama_server_timings_then_openai_usage():
    timed = call_usage({"usage": {"prompt_tokens": 900}, "timings": {"prompt_n": 100, "cache_n": 800}})
    assert (timed.prompt_tokens, timed.server_cached_tokens) == (900, 800)
    assert call_usage({"timings": {"prompt_n": 100, "cache_n": 800}}).prompt_tokens == 900
    openai_style = call_usage({"usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}})
    assert (openai_style.prompt_tokens, openai_style.server_cached_tokens) == (50, 32)
    silent = call_usage({"usage": {"prompt_tokens": 50}})
    assert silent.prompt_tokens == 50 and math.isnan(silent.server_cached_tokens)
    assert math.isnan(call_usage({}).prompt_tokens)


class Echo:
    """A provider that answers the last word of the question and records what it was sent."""

    name = "echo"

    def __init__(self):
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        word = request.messages[-1]["content"].split()[-1]
        return ChatResponse(message={"role": "assistant", "content": f"<think>hm</think>{word}"},
                            usage=Usage(prompt_tokens=40, completion_tokens=1))

    def stream(self, request):
        yield self.complete(request)


def test_the_endpoint_answerer_appends_the_question_last_and_keeps_the_server_figures():
    echo = Echo()
    context = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"},
               {"role": "assistant", "content": "Hi."}]
    tools = [{"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}]
    with LocalServer(echo, personality="llama-server") as server:
        url = server.base_url
        answerer = EndpointAnswerer(url, "tiny", window=4096)
        try:
            assert answerer.answer(context, tools, "Which word? blue") == "blue"
            assert answerer.last_call.prompt_tokens == 40 and answerer.last_call.server_cached_tokens == 0
        finally:
            answerer.close()
    sent = echo.requests[0]
    assert sent.messages[:3] == context and sent.messages[-1]["role"] == "user"
    assert sent.messages[-1]["content"].endswith("QUESTION: Which word? blue")
    assert "tiny" in answerer.name and url not in answerer.name


class Digit:
    name = "digit"

    def __init__(self, reply):
        self.reply, self.calls = reply, 0

    def complete(self, request):
        self.calls += 1
        return ChatResponse(message={"role": "assistant", "content": self.reply})


def test_the_endpoint_judge_reads_a_bare_digit_and_never_asks_about_unknown():
    judge = EndpointJudge(Digit("1"), "judge-model")
    assert judge.points(probe("order_4711"), "order 4711?") == 1
    assert judge.points(probe("order_4711"), UNKNOWN) == 0 and judge.provider.calls == 1
    with pytest.raises(JudgeReplyError, match="not a bare"):
        EndpointJudge(Digit("The answer is correct"), "judge-model").points(probe("order_4711"), "x")
    assert MatchJudge().points(probe("order_4711"), "ORDER_4711") == 2
