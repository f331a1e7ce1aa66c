"""A summary call sized to a window never asks for a summary that could not be smaller than what it replaces."""

from __future__ import annotations

from hermeslab.context.summary import LLMSummariser, answer_cap, winning_length
from hermeslab.context.types import SummaryRequest
from hermeslab.core.provider import ChatResponse, Usage


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        return ChatResponse(message={"role": "assistant", "content": "## Active Task\nsummarised"},
                            usage=Usage(prompt_tokens=50, completion_tokens=5), model="served-model.gguf")

    def stream(self, request):
        yield self.complete(request)


def span(words: int) -> list[dict]:
    return [{"role": "user", "content": "please look at " + "word " * words},
            {"role": "assistant", "content": "looked at " + "it " * words}]


def test_the_answer_cap_stays_under_what_the_summary_replaces():
    request = SummaryRequest(span=span(400), previous_summary=None, focus=None, budget_tokens=600,
                             window_tokens=4_096)
    assert winning_length(request) < 2 * 600
    assert answer_cap(request) == winning_length(request)
    provider = Recorder()
    LLMSummariser(provider, "main").summarise(request)
    (sent,) = provider.requests
    assert sent.max_tokens <= winning_length(request)


def test_no_call_when_no_summary_can_win_and_no_fallback_pretends_one():
    request = SummaryRequest(span=span(3), previous_summary=None, focus=None, budget_tokens=600, window_tokens=4_096)
    assert winning_length(request) < 128
    provider = Recorder()
    outcome = LLMSummariser(provider, "main", fallback=LLMSummariser(Recorder(), "other")).summarise(request)
    assert provider.requests == [] and outcome.body == "" and not outcome.fallback_used and outcome.error is None


def test_every_call_is_reported_with_its_usage_and_both_model_names():
    seen = []
    summariser = LLMSummariser(Recorder(), "main")
    summariser.on_call = lambda **fields: seen.append(fields)
    summariser.summarise(SummaryRequest(span=span(400), previous_summary=None, focus=None, budget_tokens=200))
    (call,) = seen
    assert (call["model"], call["server_model"], call["prompt_tokens"], call["completion_tokens"],
            call["usage_source"]) == ("main", "served-model.gguf", 50, 5, "reported")
