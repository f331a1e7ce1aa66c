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
"""

from __future__ import annotations

import copy
import dataclasses
import random
import secrets
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hermeslab.agent import Agent, TurnInterrupted
from hermeslab.context.compactor import Compaction, Compactor
from hermeslab.context.extractive import ExtractiveSummariser
from hermeslab.context.types import Summariser, SummaryOutcome, SummaryRequest
from hermeslab.core.config import Config
from hermeslab.core.events import Event, EventBus, SessionStarted, ToolCallFinished
from hermeslab.core.messages import parse_tool_arguments, strip_surrogates
from hermeslab.core.tokens import TokenCounter
from hermeslab.providers.replay import Refusal, ReplayProvider, ServedCall
from hermeslab.session import Session
from hermeslab.tools.registry import Tool, ToolError, ToolRegistry

from hermeslab.recordings import Recording, RecordingError, RecordingProblem, validate_recording

#: Simulated duration of one model call, which is what a compression cooldown is measured against.
SECONDS_PER_CALL = 10.0

SOURCE = "replay"
#: Iterations a replayed turn gets beyond its recorded calls and overflow retries, so the cap never ends it.
_ITERATION_HEADROOM = 1


# ---------------------------------------------------------------- the recording's shape


@dataclass(frozen=True)
class TurnPlan:
    """One turn of the loop: the user texts it starts with and the recorded replies it should get."""

    users: tuple[str, ...]
    #: Index of the turn's first reply among the recording's assistant messages.
    first_reply: int
    replies: int
    #: The last tool call of the turn when the loop must stop after its result (the recording moves on
    #: to a user message, or ends); None when the turn ends with a reply without tool calls.
    stop_after: str | None


@dataclass(frozen=True)
class ReplayPlan:
    system_prompt: str
    turns: tuple[TurnPlan, ...]
    #: Recorded result of every tool call, by call id.
    results: dict[str, str]
    #: Per tool name, its recorded calls in order: (parsed arguments, recorded result).
    calls: dict[str, list[tuple[dict[str, Any], str]]]
    #: Recorded messages no call can carry: a system message after the start, user messages after the last reply.
    unsent: int

    @property
    def longest_turn(self) -> int:
        return max((turn.replies for turn in self.turns), default=0)


class _Shape(ValueError):
    """Something the replay cannot drive; ``replay`` turns it into a full RecordingError."""


def plan_replay(messages: Sequence[dict[str, Any]]) -> ReplayPlan:
    """How the loop must be driven to make the recorded calls (the shapes are listed in the module docstring).

    Raises ValueError naming the message when the recording is not one the
    loop can replay (unknown role, non-text content, a call without an id,
    arguments that are not a JSON object, a result that answers no open call).
    """
    system_prompt = ""
    start = 0
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        system_prompt, start = _text(messages[0], 0), 1
    turns: list[TurnPlan] = []
    results: dict[str, str] = {}
    calls: dict[str, list[tuple[dict[str, Any], str]]] = {}
    pending: dict[str, tuple[str, dict[str, Any]]] = {}  # call id -> (tool name, arguments), not answered yet
    users: list[str] = []
    unsent = 0
    replies = 0
    turn: _OpenTurn | None = None
    for index in range(start, len(messages)):
        message = messages[index]
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            _text(message, index)
            if turn is None or turn.last_call is None:  # the loop would have ended the turn here
                if turn is not None:
                    turns.append(turn.plan())
                turn, users = _OpenTurn(tuple(users), replies), []
            issued = _issued_calls(message, index, pending, results)
            turn.replies += 1
            turn.last_call = issued[-1] if issued else None
            replies += 1
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise _Shape(f"message {index}: tool result {call_id!r} answers no open tool call")
            name, arguments = pending.pop(call_id)
            results[call_id] = _text(message, index)
            calls.setdefault(name, []).append((arguments, results[call_id]))
        elif role == "user":
            if turn is not None:
                turns.append(turn.plan())
                turn = None
            users.append(_text(message, index))
        elif role == "system":
            _text(message, index)
            unsent += 1
        else:
            raise _Shape(f"message {index}: unknown role {role!r}")
    if turn is not None:
        turns.append(turn.plan())
    if pending:
        raise _Shape(f"tool call {next(iter(pending))!r} is never answered by a tool message")
    return ReplayPlan(system_prompt, tuple(turns), results, calls, unsent + len(users))


@dataclass
class _OpenTurn:
    """A turn being planned; ``last_call`` is the latest reply's last tool call (None: it called no tools)."""

    users: tuple[str, ...]
    first_reply: int
    replies: int = 0
    last_call: str | None = None

    def plan(self) -> TurnPlan:
        return TurnPlan(self.users, self.first_reply, self.replies, self.last_call)


def _text(message: dict[str, Any], index: int) -> str:
    content = message.get("content")
    if not isinstance(content, str):
        raise _Shape(f"message {index}: content must be a string")
    return content


def _issued_calls(message: dict[str, Any], index: int, pending: dict[str, tuple[str, dict[str, Any]]],
                  results: dict[str, str]) -> list[str]:
    """Ids of an assistant message's tool calls, each registered as pending with its parsed arguments."""
    ids = []
    for number, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str):
            raise _Shape(f"message {index}: tool call {number} needs an id and a function name")
        if call_id in pending or call_id in results:
            raise _Shape(f"message {index}: tool call id {call_id!r} is used twice")
        try:
            arguments = parse_tool_arguments(function.get("arguments"))
        except (ValueError, TypeError, AttributeError) as exc:
            raise _Shape(f"message {index}: tool call {number}: {exc}") from None
        pending[call_id] = (function["name"], arguments)
        ids.append(call_id)
    return ids


# ---------------------------------------------------------------- recorded tools


class RecordedTools(ToolRegistry):
    """A registry that offers the recorded schemas and answers each call with its recorded result.

    Every tool the recording calls gets a handler holding that tool's
    recorded calls in order; a call is answered by the first one whose
    arguments match (the calls before it were skipped by the loop and are
    dropped). A call with no recorded match becomes the tool's error result.
    """

    def __init__(self, plan: ReplayPlan, schemas: list[dict[str, Any]] | None):
        super().__init__()
        self._schemas = schemas or []
        for name, calls in plan.calls.items():  # only called tools need a handler; the schemas are data
            try:
                self.register(Tool(name, f"Answers {name} calls with their recorded results.", _ANY_ARGUMENTS,
                                   self._handler(deque(calls))))
            except ValueError:
                continue  # a name no tool may have: its calls come back as "unknown tool" and count as deviations

    def schemas(self) -> list[dict[str, Any]]:
        """The recorded schemas, verbatim and as the same list on every call."""
        return self._schemas

    @staticmethod
    def _handler(queue: deque[tuple[dict[str, Any], str]]):
        def answer(arguments: dict[str, Any]) -> str:
            for position, (recorded, result) in enumerate(queue):
                if recorded == arguments:
                    for _ in range(position + 1):
                        queue.popleft()
                    return result
            raise ToolError("the recording holds no result for a call with these arguments")

        return answer


#: Recorded calls are answered as recorded, whatever their arguments: the schema accepts any object.
_ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}


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
    """One summariser call: tokens it read and wrote (reported usage, else counted)."""

    input_tokens: int
    output_tokens: int


@dataclass
class ReplayRun:
    """Everything a replay observed, for ``hermeslab.eval.metrics.measure``."""

    recording_id: str
    run_id: str
    config_hash: str
    #: The recorded model (what the prices apply to), else the config's.
    model: str
    context_length: int
    counter: TokenCounter
    #: Tokens the tool schemas add to every request.
    tool_tokens: int
    #: The recorded assistant messages, in order.
    replies: list[dict[str, Any]]
    calls: list[ServedCall] = field(default_factory=list)
    compressions: list[CompressionRecord] = field(default_factory=list)
    summaries: list[SummaryRecord] = field(default_factory=list)
    #: How the run differed from the recording, and the recording shapes it had to adapt to.
    deviations: dict[str, int] = field(default_factory=dict)
    #: Status of every turn (``completed``, ``interrupted``, ``failed``, ``max_iterations``).
    statuses: list[str] = field(default_factory=list)
    #: Prompts the provider turned away as longer than the window.
    refusals: list[Refusal] = field(default_factory=list)

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
        self.log.append(SummaryRecord(read, wrote if outcome.body else 0))
        return outcome


class _ObservedCompactor(Compactor):
    """The configured compactor, also keeping each attempt's input and output for the metrics."""

    def __init__(self, config: Config, summariser: Summariser, *, run: ReplayRun, clock, latest_user) -> None:
        super().__init__(config, summariser, clock=clock)
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
    names an endpoint, otherwise the extractive one. ``counter`` measures
    prompts (``tiktoken`` or ``rough``; default: the config's compression
    estimator). Events go to ``bus`` when given; ``store`` writes them to that
    lab file; without it nothing touches disk. ``fast`` appends the recorded
    tool results without the tool executor and publishes no events (so takes
    no ``bus`` or ``store``): the same loop and the same compressions, cheaper.
    """
    if fast and (bus is not None or store is not None):
        raise ValueError("a fast replay publishes no events: pass neither bus nor store")
    recording, plan = _planned(recording)
    if not isinstance(config, Config):
        raise TypeError(f"config must be a hermeslab Config, got {type(config).__name__}")
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    config_hash = _digest(config)
    looped = _replay_config(config, plan, recording.model)
    provider = ReplayProvider(recording.messages, counter=counter or config.compression.estimator,
                              context_length=config.model.context_length, model=looped.model.name)
    tools = RecordedTools(plan, recording.tools)
    run = ReplayRun(recording_id=recording.id, run_id=run_id or new_run_id(), config_hash=config_hash,
                    model=looped.model.name, context_length=config.model.context_length, counter=provider.counter,
                    tool_tokens=provider.counter.count_tools(tools.schemas() or None), replies=provider.replies,
                    calls=provider.served)
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

    What the executor would append for a recorded call is exactly its recorded
    result, so the history, and every decision taken on it, is the same.
    """

    driver: _Driver

    def _run_tools(self, calls: list[dict], assistant_id: str, arguments: list) -> None:
        results, turn = self.driver.plan.results, self.driver.turn
        for call in calls:
            content = results.get(call.get("id"))
            if content is None:
                self.driver.run.deviations["tool_mismatches"] += 1
                content = "the recording holds no result for this call"
            self._add({"role": "tool", "tool_call_id": call.get("id", ""), "content": content}, assistant_id)
        if turn.stop_after is not None and any(call.get("id") == turn.stop_after for call in calls):
            raise TurnInterrupted


def new_run_id() -> str:
    return "replay-" + secrets.token_hex(6)


def _planned(recording: Recording | Mapping[str, Any]) -> tuple[Recording, ReplayPlan]:
    """The recording and its plan, or RecordingError naming every problem of a recording that cannot be replayed.

    The plan's own checks are the fast path; when one fails, the format's full
    validator says what is wrong, with every problem and where it is.
    """
    if isinstance(recording, Mapping):
        data = dict(recording)
        problems = validate_recording(data)
        if problems:
            raise RecordingError(problems)
        recording = Recording.from_dict(data)
    elif not isinstance(recording, Recording):
        raise TypeError(f"recording must be a Recording or a recorded-session dict, got {type(recording).__name__}")
    cached = _plans.get(id(recording))
    if cached is not None and cached[0] is recording and cached[1] is recording.messages \
            and cached[2] == len(recording.messages) and cached[3] is recording.tools:
        return recording, cached[4]
    try:
        if not isinstance(recording.messages, list):
            raise _Shape("messages must be a list")
        _check_schemas(recording.tools)
        plan = plan_replay(recording.messages)
    except _Shape as exc:
        problems = validate_recording(recording.to_dict()) or [
            RecordingProblem(str(exc), recording_id=recording.id)]
        raise RecordingError(problems) from None
    if len(_plans) >= _PLANS_MAX:
        _plans.clear()
    _plans[id(recording)] = (recording, recording.messages, len(recording.messages), recording.tools, plan)
    return recording, plan


#: Plans of the recordings replayed lately, by identity (an A/B run replays each one under every config).
#: An entry holds its recording, so the id stays its own; a recording whose message list was replaced or
#: grew is planned again.
_plans: dict[int, tuple[Recording, list, int, Any, ReplayPlan]] = {}
_PLANS_MAX = 1_024


def _check_schemas(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
            for t in tools):
        raise _Shape("tools must be a list of {\"type\": \"function\", \"function\": {\"name\": ...}} schemas")


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


def _no_wait(seconds: float) -> None:
    """Backoff waits take no time in a replay: nothing real is being waited for."""
