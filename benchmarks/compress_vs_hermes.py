"""One compress() call: hermeslab against the real Hermes Agent 0.19.0, same inputs, same work, same run.

Inputs: a seeded synthetic coding session (200 messages, 98 tool outputs of
330-12,500 characters, write_file calls carrying whole files) at a 200K window
(where Hermes's own figure was measured) and at 16K, and the longest sessions
of the shared mini-swe-agent recordings at 16K.

What each side is asked to do, per timed call:

* **Hermes** (inside its reference worker, ``HermesReference.time_compress_cpu``):
  a fresh ``ContextCompressor`` and a fresh deep copy of the input, garbage
  collected first, after one untimed warm-up call per request. Hermes keeps no
  token counts between calls; its summary call is answered at once by the
  worker's fixed stand-in text, after Hermes has built and redacted the
  summary prompt.
* **hermeslab** (in this process): a fresh ``CompressionState`` and a fresh deep
  copy of the input, garbage collected first, after one untimed warm-up call
  per variant; then, untimed, one of two states of the token-count caches of
  ``hermeslab.core.tokens`` and ``hermeslab.core.rough``:

  - ``cold``: every cache emptied (what Hermes gets: nothing counted yet);
  - ``primed``: emptied, then the copy counted as a live loop has counted it
    (each message as it arrived, ``Session.append``; the whole list by the
    preset's estimator, the pressure check before the call). This is the
    marginal cost of a compression inside a running agent.

  Two summarisers, each with zero latency and Hermes's stand-in text:
  ``plain`` (``FixedSummariser``: no prompt is built) and ``llm_path``
  (``LLMSummariser`` over a zero-latency provider: the summary prompt is built
  and redacted, as inside Hermes's ``compress()``). ``llm_path`` is the like-
  for-like comparison; ``plain`` shows the engine without the prompt. The
  LLM summariser is named a separate summary model (as Hermes's auxiliary
  compression model is), so ``seed`` builds the whole prompt as Hermes does;
  fitted to the conversation's own window, a 16K row's span (far more than
  16K tokens) could not be summarised in one call and would not compress.

Both presets run: ``seed`` (the default; tiktoken counts) and ``hermes-0.19``
(Hermes's decisions and its chars/4 estimate). Each round times Hermes once and
every hermeslab variant once, in a shuffled order, so load from other processes
falls on both sides alike. A ratio is Hermes's median wall time over the
variant's median wall time, measured in this run; the same ratio of CPU
medians (``cpu_ratio_*``: Hermes's worker's CPU time in its call over this
process's in ours) is reported beside it, since on a busy machine either side
may wait for a core. Keys: ``ratio_<preset>_<cold|primed>`` (plain path) and
``ratio_<preset>_llm_path_<cold|primed>``; a target is met when the ratio
reaches it in every row.

Usage: python benchmarks/compress_vs_hermes.py [--repeats N] [--longest K] [--datasets DIR] [--out FILE]
Prints one JSON object as its last line and writes it to benchmarks/results/compress_vs_hermes.json.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import statistics
import time
from pathlib import Path

from _record import Record, add_out_option

import hermeslab.core.rough as rough_module
import hermeslab.core.tokens as tokens_module
from hermeslab.context import CompressionState, compress, derive_budgets
from hermeslab.context.summary import LLMSummariser
from hermeslab.core.config import Config
from hermeslab.policies.loading import apply_preset
from hermeslab.core.provider import ChatRequest, ChatResponse, Usage
from hermeslab.core.rough import rough_messages_tokens
from hermeslab.core.tokens import default_counter, list_estimator
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.reference.client import HermesReference

MINI_SWE = "mini_swe_agent_gemini3pro_swebv.jsonl"
SYNTHETIC_WINDOW = 200_000
RECORDING_WINDOW = 16_000

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


# ---------------------------------------------------------------- the token-count caches


def _containers(value: object) -> bool:
    return isinstance(value, (dict, list, set, tuple))


def _initial_containers(module: object) -> tuple[dict, dict]:
    """Every container ``module`` holds: its private globals, and the attributes of its own objects."""
    globals_ = {name: copy.copy(value) for name, value in vars(module).items()
                if name.startswith("_") and not name.startswith("__") and _containers(value)}
    objects = {name: {attr: copy.copy(item) for attr, item in vars(value).items() if _containers(item)}
               for name, value in vars(module).items()
               if type(value).__module__ == module.__name__ and hasattr(value, "__dict__")}
    return globals_, objects


#: Every container the token modules hold (exact counts, such as ``default_counter``'s, and the chars/4
#: estimate's), as it was at import, before anything was counted. Restoring them empties every cache
#: whatever it is called, and leaves constant tables (the estimator table) as they are.
_INITIAL = {module: _initial_containers(module) for module in (tokens_module, rough_module)}


def _restore(owner: object, name: str, initial: object) -> None:
    """Put ``owner.name`` back to ``initial`` (a container), in place where it is a dict, set or list."""
    current = getattr(owner, name)
    if (isinstance(current, dict) and isinstance(initial, dict)) or (
            isinstance(current, set) and isinstance(initial, set)):
        current.clear()
        current.update(initial)
    elif isinstance(current, list) and isinstance(initial, list):
        current[:] = initial
    else:
        setattr(owner, name, copy.copy(initial))


def clear_token_caches() -> None:
    """Empty hermeslab's token-count caches (``hermeslab.core.tokens`` and ``hermeslab.core.rough``), as in a
    process that counted nothing.

    The tokenizer itself stays loaded, with the C counter's table of character
    classes (filled as code points are first met, as a regex engine carries its
    Unicode tables): both sides are warm processes.
    """
    for module, (globals_, objects) in _INITIAL.items():
        for name, initial in globals_.items():
            _restore(module, name, initial)
        for name, attrs in objects.items():
            owner = getattr(module, name)
            for attr, initial in attrs.items():
                _restore(owner, attr, initial)
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def cold_counts_check(messages: list[dict]) -> dict:
    """Whether ``clear_token_caches`` leaves nothing counted: counting a fresh copy after it must cost
    what counting in a new process costs, far more than counting a fresh copy with the caches kept
    (which finds every message's count by its text). Timed, so it holds whatever the caches are called."""
    def count_copy_ms(clear: bool) -> float:
        sample = copy.deepcopy(messages)
        if clear:
            clear_token_caches()
        gc.collect()
        started = time.perf_counter()
        default_counter.count_messages(sample)
        return (time.perf_counter() - started) * 1000.0

    count_copy_ms(True)
    cold = statistics.median(count_copy_ms(True) for _ in range(5))
    kept = statistics.median(count_copy_ms(False) for _ in range(5))
    clear_token_caches()
    return {"count_after_clearing_ms": round(cold, 3), "count_with_caches_kept_ms": round(kept, 3),
            "verified": cold > 5 * kept}


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


PRESETS = ("seed", "hermes-0.19")
PATHS = ("plain", "llm_path")
MODES = ("cold", "primed")
#: Each target is met when the ratio is at least this in every row.
TARGETS = {"ratio_hermes-0.19_cold": 5.0, "ratio_seed_cold": 1.5,
           "ratio_seed_llm_path_primed": 5.0, "ratio_seed_llm_path_cold": 1.5}
TOKEN_UNITS = {"rough_tokens": "rough chars/4 (Hermes's whole-list estimate)",
               "tiktoken_tokens": "tiktoken cl100k_base (hermeslab's count, reply priming included)"}


def variant_key(preset: str, path: str, mode: str) -> str:
    return f"{preset}_{mode}" if path == "plain" else f"{preset}_{path}_{mode}"


class Variant:
    """One hermeslab variant: a preset, a summariser path and a cache state."""

    def __init__(self, messages: list[dict], window: int, preset: str, path: str, mode: str):
        self.messages, self.preset, self.mode = messages, preset, mode
        self.key = variant_key(preset, path, mode)
        self.cfg = apply_preset(Config(), preset).compression
        self.budgets = derive_budgets(self.cfg, window)
        stub = FixedSummariser()
        self.summariser = stub if path == "plain" else LLMSummariser(
            ZeroLatencyProvider(stub.text), "zero-latency", summary_model="zero-latency-summary")
        self.wall_ms: list[float] = []
        self.cpu_ms: list[float] = []

    def call(self) -> tuple[float, float]:
        """One timed compress() on a fresh copy in this variant's cache state: (wall ms, CPU ms)."""
        sample = copy.deepcopy(self.messages)
        clear_token_caches()
        if self.mode == "primed":
            for message in sample:  # as Session.append counts each message when it arrives
                default_counter.count_message(message)
            list_estimator(self.cfg)(sample)  # the pressure check before the call
        gc.collect()
        cpu_started = time.process_time()
        started = time.perf_counter()
        result = compress(sample, cfg=self.cfg, budgets=self.budgets, state=CompressionState(),
                          summariser=self.summariser)
        wall = (time.perf_counter() - started) * 1000.0
        cpu = (time.process_time() - cpu_started) * 1000.0
        if result.summary_text is None:
            raise RuntimeError(f"hermeslab ({self.key}) did not compress the benchmark input: {result.record}")
        return wall, cpu

    def record(self) -> None:
        wall, cpu = self.call()
        self.wall_ms.append(wall)
        self.cpu_ms.append(cpu)


def measure(ref: HermesReference, name: str, messages: list[dict], window: int, repeats: int,
            rng: random.Random) -> dict:
    """Medians over ``repeats`` rounds; each round times Hermes once and every hermeslab variant once."""
    variants = [Variant(messages, window, preset, path, mode)
                for preset in PRESETS for path in PATHS for mode in MODES]
    for variant in variants:
        variant.call()  # warm-up, untimed
    hermes_ms: list[float] = []
    hermes_cpu_ms: list[float] = []
    for _ in range(repeats):
        order: list[Variant | None] = [None, *variants]  # None: Hermes's turn
        rng.shuffle(order)
        for variant in order:
            if variant is None:
                timed = ref.time_compress_cpu(messages, context_length=window, repeats=1)
                hermes_ms += timed["ms"]
                hermes_cpu_ms += timed["cpu_ms"]
            else:
                variant.record()
    hermes_median = statistics.median(hermes_ms)
    clear_token_caches()
    row: dict = {"input": name, "messages": len(messages), "window": window,
                 "rough_tokens": rough_messages_tokens(messages),
                 "tiktoken_tokens": default_counter.count_messages(copy.deepcopy(messages)),
                 "hermes_ms": round(hermes_median, 3), "hermes_cpu_ms": round(statistics.median(hermes_cpu_ms), 3),
                 "hermes_timed_cpu_s": round(sum(hermes_cpu_ms) / 1000, 3)}
    for variant in variants:
        median = statistics.median(variant.wall_ms)
        row[f"hermeslab_{variant.key}_ms"] = round(median, 3)
        row[f"hermeslab_{variant.key}_cpu_ms"] = round(statistics.median(variant.cpu_ms), 3)
        row[f"hermeslab_{variant.key}_timed_cpu_s"] = round(sum(variant.cpu_ms) / 1000, 3)
        row[f"ratio_{variant.key}"] = round(hermes_median / median, 2)
        row[f"cpu_ratio_{variant.key}"] = round(statistics.median(hermes_cpu_ms) / statistics.median(variant.cpu_ms), 2)
    row["targets_met"] = {key: row[key] >= target for key, target in TARGETS.items()}
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
    add_out_option(parser, "compress_vs_hermes")
    options = parser.parse_args()
    if options.repeats < 1 or options.longest < 0:
        parser.error("--repeats must be at least 1 and --longest must not be negative")

    record = Record("compress_vs_hermes")
    synthetic = synthetic_session()
    inputs = [("synthetic-200", synthetic, SYNTHETIC_WINDOW), ("synthetic-200", synthetic, RECORDING_WINDOW)]
    inputs += [(s["id"], s["messages"], RECORDING_WINDOW)
               for s in longest_sessions(options.datasets / MINI_SWE, options.longest)]
    cold_check = cold_counts_check(synthetic)
    rng = random.Random(20_190)
    with HermesReference(timeout=None) as ref:
        worker_cpu_before = ref.worker_cpu_seconds()
        rows = [measure(ref, name, messages, window, options.repeats, rng) for name, messages, window in inputs]
        worker_cpu = ref.worker_cpu_seconds() - worker_cpu_before
        hermes_version = ref.info.get("hermes_version")
    ratio_keys = [key for key in rows[0] if key.startswith(("ratio_", "cpu_ratio_"))]
    min_ratio = {key: min(row[key] for row in rows) for key in ratio_keys}
    report = {
        "benchmark": "compress_vs_hermes",
        "hermes_version": hermes_version,
        "repeats": options.repeats,
        "token_units": TOKEN_UNITS,
        "cold_caches_check": cold_check,
        "cpu_seconds": {
            "hermes_timed": round(sum(row["hermes_timed_cpu_s"] for row in rows), 2),
            "hermes_worker_total": round(worker_cpu, 2),
            "hermeslab_timed": round(sum(row[f"hermeslab_{variant_key(p, a, m)}_timed_cpu_s"] for row in rows
                                         for p in PRESETS for a in PATHS for m in MODES), 2),
            "note": "timed: the timed compress() calls only; hermes_worker_total also holds the worker's warm-up "
                    "calls, deep copies and request decoding; this process's total (process_cpu_seconds) also "
                    "holds copies, priming and encoding requests",
        },
        "rows": rows,
        "min_ratio": min_ratio,
        "median_ratio": {key: statistics.median(row[key] for row in rows) for key in ratio_keys},
        "targets": TARGETS,
        "target_met": {key: min_ratio[key] >= target for key, target in TARGETS.items()},
    }
    report["all_targets_met"] = all(report["target_met"].values())
    record.finish(report, options.out)


if __name__ == "__main__":
    main()
