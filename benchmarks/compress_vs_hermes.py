"""One compress() call: hermeslab against the real Hermes Agent 0.19.0, same inputs, same run.

Inputs: a seeded synthetic coding session (200 messages, about 150K tokens,
98 tool outputs of 330-12,500 characters, write_file calls carrying whole files)
at a 200K window (where Hermes's own figure was measured) and at 16K, and the
longest sessions of the shared mini-swe-agent recordings at 16K.

Hermes is timed inside its reference worker (``HermesReference.time_compress``:
a fresh compressor per call after an untimed warm-up, the summary call
answered by the worker's fixed stand-in text). hermeslab is timed in this
process, also warm and with a fresh state per call, twice:

* ``fixed`` — the pipeline with a zero-latency fixed-text summariser;
* ``llm_path`` — the same text returned by a zero-latency provider through
  ``LLMSummariser``, so building and redacting the summary prompt is timed
  too, as it is inside Hermes's ``compress()``.

Both run the default ``seed`` preset and, for reference, ``hermes-0.19``.
Each round times Hermes once and every hermeslab variant once, so load from
other processes falls on both sides alike. The ratio is Hermes's median over
hermeslab's median, measured in this run.

Usage: python benchmarks/compress_vs_hermes.py [--repeats N] [--longest K] [--datasets DIR]
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from pathlib import Path
from typing import Callable

from hermeslab.context import CompressionState, apply_preset, compress, derive_budgets
from hermeslab.context.summary import LLMSummariser
from hermeslab.core.config import Config
from hermeslab.core.tokens import default_counter, rough_messages_tokens
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.reference.client import HermesReference
from hermeslab.core.provider import ChatRequest, ChatResponse, Usage

MINI_SWE = "mini_swe_agent_gemini3pro_swebv.jsonl"
SYNTHETIC_WINDOW = 200_000
RECORDING_WINDOW = 16_000
TARGET_RATIO = 5.0

_WORDS = ("config", "parser", "value", "result", "handler", "request", "token", "buffer", "index", "record",
          "stream", "offset", "schema", "cache", "window", "message", "session", "worker", "event", "queue")


# ---------------------------------------------------------------- the synthetic session


def _code_lines(rng: random.Random, chars: int) -> str:
    lines = []
    total = 0
    while total < chars:
        a, b, c = rng.sample(_WORDS, 3)
        line = rng.choice((
            f"def {a}_{b}(self, {c}):",
            f"    {a} = self.{b}.get({c!r}, {rng.randint(0, 9999)})",
            f"    if {a} is None: raise ValueError('{b} missing for {c}')",
            f"{a}/{b}.py:{rng.randint(1, 900)}: {c} updated ({rng.randint(1, 99)} lines)",
            f"    return [{a} for {a} in {b} if {a}.{c}]",
        ))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:chars]


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def synthetic_session(seed: int = 7, rounds: int = 98) -> list[dict]:
    """system, task, ``rounds`` tool rounds (assistant call + result), a closing exchange: 200 messages."""
    rng = random.Random(seed)
    messages = [
        {"role": "system", "content": "You are a coding agent working in a Python repository. " * 8},
        {"role": "user", "content": "Refactor the request handling in service/ so every handler validates its "
                                    "schema first, then run the whole test suite and fix what breaks."},
    ]
    for i in range(rounds):
        call_id = f"call_{i:03d}"
        path = f"service/{rng.choice(_WORDS)}_{rng.choice(_WORDS)}.py"
        kind = rng.choices(("terminal", "read_file", "write_file", "search_files"), weights=(4, 4, 1, 1))[0]
        if kind == "terminal":
            arguments = {"command": f"python -m pytest tests/test_{rng.choice(_WORDS)}.py -x -q"}
        elif kind == "read_file":
            arguments = {"path": path, "offset": rng.randint(1, 400)}
        elif kind == "write_file":
            arguments = {"path": path, "content": _code_lines(rng, rng.randint(1_500, 6_000))}
        else:
            arguments = {"pattern": rng.choice(_WORDS), "path": "service", "target": "content"}
        messages.append({"role": "assistant", "content": f"Step {i}: {kind} on {path}.",
                         "tool_calls": [_call(call_id, kind, arguments)]})
        output = _code_lines(rng, int(rng.triangular(330, 12_500, 4_500)))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    messages.append({"role": "user", "content": "Good. Now summarise what changed and what still fails."})
    messages.append({"role": "assistant", "content": "Handlers validate their schema first; two tests still fail."})
    return messages


# ---------------------------------------------------------------- timing


class ZeroLatencyProvider:
    """Answers every request at once with a fixed text, as Hermes's stubbed summary call does."""

    name = "zero-latency"

    def __init__(self, text: str):
        self.text = text

    def complete(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(message={"role": "assistant", "content": self.text}, finish_reason="stop",
                            usage=Usage(prompt_tokens=0, completion_tokens=0), model=request.model)

    def stream(self, request: ChatRequest):
        yield self.complete(request)


def timed(run: Callable[[], object]) -> float:
    """Milliseconds of one call, garbage collected first (as the Hermes worker does)."""
    gc.collect()
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000.0


def hermeslab_runner(messages: list[dict], window: int, preset: str, summariser) -> Callable[[], object]:
    """One warm compress() call with a fresh state, checked to have produced a summary."""
    cfg = apply_preset(Config(), preset).compression
    budgets = derive_budgets(cfg, window)

    def run() -> object:
        result = compress(messages, cfg=cfg, budgets=budgets, state=CompressionState(), summariser=summariser)
        if result.summary_text is None:
            raise RuntimeError(f"hermeslab ({preset}) did not compress the benchmark input: {result.record}")
        return result

    run()
    return run


def measure(ref: HermesReference, name: str, messages: list[dict], window: int, repeats: int) -> dict:
    """Medians over ``repeats`` rounds; each round times Hermes once and every hermeslab variant once.

    Interleaving keeps a change in machine load from favouring either side.
    """
    stub = FixedSummariser()
    llm_path = LLMSummariser(ZeroLatencyProvider(stub.text), "zero-latency")
    runners = {f"{preset}_{label}": hermeslab_runner(messages, window, preset, summariser)
               for preset in ("seed", "hermes-0.19") for label, summariser in (("fixed", stub), ("llm_path", llm_path))}
    hermes: list[float] = []
    ours: dict[str, list[float]] = {key: [] for key in runners}
    for _ in range(repeats):
        hermes += ref.time_compress(messages, context_length=window, repeats=1)
        for key, run in runners.items():
            ours[key].append(timed(run))
    hermes_median = statistics.median(hermes)
    row: dict = {"input": name, "messages": len(messages), "rough_tokens": rough_messages_tokens(messages),
                 "window": window, "hermes_ms": round(hermes_median, 3)}
    for key, timings in ours.items():
        median = statistics.median(timings)
        row[f"hermeslab_{key}_ms"] = round(median, 3)
        row[f"ratio_{key}"] = round(hermes_median / median, 2)
    return row


def longest_sessions(path: Path, count: int) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        sessions = [json.loads(line) for line in handle if line.strip()]
    return sorted(sessions, key=lambda s: len(s["messages"]), reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--longest", type=int, default=5)
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    options = parser.parse_args()
    if options.repeats < 1 or options.longest < 0:
        parser.error("--repeats must be at least 1 and --longest must not be negative")

    synthetic = synthetic_session()
    inputs = [("synthetic-200", synthetic, SYNTHETIC_WINDOW), ("synthetic-200", synthetic, RECORDING_WINDOW)]
    inputs += [(s["id"], s["messages"], RECORDING_WINDOW)
               for s in longest_sessions(options.datasets / MINI_SWE, options.longest)]
    for _, messages, _ in inputs:
        default_counter.count_messages(messages)  # a live agent has counted every message as it arrived
    with HermesReference(timeout=None) as ref:
        rows = [measure(ref, name, messages, window, options.repeats) for name, messages, window in inputs]
        hermes_version = ref.info.get("hermes_version")
    ratios = {key: min(row[key] for row in rows) for key in rows[0] if key.startswith("ratio_")}
    report = {
        "benchmark": "compress_vs_hermes",
        "hermes_version": hermes_version,
        "repeats": options.repeats,
        "rows": rows,
        "min_ratio": ratios,
        "median_ratio": {key: statistics.median(row[key] for row in rows) for key in ratios},
        "target_ratio": TARGET_RATIO,
        "target_met_seed_fixed": ratios["ratio_seed_fixed"] >= TARGET_RATIO,
        "target_met_seed_llm_path": ratios["ratio_seed_llm_path"] >= TARGET_RATIO,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
