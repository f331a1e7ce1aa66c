"""Small windows (a 1,024-token local model): the summary fits the window, or the oldest turns go, counted.

A strict endpoint refuses any request whose prompt and requested answer
together exceed its window, with a vLLM-style message, as small local servers
do. Under the seed every turn of a long conversation completes through the
Agent; each compression is logged, a drop with the number of messages that
went. Under hermes-0.19 the budgets and the summary call stay Hermes's.
"""

from __future__ import annotations

import dataclasses

import pytest

from hermeslab.agent import Agent
from hermeslab.context.budget import SUMMARY_FLOOR_TOKENS, derive_budgets, summary_budget
from hermeslab.context.compactor import Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.pipeline import CompressionState, compress
from hermeslab.context.summary import LLMSummariser, answer_cap, fit_summary_call, winning_length
from hermeslab.context.types import SummaryRequest
from hermeslab.policies.loading import load_config
from hermeslab.core.events import CompressionEvent, EventBus, TurnFinished
from hermeslab.core.messages import validate_messages
from hermeslab.core.provider import ChatRequest, ProviderError
from hermeslab.core.tokens import count_text, default_counter
from hermeslab.providers.offline import OfflineModel
from hermeslab.runtime import make_summariser

from test_context_conversations import FixedSummariser, agent_session, assistant, system, text, user

WINDOW = 1_024


class StrictEndpoint:
    """The offline model behind a window that counts the prompt and the requested answer together.

    ``scale`` is how many of its tokens one of ours makes (a model whose tokenizer counts more than
    tiktoken); ``llama`` words a refusal as llama.cpp's server does, otherwise as vLLM does.
    """

    name = model = "hermeslab-offline"

    def __init__(self, window: int = WINDOW, *, scale: float = 1.0, llama: bool = False):
        self.window, self.scale, self.llama = window, scale, llama
        self.inner = OfflineModel()
        self.requests: list[ChatRequest] = []
        self.refusals = 0

    def complete(self, request: ChatRequest):
        self.requests.append(request)
        prompt = int(default_counter.count_request(request.messages, request.tools) * self.scale)
        asked = request.max_tokens or 0
        if prompt + asked > self.window:
            self.refusals += 1
            if self.llama:
                raise ProviderError(f"request ({prompt} tokens) exceeds the available context size ({self.window} "
                                    "tokens), try increasing it", status=400, error_type="exceed_context_size_error")
            raise ProviderError(
                f"This model's maximum context length is {self.window} tokens. However, you requested "
                f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). Please reduce "
                "the length of the messages or completion.", status=400, error_type="invalid_request_error")
        response = self.inner.complete(request)
        return dataclasses.replace(response, usage=dataclasses.replace(response.usage, prompt_tokens=prompt))

    def stream(self, request: ChatRequest):
        yield self.complete(request)


def _agent(summariser: str, *, preset: str = "seed", system_prompt: str | None = None,
           provider: StrictEndpoint | None = None):
    overrides = {"compression.summariser": summariser, "store.enabled": False}
    if system_prompt is not None:
        overrides["agent.system_prompt"] = system_prompt
    config = load_config(f"{preset},model.context_length={WINDOW}", overrides)
    provider = provider or StrictEndpoint()
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    compactor = Compactor(config, make_summariser(config, provider))
    agent = Agent(provider, config=config, bus=bus, compactor=compactor, sleep=lambda seconds: None)
    return agent, provider, events


def _chat(agent: Agent, turns: int = 10) -> list[str]:
    return [agent.chat(f"Turn {i}: explain in detail how item {i} of the compression pipeline works, what a "
                       "context window is and why summaries matter in long conversations.").status
            for i in range(turns)]


@pytest.mark.parametrize("route", ["llm", "extractive"])
def test_every_turn_completes_at_a_1024_token_window_compressing_or_dropping_the_oldest_turns(route):
    agent, provider, events = _agent(route)
    assert _chat(agent) == ["completed"] * 10
    validate_messages(agent.messages)
    finished = [e for e in events if isinstance(e, TurnFinished)]
    assert [e.status for e in finished] == ["completed"] * 10
    compressions = [e for e in events if isinstance(e, CompressionEvent)]
    applied = [e for e in compressions if e.mode != "none"]
    summarised = [e for e in applied if e.strategy == "summary"]
    assert summarised, "no summary was ever applied"
    for event in applied:  # each applied compression says what it did with the oldest turns
        dropping = event.strategy in ("dropped_oldest", "fit_window")
        assert (event.messages_dropped > 0) == dropping, (event.strategy, event.messages_dropped)
        assert event.tokens_after < event.tokens_before
    assert not agent.compactor.state.auto_disabled
    for event in summarised:
        summary = event.details["summary"]
        assert summary["budget_tokens"] <= WINDOW // 2
    if route == "llm":
        assert any(not e.fallback_used for e in summarised), "the model never wrote a summary"
        summary_calls = [r for r in provider.requests if r.max_tokens is not None]
        assert summary_calls and all(r.max_tokens < WINDOW for r in summary_calls)
        route_state = agent.compactor.summariser.routes[agent.config.model.name]
        assert route_state.cooldown_until == float("-inf"), route_state.last_error


@pytest.mark.parametrize("route", ["llm", "extractive"])
def test_a_model_whose_tokenizer_counts_more_still_completes_every_turn(route):
    """The server counts a third more than we do: its readings correct our count before it refuses."""
    agent, _, events = _agent(route, provider=StrictEndpoint(scale=1.35, llama=True))
    assert _chat(agent) == ["completed"] * 10
    assert agent.context.calibration.ratio > 1.2
    applied = [e for e in events if isinstance(e, CompressionEvent) and e.mode != "none"]
    assert applied and all(e.tokens_after < e.tokens_before for e in applied)


def test_fixed_costs_over_the_threshold_are_no_strike_and_every_turn_completes():
    """A system prompt alone over the threshold: preflight finds nothing to summarise again and again."""
    agent, _, events = _agent("extractive", system_prompt="Follow the house rules. " + text(700))
    threshold = agent.compactor.budgets.threshold_tokens
    assert default_counter.count_message(agent.messages[0]) < WINDOW < default_counter.count_message(
        agent.messages[0]) + 400
    assert _chat(agent, 6) == ["completed"] * 6
    idle = [e for e in events if isinstance(e, CompressionEvent) and e.details.get("outcome") == "nothing_to_summarise"]
    assert idle and all(not e.details["verdict"]["ineffective"] for e in idle)
    assert agent.compactor.state.ineffective_streak == 0 and not agent.compactor.state.auto_disabled
    assert threshold < WINDOW


def test_hermes_still_strikes_when_there_is_nothing_to_summarise():
    config = load_config(f"hermes-0.19,model.context_length={WINDOW}")
    compactor = Compactor(config, FixedSummariser())
    messages = [system(), user("hello"), assistant("hi")]
    for _ in range(2):
        compaction = compactor.run(messages, trigger="preflight")
        assert compaction.result.record["outcome"] == "nothing_to_summarise"
        assert compaction.verdict["ineffective"]
    assert compactor.state.auto_disabled


# ---------------------------------------------------------------- the budget


def test_the_summary_budget_is_capped_by_the_window_under_seed_only():
    seed = load_config(f"seed,model.context_length={WINDOW}").compression
    hermes = load_config(f"hermes-0.19,model.context_length={WINDOW}").compression
    assert summary_budget(hermes, derive_budgets(hermes, WINDOW), 520) == 2_000
    budgets = derive_budgets(seed, WINDOW)
    capped = summary_budget(seed, budgets, 520)
    assert SUMMARY_FLOOR_TOKENS <= capped <= 260
    assert capped <= (budgets.threshold_tokens - budgets.tail_token_budget) // 2
    lowered = derive_budgets(seed, 700)  # a window the provider lowered
    assert summary_budget(seed, lowered, 520) < capped
    large = derive_budgets(seed, 200_000)
    assert summary_budget(seed, large, 50_000) == summary_budget(hermes, derive_budgets(hermes, 200_000), 50_000)


def test_a_summary_call_fits_its_prompt_and_answer_in_the_window():
    span = agent_session(turns=3, output_words=150)[1:]
    request = SummaryRequest(span=span, previous_summary=None, focus=None, budget_tokens=300,
                             window_tokens=WINDOW)
    prompt, max_tokens = fit_summary_call(request, WINDOW, today="2026-01-01")
    cost = default_counter.count_message({"role": "user", "content": prompt})
    assert cost + max_tokens <= WINDOW and max_tokens >= SUMMARY_FLOOR_TOKENS
    roomy, answer = fit_summary_call(request, 64_000, today="2026-01-01")
    # The full prompt when it fits, and twice the target unless a summary that long could not beat the span.
    assert answer == min(600, winning_length(request)) == answer_cap(request) and len(roomy) > len(prompt)


class RefusesFirst:
    """Refuses the first call as too large (the server counts more than we do), then answers."""

    name = "refuses-first"

    def __init__(self):
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest):
        from hermeslab.core.provider import ChatResponse, Usage

        self.requests.append(request)
        if len(self.requests) == 1:
            raise ProviderError("request (1100 tokens) exceeds the available context size (1024 tokens), try "
                                "increasing it", status=400, error_type="exceed_context_size_error")
        return ChatResponse(message={"role": "assistant", "content": "## Goal\nKeep going."},
                            usage=Usage(prompt_tokens=500, completion_tokens=8))


def test_the_summarisers_own_overflow_shrinks_its_input_and_asks_again_without_a_cooldown():
    provider = RefusesFirst()
    summariser = LLMSummariser(provider, "m", fallback=ExtractiveSummariser())
    # A span long enough that a summary of the budget can still beat it, so the call is made.
    request = SummaryRequest(span=agent_session(turns=2, output_words=150)[1:], previous_summary=None, focus=None,
                             budget_tokens=200, window_tokens=WINDOW)
    assert winning_length(request) >= 200
    outcome = summariser.summarise(request)
    assert not outcome.fallback_used and "Keep going." in outcome.body
    first, second = provider.requests
    def size(call: ChatRequest) -> int:
        return default_counter.count_request(call.messages) + call.max_tokens

    assert size(second) < size(first)
    assert summariser.routes["m"].cooldown_until == float("-inf")


def test_a_separate_summary_model_gets_the_whole_prompt_until_it_states_its_own_window():
    """The conversation's window says nothing about another model's: it is fitted only after refusing."""
    provider = RefusesFirst()
    summariser = LLMSummariser(provider, "m", summary_model="big-summariser", fallback=ExtractiveSummariser(),
                               today=lambda: None)
    request = SummaryRequest(span=agent_session(turns=3, output_words=150)[1:], previous_summary=None, focus=None,
                             budget_tokens=300, window_tokens=WINDOW)
    outcome = summariser.summarise(request)
    assert not outcome.fallback_used and "Keep going." in outcome.body
    whole, fitted = provider.requests
    assert [whole.model, fitted.model] == ["big-summariser", "big-summariser"]
    assert whole.max_tokens == answer_cap(request)  # twice the budget unless that could not beat the span
    full_prompt, _ = fit_summary_call(request, 1_000_000, today=None)
    assert whole.messages[0]["content"] == full_prompt
    assert default_counter.count_request(fitted.messages) + fitted.max_tokens <= 1024  # the window it stated


def test_without_a_window_an_overflow_is_an_ordinary_failure_that_cools_the_route_down():
    provider = RefusesFirst()
    summariser = LLMSummariser(provider, "m", fallback=ExtractiveSummariser(), clock=lambda: 0.0)
    outcome = summariser.summarise(SummaryRequest(span=[user("hello")], previous_summary=None, focus=None,
                                                  budget_tokens=2_000))
    assert outcome.fallback_used and summariser.routes["m"].cooldown_until > 0
    assert provider.requests[0].max_tokens == 4_000


# ---------------------------------------------------------------- the fallback and dropping


def _seed(window: int = WINDOW):
    return load_config(f"seed,model.context_length={window}").compression


def test_an_extractive_fallback_is_never_larger_than_the_span_it_replaces():
    cfg = _seed()
    messages = agent_session(turns=4, output_words=40)
    result = compress(messages, cfg=cfg, budgets=derive_budgets(cfg, WINDOW), state=CompressionState(),
                      summariser=ExtractiveSummariser())
    assert result.record["outcome"] in ("compressed", "dropped_oldest")
    if result.summary_text is not None:
        assert count_text(result.summary_text) < result.record["summary"]["span_tokens"]


def test_when_no_summary_fits_the_oldest_turns_are_dropped_and_counted():
    """Fixed costs leave no room for a summary: the summarised range goes, and the record says how much."""
    cfg = _seed()
    budgets = derive_budgets(cfg, WINDOW, fixed_tokens=760)
    summariser = FixedSummariser()
    messages = agent_session(turns=6, output_words=60)
    result = compress(messages, cfg=cfg, budgets=budgets, state=CompressionState(), summariser=summariser)
    assert result.record["outcome"] == "dropped_oldest" and not summariser.requests
    dropped = result.record["dropped_indices"]
    assert dropped and result.condensed == len(dropped) and result.tokens_after < result.tokens_before
    assert messages[-1] in result.messages  # the latest request stays
    validate_messages(result.messages)
    off = dataclasses.replace(cfg, drop_when_summary_cannot_fit=False)
    kept = compress(messages, cfg=off, budgets=budgets, state=CompressionState(), summariser=summariser)
    assert kept.record["outcome"] != "dropped_oldest"


def test_a_drop_is_logged_with_its_count():
    """A summariser whose summaries never pay: the turns still complete, the oldest turns dropped and counted."""
    config = load_config(f"seed,model.context_length={WINDOW}", {"store.enabled": False})
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    agent = Agent(StrictEndpoint(), config=config, bus=bus, compactor=Compactor(config, FixedSummariser(text(3_000))),
                  sleep=lambda seconds: None)
    assert _chat(agent, 6) == ["completed"] * 6
    drops = [e for e in events if isinstance(e, CompressionEvent) and e.strategy == "dropped_oldest"]
    assert drops and all(e.mode == "rotation" and e.messages_dropped > 0 for e in drops)
    assert all(e.messages_dropped == len(e.details["dropped_indices"]) for e in drops)
    assert all(e.details["summary"]["larger_than_span"] for e in drops)


def test_a_history_with_nothing_to_summarise_is_not_tried_again_until_it_changes():
    from hermeslab.context.driver import ContextDriver

    config = load_config(f"seed,model.context_length={WINDOW}")
    compactor = Compactor(config, FixedSummariser())
    driver = ContextDriver(compactor, context_length=WINDOW)
    history = [system("rules " * 900), user("hello"), assistant("hi")]
    driver.begin_turn("hello")
    first = driver.preflight(history, None)
    assert first is not None and first.result.record["outcome"] == "nothing_to_summarise"
    assert driver.before_call(history, None) is None  # the same history: not run again
    grown = history + [user("and now?")]
    again = driver.before_call(grown, None)
    assert again is not None and again.result.record["outcome"] == "nothing_to_summarise"
    assert compactor.state.ineffective_streak == 0


def test_a_refusal_that_states_the_prompts_size_is_a_reading_the_fit_goes_by():
    from hermeslab.context.driver import ContextDriver

    config = load_config(f"seed,model.context_length={WINDOW}")
    driver = ContextDriver(Compactor(config, FixedSummariser()), context_length=WINDOW)
    history = [system(), user("go"), assistant(text(300)), user("and then?"), assistant(text(300)), user("more")]
    counted = driver.count_request(history, None)
    assert counted < WINDOW  # by our count it fits
    driver.begin_turn("more")
    refusal = (f"request ({int(counted * 1.7)} tokens) exceeds the available context size ({WINDOW} tokens), "
               "try increasing it")
    step = driver.overflow(history, None, refusal, payload_too_large=False, images_stripped=False)
    assert step.action == "compress"
    fitted = step.compactions[-1]
    assert fitted.changed and driver.count_request(fitted.messages, None) * 1.7 < WINDOW


@pytest.mark.parametrize(("text", "tokens"), [
    ("This model's maximum context length is 1024 tokens. However, your messages resulted in 1,284 tokens.", 1284),
    ("However, you requested 4949 tokens (949 in the messages, 4000 in the completion).", 949),
    ("request (1100 tokens) exceeds the available context size (1024 tokens), try increasing it", 1100),
    ('{"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 1100, "n_ctx": 1024}}', 1100),
    ("prompt is too long: 208310 tokens > 200000 maximum", 208310),
    ("your request has 1000 input tokens (4000 > 4096 - 1000)", 1000),
    ("Rate limit reached: 30000 tokens per minute", None),
    ("context length exceeded", None),
])
def test_the_refused_prompts_size_is_read_from_each_providers_wording(text, tokens):
    from hermeslab.context.error_limits import parse_prompt_tokens

    assert parse_prompt_tokens(text) == tokens
