"""Replay a recording through the real agent loop under a config.

The recording supplies what the outside world said: the system prompt, the
user messages, every model reply (``ReplayProvider``) and every tool result
(``RecordedTools``, run through the agent's own executor). The config supplies
everything else, above all the compression, so what a replay measures is what
that config would have sent, and what it would have cost, for the very same
conversation. Replays emit the same events as live runs; with ``store=`` the
rows land in a lab file tagged with the run id and ``source = "replay"``.

The loop is driven turn by turn, and recordings come in shapes it would not
produce on its own. Each is handled explicitly and counted in the run:

* a model call before any user message, or right after a reply without tool
  calls (tau2's agent greets first): a turn without a new user message;
* user messages with no call between them: sent together as one turn;
* tool results followed by a user message, or ending the recording
  (mini-swe-agent stops at the submission): the loop would call the model
  again, so it is interrupted once the last result is in;
* a turn longer than ``agent.max_iterations``: the cap is raised to fit.

Anything else that makes the loop diverge from the recording (a recorded call
never made, a call the recording has no reply for, a tool result that differs)
is counted as a deviation, never absorbed.

The loop runs the config as given except where a recording cannot follow it:
no self-check call and no streaming (a recorded reply arrives whole), the
iteration cap raised, the recorded model named in the log. Time is simulated
(each answered call takes ``SECONDS_PER_CALL``), so compression cooldowns last
as many calls as they would live, and backoff waits take none.

Prompts are billed as a provider would report them, in one unit for every
config (exact counts in the recorded model's encoding), and each call is also
measured in the config's own estimator's unit, which is what its thresholds
saw. ``fast=True`` runs the same loop without the tool executor and without
events: the same decisions (``tests/test_one_engine.py`` checks), cheaper.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from hermeslab.agent import Agent, TurnInterrupted
from hermeslab.context.compactor import Compaction, Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.hermes_texts import HERMESLAB_WORDING, texts_in_use
from hermeslab.context.types import Summariser, SummaryOutcome, SummaryRequest
from hermeslab.core.config import Config
from hermeslab.core.events import Event, EventBus, SessionStarted, ToolCallFinished
from hermeslab.core.messages import strip_surrogates, tool_calls_of
from hermeslab.core.tokens import TokenCounter, counter_for, encoding_for_model
from hermeslab.policies.loading import strategy_rules
from hermeslab.providers.replay import Refusal, ReplayProvider, ServedCall, make_counter
from hermeslab.recordings import Recording
from hermeslab.session import Session

from .replay_plan import RecordedTools, ReplayPlan, TurnPlan, planned_recording

#: Simulated duration of one model call, which is what a compression cooldown is measured against.
SECONDS_PER_CALL = 10.0

SOURCE = "replay"
#: Iterations a replayed turn gets beyond its recorded calls and overflow retries, so the cap never ends it.
_ITERATION_HEADROOM = 1


# ---------------------------------------------------------------- what a run records


@dataclass(frozen=True)
class CompressionRecord:
    """One compression attempt the loop ran: the context before and after it."""

    trigger: str
    #: Number of calls answered before it ran (the next call is ``calls[call]``).
    call: int
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    changed: bool
    ineffective: bool
    #: The latest real user message of the conversation when it ran (None before the first).
    latest_user: str | None
    #: What the strategy returned (the pipeline's result carries its plan and decision record).
    result: Any = None
    #: The configured strategy, or ``fit_window`` (dropping and cutting after an overflow).
    strategy: str = "summary"


@dataclass(frozen=True)
class SummaryRecord:
    """One summariser call: tokens it read and wrote (reported usage, else counted), and who answered it."""

    input_tokens: int
    output_tokens: int
    #: The configured summariser failed and its fallback (the extractive one) wrote the summary.
    fallback_used: bool = False
    #: Why the configured summariser failed (None when it answered).
    error: str | None = None


@dataclass
class ReplayRun:
    """Everything a replay observed, for ``hermeslab.eval.metrics.measure``."""

    recording_id: str
    run_id: str
    config_hash: str
    #: The recorded model (what the prices apply to), else the config's.
    model: str
    context_length: int
    #: What the replay bills prompts with; ``counter.encoding`` names the unit of every token figure.
    counter: TokenCounter
    #: Tokens the tool schemas add to every request.
    tool_tokens: int
    #: The recorded assistant messages, in order.
    replies: list[dict[str, Any]]
    #: The unit the config's own estimator measured prompts in (``calls[i].decision_tokens``).
    decision_unit: str = "tiktoken cl100k_base"
    calls: list[ServedCall] = field(default_factory=list)
    compressions: list[CompressionRecord] = field(default_factory=list)
    summaries: list[SummaryRecord] = field(default_factory=list)
    #: How the run differed from the recording, and the recording shapes it had to adapt to.
    deviations: dict[str, int] = field(default_factory=dict)
    #: Status of every turn (``completed``, ``interrupted``, ``failed``, ``max_iterations``).
    statuses: list[str] = field(default_factory=list)
    #: Prompts the provider turned away as longer than the window.
    refusals: list[Refusal] = field(default_factory=list)
    #: Whose wording the run wrote into the context (``hermeslab.context.hermes_texts.texts_in_use``).
    hermes_texts: str = HERMESLAB_WORDING

    @property
    def refused_calls(self) -> int:
        return len(self.refusals)
    #: The sessions the replay logged, in order (a compression in rotation mode starts a new one).
    session_ids: list[str] = field(default_factory=list)


#: Keys of ``ReplayRun.deviations``. The first three are the loop diverging from the recording; the
#: others count the recording shapes the driver adapted to.
DEVIATIONS = ("missed_calls", "extra_calls", "tool_mismatches",
              "turns_without_user", "queued_user_messages", "stopped_after_tools", "unsent_messages")


class _CountedSummariser:
    """Passes requests on and keeps what each summary read and wrote."""

    def __init__(self, inner: Summariser, counter: TokenCounter, log: list[SummaryRecord]):
        self.inner = inner
        self.counter = counter
        self.log = log

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        outcome = self.inner.summarise(request)
        read = outcome.usage_prompt_tokens or self.counter.count_messages(request.span)
        wrote = outcome.usage_completion_tokens or self.counter.count_message({"role": "user", "content": outcome.body})
        self.log.append(SummaryRecord(read, wrote if outcome.body else 0, outcome.fallback_used,
                                      outcome.error))
        return outcome


class _ObservedCompactor(Compactor):
    """The configured compactor, also keeping each attempt's input and output for the metrics."""

    def __init__(self, config: Config, summariser: Summariser, *, run: ReplayRun, clock, latest_user) -> None:
        super().__init__(config, summariser, clock=clock, rules=strategy_rules(config.compression))
        self._run = run
        self._latest_user = latest_user

    def run(self, messages: list[dict[str, Any]], **options: Any) -> Compaction | None:
        return self._observed(list(messages), super().run(messages, **options))

    def fit(self, messages: list[dict[str, Any]], **options: Any) -> Compaction:
        return self._observed(list(messages), super().fit(messages, **options))

    def _observed(self, before: list[dict[str, Any]], compaction: Compaction | None) -> Compaction | None:
        if compaction is not None:
            self._run.compressions.append(CompressionRecord(
                compaction.trigger, len(self._run.calls), before, compaction.messages, compaction.changed,
                bool(compaction.verdict.get("ineffective")), self._latest_user(), compaction.result,
                compaction.strategy))
        return compaction


# ---------------------------------------------------------------- the replay


def replay(recording: Recording | Mapping[str, Any], config: Config, *, summariser: Summariser | None = None,
           bus: EventBus | None = None, run_id: str | None = None, store: str | Path | None = None,
           counter: str | None = None, fast: bool = False,
           seconds_per_call: float = SECONDS_PER_CALL) -> ReplayRun:
    """Replay ``recording`` through an ``Agent`` built from ``config``; see the module docstring.

    ``summariser`` None takes the config's: the LLM summariser when the config
    names an endpoint, otherwise the extractive one. ``counter`` is the unit the
    replay bills prompts in, as a provider reports them (``tiktoken``,
    ``tiktoken:<encoding>`` or ``rough``); by default exact counts in the
    encoding of the recorded model (``cl100k_base`` when it is unknown), the
    same for every config, so two configs' figures compare. Events go to ``bus`` when given; ``store`` writes them to that
    lab file; without it nothing touches disk. ``fast`` appends the recorded
    tool results without the tool executor and publishes no events (so takes
    no ``bus`` or ``store``): the same loop and the same compressions, cheaper.
    """
    if fast and (bus is not None or store is not None):
        raise ValueError("a fast replay publishes no events: pass neither bus nor store")
    recording, plan = planned_recording(recording)
    if not isinstance(config, Config):
        raise TypeError(f"config must be a hermeslab Config, got {type(config).__name__}")
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    config_hash = _digest(config)
    looped = _replay_config(config, plan, recording.model)
    billing = make_counter(counter) if counter is not None else counter_for(encoding_for_model(recording.model))
    provider = ReplayProvider(recording.messages, counter=billing, context_length=config.model.context_length,
                              model=looped.model.name, decision_counter=_decision_counter(config))
    tools = RecordedTools(plan, recording.tools)
    run = ReplayRun(recording_id=recording.id, run_id=run_id or new_run_id(), config_hash=config_hash,
                    model=looped.model.name, context_length=config.model.context_length, counter=provider.counter,
                    tool_tokens=provider.counter.count_tools(tools.schemas() or None), replies=provider.replies,
                    decision_unit=provider.decision_unit,
                    calls=provider.served, hermes_texts=texts_in_use(config.compression))
    bus = bus or EventBus()
    driver = _Driver(plan, provider, run, seconds_per_call)
    closers: list[Callable[[], None]] = []
    try:
        compactor = None
        if config.compression.enabled:
            counted = _CountedSummariser(_summariser(config, summariser, closers), provider.counter, run.summaries)
            compactor = _ObservedCompactor(looped, counted, run=run, clock=driver.clock,
                                           latest_user=driver.latest_user)
        writer = _writer(store, config, bus)
        if writer is not None:
            closers.append(writer.close)
        agent_type = _FastAgent if fast else Agent
        driver.agent = agent_type(provider, config=looped, tools=tools, bus=bus, source=SOURCE,
                                  counter=provider.counter, session=Session(system_prompt=plan.system_prompt,
                                                                            source=SOURCE),
                                  sleep=_no_wait, compactor=compactor, rng=random.Random(0), run_id=run.run_id,
                                  config_hash=config_hash)
        if fast:
            driver.agent.driver = driver
        else:
            closers.append(bus.subscribe(driver.observe, kinds=(ToolCallFinished, SessionStarted)))
        for turn in plan.turns:
            driver.run_turn(turn)
        driver.agent.close("replay_finished")
    finally:
        for close in reversed(closers):
            close()
    driver.finish()
    return run


class _Driver:
    """Runs the planned turns on the agent and keeps the run's counts as events arrive."""

    def __init__(self, plan: ReplayPlan, provider: ReplayProvider, run: ReplayRun, seconds_per_call: float):
        self.plan = plan
        self.provider = provider
        self.run = run
        self.seconds_per_call = seconds_per_call
        self.agent: Agent | None = None
        self.turn: TurnPlan | None = None
        self.user: str | None = None
        counts = dict.fromkeys(DEVIATIONS, 0)
        counts["unsent_messages"] = plan.unsent
        run.deviations = counts

    def clock(self) -> float:
        """Simulated time: each answered call takes ``seconds_per_call``, so cooldowns last as many calls as live."""
        return len(self.provider.served) * self.seconds_per_call

    def latest_user(self) -> str | None:
        return self.user

    def run_turn(self, turn: TurnPlan) -> None:
        counts = self.run.deviations
        self.turn = turn
        self.provider.position, self.provider.end = turn.first_reply, turn.first_reply + turn.replies
        self.agent.tools.forget_before(turn.first_reply)
        if turn.users:
            self.user = strip_surrogates(turn.users[-1])
            counts["queued_user_messages"] += len(turn.users) - 1
        else:
            counts["turns_without_user"] += 1
        served = len(self.provider.served)
        result = self.agent.run_turn(turn.users)
        self.run.statuses.append(result.status)
        counts["missed_calls"] += turn.replies - (len(self.provider.served) - served)
        if turn.stop_after is not None and result.status == "interrupted":
            counts["stopped_after_tools"] += 1

    def observe(self, event: Event) -> None:
        kind = type(event)
        if kind is ToolCallFinished:
            if self.plan.results.get(event.tool_call_id) != event.result or event.is_error:
                self.run.deviations["tool_mismatches"] += 1
            if event.tool_call_id == self.turn.stop_after:
                self.agent.interrupt()
        elif kind is SessionStarted:
            self.run.session_ids.append(event.session_id)

    def finish(self) -> None:
        self.run.deviations["extra_calls"] = self.provider.unanswered
        self.run.refusals = self.provider.refusals


class _FastAgent(Agent):
    """The loop with each tool call answered by its recorded result directly: no executor, no events.

    What the executor appends for a recorded call of a registered tool is
    exactly its recorded result, so the history, and every decision taken on
    it, is the same. Anything else (a tool name no tool may have) goes through
    the executor as in the full replay, and is counted the same way. A
    recorded reply's arguments are not parsed again: the plan parsed the very
    same texts (the loop only reads them, and the recorded tools only compare them).
    """

    driver: _Driver

    def _read_arguments(self, message: dict[str, Any]) -> list[dict[str, Any] | ValueError]:
        """A recorded reply's arguments as the plan parsed them (a recording that plans has no broken ones)."""
        recorded, parsed = self.driver.plan.arguments, []
        for call in tool_calls_of(message):
            entry = recorded.get(call.get("id"))
            if entry is None or entry[0] is not (call.get("function") or {}).get("arguments"):
                return super()._read_arguments(message)
            parsed.append(entry[1])
        return parsed

    def _run_tools(self, calls: list[dict], assistant_id: str, arguments: list) -> None:
        results, turn = self.driver.plan.results, self.driver.turn
        ids = [call.get("id") for call in calls]
        if all(i in results and self.tools.get((call.get("function") or {}).get("name", "")) is not None
               for i, call in zip(ids, calls)):
            for call_id in ids:
                self._add({"role": "tool", "tool_call_id": call_id, "content": results[call_id]}, assistant_id)
        else:
            start = len(self.messages)
            try:
                super()._run_tools(calls, assistant_id, arguments)
            finally:
                for message in self.messages[start:]:
                    if message.get("role") == "tool" and results.get(message.get("tool_call_id")) != message["content"]:
                        self.driver.run.deviations["tool_mismatches"] += 1
        if turn.stop_after is not None and turn.stop_after in ids:
            raise TurnInterrupted


def new_run_id() -> str:
    return "replay-" + secrets.token_hex(6)


#: The config last hashed, as a private copy, and its hash: an A/B run replays many recordings under one config.
_last_digest: tuple[Config | None, str] = (None, "")


def _digest(config: Config) -> str:
    """``config.digest()``, reused while the config equals the one hashed last (comparing is cheaper)."""
    global _last_digest
    seen, digest = _last_digest
    if seen is None or seen != config:
        digest = config.digest()
        _last_digest = (copy.deepcopy(config), digest)
    return digest


def _replay_config(config: Config, plan: ReplayPlan, model: str | None) -> Config:
    """The config the loop runs with; sessions still report the hash of the config as given.

    It names the recorded model (what the log's model columns then show) and
    leaves room for the longest recorded turn. It has no self-check call (the
    recording holds no answer to it) and no streaming, since a recorded reply
    arrives whole (live displays still get every message, only the text
    fragments are gone).
    """
    needed = plan.longest_turn * (1 + config.compression.max_overflow_attempts) + _ITERATION_HEADROOM
    agent = dataclasses.replace(config.agent, max_iterations=max(needed, config.agent.max_iterations),
                                self_check=False, stream=False)
    return dataclasses.replace(config, agent=agent, model=dataclasses.replace(config.model,
                                                                              name=model or config.model.name))


def _summariser(config: Config, given: Summariser | None, closers: list[Callable[[], None]]) -> Summariser:
    """The summariser to use: given, the LLM one at the config's endpoint (its closer added), or extractive."""
    if given is not None:
        if not callable(getattr(given, "summarise", None)):
            raise TypeError(f"summariser must have a summarise(request) method, got {type(given).__name__}")
        return given
    if config.compression.summariser == "llm" and (config.model.base_url or config.model.api_key):
        from hermeslab.providers import open_provider
        from hermeslab.runtime import make_summariser

        handle = open_provider(config)
        closers.append(handle.close)
        return make_summariser(config, handle.provider)
    return ExtractiveSummariser()


def _writer(store: str | Path | None, config: Config, bus: EventBus):
    """A lab writer on ``bus`` when a store path is given (redacting as a live run does)."""
    if store is None:
        return None
    from hermeslab.store import StoreWriter

    redact = None
    if config.compression.redact:
        from hermeslab.context.redact import redact
    writer = StoreWriter(store, redact=redact, durable_turns=False)
    writer.attach(bus)
    return writer


def _decision_counter(config: Config) -> TokenCounter:
    """The unit the config's own thresholds measure prompts in (what the compactor estimates with)."""
    return make_counter("rough" if config.compression.estimator == "rough" else "tiktoken")


def _no_wait(seconds: float) -> None:
    """Backoff waits take no time in a replay: nothing real is being waited for."""
