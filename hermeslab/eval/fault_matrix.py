"""Recovery measured end to end: scripted sessions against a fault-injecting server.

Each run starts a fresh workspace, the offline model behind a FaultEndpoint
(and, if asked, a second, healthy server as the fallback provider), and an
agent that talks to them through the real ``openai`` client. Backoff waits go
to a simulated clock, so a run takes the time of its HTTP calls, not of its
retries' pauses, while the report still counts those pauses.

``run_matrix`` runs a fault-free baseline and then one run per fault kind and
rate, and reports per cell: the share of turns completed, the share with the
baseline's answer, the extra API calls and tokens that recovering cost on the
turns that completed, the calls spent on turns that did not, and the latency.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..agent import Agent
from ..context.extractive import ExtractiveSummariser
from ..core.config import Config
from ..core.events import ApiCallFinished, Event, EventBus, RecoveryEvent
from ..policies.running import make_compactor
from ..providers import OFFLINE_MODEL_NAME, LocalServer, OfflineModel, OpenAICompatProvider
from ..providers.faults import FAULT_KINDS, FaultSchedule, Injection, serve_with_faults
from ..recovery import CredentialRefresh, ProviderSlot
from ..store import StoreWriter
from ..tools import builtin_registry
from ..tools.todo import TodoStore

WORKSPACE_FILES = {
    "notes.md": "# Release notes\n\nVersion 2.4 adds batch restocking.\nThe release is planned for Friday.\n",
    "src/app.py": "def restock(item, amount):\n    if amount < 0:\n        raise ValueError('negative amount')\n"
                  "    return amount\n",
}

#: Three short sessions that exercise plain answers, file tools, writes and todos.
SESSIONS: tuple[tuple[str, ...], ...] = (
    ("Who are you?", "read notes.md", "list files"),
    ('write "Ship 2.4 on Friday after the smoke test." to plan.txt', "read plan.txt", 'search for "Friday"'),
    ("add todos: update the changelog; tag the release", "show my todos", "read src/app.py"),
)

RATES = (0.05, 0.20, 0.50)
#: Seconds the client waits for a reply; the ``slow`` fault answers after twice that.
CLIENT_TIMEOUT = 1.0
SEED = 2024


class SimulatedClock:
    """Stands in for ``time.sleep``: adds the wait to a counter and returns at once."""

    def __init__(self) -> None:
        self.slept = 0.0

    def sleep(self, seconds: float) -> None:
        self.slept += seconds


@dataclass
class TurnOutcome:
    session: int
    turn: int
    user_text: str
    text: str
    status: str
    error: str | None = None
    #: API attempts (failed ones included) and the tokens they reported, during this turn.
    calls: int = 0
    tokens: int = 0


@dataclass
class RunReport:
    turns: list[TurnOutcome]
    events: list[Event]
    injected: list[Injection]
    #: Seconds of backoff the simulated clock absorbed.
    slept_s: float
    #: Seconds the client waited before giving up on a call.
    client_timeout: float = CLIENT_TIMEOUT

    @property
    def calls(self) -> list[ApiCallFinished]:
        return [e for e in self.events if isinstance(e, ApiCallFinished)]

    @property
    def recoveries(self) -> list[RecoveryEvent]:
        return [e for e in self.events if isinstance(e, RecoveryEvent)]

    @property
    def attempts(self) -> int:
        return len(self.calls)

    @property
    def latency_s(self) -> float:
        """Simulated waiting: backoff pauses plus the client timeout of every call that never answered.

        Local calls take milliseconds, so their measured latency would only add
        noise; what recovery costs in time is its pauses and its timeouts.
        """
        timeouts = sum(1 for call in self.calls if call.error_class == "timeout")
        return self.slept_s + timeouts * self.client_timeout

    @property
    def tokens(self) -> int:
        return _tokens(self.calls)


def _tokens(calls: Iterable[ApiCallFinished]) -> int:
    return sum((call.prompt_tokens or 0) + (call.completion_tokens or 0) for call in calls)


def same_answer(text: str, expected: str) -> bool:
    """Equal answers, ignoring U+FFFD: a repaired lone surrogate carried no text of the answer."""
    return text.replace("\ufffd", "") == expected.replace("\ufffd", "")


def prepare_workspace(path: Path) -> Path:
    """A fresh copy of the workspace files at ``path`` (the same path every run, so answers compare)."""
    shutil.rmtree(path, ignore_errors=True)
    for name, text in WORKSPACE_FILES.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return path


def run_sessions(schedule: FaultSchedule | None, workspace: Path, *, sessions: Sequence[Sequence[str]] = SESSIONS,
                 fallback: bool = False, lab_path: Path | None = None, refresh: CredentialRefresh | None = None,
                 overrides: dict[str, Any] | None = None, seed: int = SEED, client_timeout: float = CLIENT_TIMEOUT,
                 on_agent: Callable[[Agent], None] | None = None) -> RunReport:
    """Run ``sessions`` (one agent session each) against the offline model with ``schedule``'s faults.

    ``fallback`` adds a healthy server as the fallback provider; ``lab_path``
    logs everything to that DuckDB file; ``on_agent`` sees the agent before the
    first turn (to add tools, for instance).
    """
    prepare_workspace(workspace)
    primary = serve_with_faults(OfflineModel(), schedule or FaultSchedule())
    backup = LocalServer(OfflineModel()) if fallback else None
    config = Config().with_overrides({"tools.workspace": str(workspace), "model.timeout": client_timeout,
                                      "compression.summariser": "extractive", **(overrides or {})})
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    writer = StoreWriter(lab_path) if lab_path is not None else None
    if writer is not None:
        writer.attach(bus)
    clients = [OpenAICompatProvider(primary.base_url, None, OFFLINE_MODEL_NAME, timeout=client_timeout,
                                    name="primary")]
    if backup is not None:
        clients.append(OpenAICompatProvider(backup.start(), None, OFFLINE_MODEL_NAME, timeout=client_timeout,
                                            name="fallback"))
    todos, clock = TodoStore(), SimulatedClock()
    agent = Agent(clients[0], config=config, tools=builtin_registry(config.tools, todo_store=todos), bus=bus,
                  sleep=clock.sleep, compactor=make_compactor(config, ExtractiveSummariser(), todos=todos.format_for_injection),
                  fallbacks=[ProviderSlot(client, OFFLINE_MODEL_NAME) for client in clients[1:]],
                  refresh_credentials=refresh, rng=random.Random(seed))
    if on_agent is not None:
        on_agent(agent)
    outcomes: list[TurnOutcome] = []
    try:
        for session_index, script in enumerate(sessions):
            if session_index:
                agent.new_session()
            for turn_index, text in enumerate(script):
                start = len(events)
                result = agent.chat(text)
                calls = [event for event in events[start:] if isinstance(event, ApiCallFinished)]
                outcomes.append(TurnOutcome(session_index, turn_index, text, result.text, result.status, result.error,
                                            calls=len(calls), tokens=_tokens(calls)))
        agent.close()
    finally:
        if writer is not None:
            writer.close()
        for client in clients:
            client.close()
        primary.endpoint.close()
        primary.stop()
        if backup is not None:
            backup.stop()
    return RunReport(turns=outcomes, events=events, injected=list(primary.endpoint.injected), slept_s=clock.slept,
                     client_timeout=client_timeout)


@dataclass(frozen=True)
class Cell:
    """One fault kind at one rate, compared with the fault-free baseline of the same run."""

    kind: str
    rate: float
    fallback: bool
    turns: int
    #: Faults actually injected (a fault that had nothing to spoil is not counted).
    faults: int
    completed: float
    correct: float
    #: API attempts over the baseline's on the turns this run completed: what recovering cost. A turn that
    #: failed is left out (it stopped early, so it would count as a saving); its calls are in ``failed_turn_calls``.
    extra_calls: int
    #: API attempts on the completed turns over the baseline's on the same turns (NaN when none completed).
    calls_ratio: float
    #: Backoff pauses and client timeouts of the whole run over the baseline's (which has none).
    extra_latency_s: float
    #: Tokens over the baseline's on the completed turns, like ``extra_calls``; negative means fewer (a compression
    #: after an overflow, or a failed turn missing from the history, shortens the later prompts).
    extra_tokens: int
    #: API attempts spent on turns that did not complete.
    failed_turn_calls: int
    recoveries: int
    #: Turn statuses other than ``completed``, with their counts.
    failures: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def schedule_for(kind: str, rate: float, seed: int = SEED) -> FaultSchedule:
    options = {"delay": 2 * CLIENT_TIMEOUT} if kind == "slow" else {}
    return FaultSchedule.single(kind, rate=rate, seed=seed, **options)


def compare(kind: str, rate: float, run: RunReport, baseline: RunReport, *, fallback: bool) -> Cell:
    if len(run.turns) != len(baseline.turns):
        raise ValueError(f"the run has {len(run.turns)} turns and the baseline {len(baseline.turns)}")
    failures: dict[str, int] = {}
    for turn in run.turns:
        if turn.status != "completed":
            failures[turn.status] = failures.get(turn.status, 0) + 1
    correct = sum(turn.status == "completed" and same_answer(turn.text, expected.text)
                  for turn, expected in zip(run.turns, baseline.turns))
    count = len(run.turns)
    both = [(turn, expected) for turn, expected in zip(run.turns, baseline.turns)
            if turn.status == "completed" and expected.status == "completed"]
    run_calls, baseline_calls = sum(turn.calls for turn, _ in both), sum(expected.calls for _, expected in both)
    return Cell(kind=kind, rate=rate, fallback=fallback, turns=count,
                faults=sum(1 for injection in run.injected if injection.applied),
                completed=sum(turn.status == "completed" for turn in run.turns) / count, correct=correct / count,
                extra_calls=run_calls - baseline_calls,
                calls_ratio=round(run_calls / baseline_calls, 3) if baseline_calls else float("nan"),
                extra_latency_s=round(run.latency_s - baseline.latency_s, 3),
                extra_tokens=sum(turn.tokens - expected.tokens for turn, expected in both),
                failed_turn_calls=sum(turn.calls for turn in run.turns if turn.status != "completed"),
                recoveries=len(run.recoveries), failures=failures)


def run_matrix(kinds: Iterable[str] = FAULT_KINDS, rates: Iterable[float] = RATES, *, workspace: Path,
               sessions: Sequence[Sequence[str]] = SESSIONS, fallback: bool = False,
               seed: int = SEED) -> tuple[RunReport, list[Cell]]:
    """The fault-free baseline and one Cell per (kind, rate)."""
    kinds, rates = list(kinds), list(rates)
    unknown = [kind for kind in kinds if kind not in FAULT_KINDS]
    if unknown:
        raise ValueError(f"unknown fault kind {unknown[0]!r}; expected one of {', '.join(FAULT_KINDS)}")
    baseline = run_sessions(None, workspace, sessions=sessions, fallback=fallback, seed=seed)
    not_completed = [turn for turn in baseline.turns if turn.status != "completed"]
    if not_completed:
        raise RuntimeError(f"the fault-free baseline did not complete turn {not_completed[0]}")
    cells = [compare(kind, rate, run_sessions(schedule_for(kind, rate, seed), workspace, sessions=sessions,
                                              fallback=fallback, seed=seed), baseline, fallback=fallback)
             for kind in kinds for rate in rates]
    return baseline, cells
