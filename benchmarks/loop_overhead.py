"""Loop + logging overhead per turn, and the cost of counting one appended message.

The offline model runs in process and the time spent inside it is subtracted,
so what remains is hermeslab's own work per turn: building requests, counting
tokens, running the (trivial) tools, publishing events and handing rows to
the DuckDB writer. The session is seeded with 200 messages, 30% of them tool
traffic, and the measured turns alternate tool and plain turns in that share.

Prints one JSON object as its last line.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Iterator

from hermeslab.agent import Agent
from hermeslab.core.config import Config
from hermeslab.core.events import EventBus
from hermeslab.core.tokens import TokenCounter, RunningCount
from hermeslab.providers import OfflineModel
from hermeslab.core.provider import ChatRequest, ChatResponse, StreamDelta
from hermeslab.session import Session
from hermeslab.store import StoreWriter
from hermeslab.tools import builtin_registry

HISTORY_MESSAGES = 200
TOOL_SHARE = 0.30
TURNS = 60


class TimedProvider:
    """Wraps a provider and adds up the time spent inside it."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    def complete(self, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        try:
            return self.inner.complete(request)
        finally:
            self.seconds += time.perf_counter() - started

    def stream(self, request: ChatRequest) -> Iterator[StreamDelta | ChatResponse]:
        iterator = iter(self.inner.stream(request))
        while True:
            started = time.perf_counter()
            try:
                item = next(iterator)
            except StopIteration:
                self.seconds += time.perf_counter() - started
                return
            self.seconds += time.perf_counter() - started
            yield item


def seeded_history(n: int) -> list[dict]:
    """A realistic history: user asks, assistant answers, and read_file round trips (30%)."""
    messages: list[dict] = []
    i = 0
    while len(messages) < n:
        messages.append({"role": "user", "content": f"Question {i}: what does module_{i}.py do with order_{i * 7}?"})
        if (i % 10) < 5:  # half the turns use a tool: 2 of their 4 messages are tool traffic (~33% overall)
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"seed_{i}", "type": "function",
                 "function": {"name": "read_file", "arguments": json.dumps({"path": f"module_{i}.py"})}}]})
            messages.append({"role": "tool", "tool_call_id": f"seed_{i}",
                             "content": "\n".join(f"{k:>6}| line {k} of module_{i}" for k in range(1, 25))})
        messages.append({"role": "assistant", "content": f"module_{i}.py validates order_{i * 7} and logs it."})
        i += 1
    return messages[:n]


def measure_turns(workspace: Path, lab: Path) -> dict:
    config = Config().with_overrides({"tools.workspace": str(workspace), "agent.stream": True})
    bus = EventBus()
    writer = StoreWriter(lab)
    writer.attach(bus)
    provider = TimedProvider(OfflineModel())
    session = Session(system_prompt="You are a benchmark agent.")
    for message in seeded_history(HISTORY_MESSAGES):
        session.append(message)
    seeded = len(session.messages)
    agent = Agent(provider, config=config, tools=builtin_registry(config.tools), bus=bus, session=session)
    tool_turns = round(TURNS * TOOL_SHARE)
    prompts = ["list files" if i % round(1 / TOOL_SHARE) == 0 and i // round(1 / TOOL_SHARE) < tool_turns
               else f"Thanks, noted point {i}." for i in range(TURNS)]
    overheads = []
    for prompt in prompts:
        provider.seconds = 0.0
        started = time.perf_counter()
        agent.chat(prompt)
        overheads.append((time.perf_counter() - started - provider.seconds) * 1000)
    writer.close()
    overheads = overheads[5:]  # warm-up: first tokenizer and writer start
    return {
        "turns_measured": len(overheads),
        "history_messages_at_start": seeded,
        "history_messages_at_end": len(session.messages),
        "median_overhead_ms_per_turn": round(statistics.median(overheads), 3),
        "p90_overhead_ms_per_turn": round(sorted(overheads)[int(0.9 * len(overheads))], 3),
    }


def append_costs_us(lengths: tuple[int, ...], repeats: int = 400) -> dict[int, float]:
    """Median cost of counting a conversation after one new message is appended.

    The histories are measured in alternation so machine load affects them alike;
    each appended message is new text (a tokenizer miss), as in a live session.
    """
    counter = TokenCounter()
    histories = {n: seeded_history(n) for n in lengths}
    runners = {n: RunningCount(counter) for n in lengths}
    for n in lengths:
        runners[n].total(histories[n])
    samples: dict[int, list[float]] = {n: [] for n in lengths}
    for k in range(repeats):
        for n in lengths:
            history = histories[n]
            history.append({"role": "user", "content": f"A new message number {k} about invoice_{k * 13} ({n})."})
            started = time.perf_counter()
            runners[n].total(history)
            samples[n].append((time.perf_counter() - started) * 1e6)
            history.pop()
            runners[n].total(history)  # back to the same length (untimed recount)
    return {n: statistics.median(values) for n, values in samples.items()}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        (workspace / "README.md").write_text("benchmark workspace\n")
        loop = measure_turns(workspace, Path(tmp) / "lab.duckdb")
    costs = append_costs_us((10, 200))
    at_10, at_200 = costs[10], costs[200]
    figures = {
        **loop,
        "target_ms_per_turn": 2.0,
        "append_count_us_at_10": round(at_10, 2),
        "append_count_us_at_200": round(at_200, 2),
        "append_count_ratio_200_vs_10": round(at_200 / at_10, 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
