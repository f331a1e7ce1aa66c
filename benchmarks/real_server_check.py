"""A fixed script of what hermeslab needs from an OpenAI-compatible server, run against a real one.

    python benchmarks/real_server_check.py http://127.0.0.1:8080/v1 --model gemma --context-length 8192

Each check runs through the real ``openai`` client path (``model.base_url`` set)
with a throw-away lab, and reports whether it passed and what it saw:

* ``chat`` — one non-streamed turn completes;
* ``stream`` — one streamed turn completes with text, and whether the server
  reported usage in the stream or hermeslab had to estimate it;
* ``tools`` — a turn with tools offered completes (``tool_choice`` as
  configured); whether the model called a tool is reported, not required;
* ``compression`` — a few turns and a ``/compress``: the LLM summariser,
  through this server, writes at least one applied summary (automatic or
  forced; at a small window the turns may have compressed everything there
  was before the forced one), and a later turn still completes;
* ``oversized_message`` — a message larger than the window is refused before it
  is sent, and the next turn completes;
* ``server_overflow`` — with hermeslab told the window is four times
  ``--context-length``, a long history reaches the server's real limit; the
  overflow must be recognised and the turn complete after compression;
* ``ab`` — an A/B run of two configs over one short recording (the first
  ``--ab-turns`` turns of the project's shortest recorded session) at a small
  window (``--ab-window``), with the LLM summariser at this server and a low
  summary cap (``--ab-summary-cap`` tokens), so that it finishes in minutes on
  a small local model: every cell must finish without its summariser falling
  back, at least one summary must have been written, and where the server
  counts its tasks (llama-server's ``GET /slots``) it must have served
  requests meanwhile. The run sends no more requests at once than the server
  reports slots. Before it starts it says how long it should take: the same
  A/B with the extractive summariser counts the summary calls and their
  prompts, and the server's pace measured by the earlier checks (llama-server's
  ``timings``) prices them. Every setting the check changes from the preset
  is reported beside the result (``deviations_from_preset``).

The last line printed is one JSON object (also stored as
``benchmarks/results/real_server_check.json`` unless ``--out`` says otherwise),
with what the server says about itself (llama-server's ``/props``: build,
model, slots, window, template capabilities) and, given ``--server-flags``,
the command line it was started with.
No check needs the model to answer well: a small base model passes them all.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from _record import ROOT, Record, add_out_option

import httpx2

from hermeslab.core.config import Config
from hermeslab.core.events import ApiCallFinished, CompressionEvent, EventBus
from hermeslab.providers.openai_compat import server_root
from hermeslab.providers.pace import pace_of
from hermeslab.recordings import Recording
from hermeslab.runtime import Runtime

DATASET = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"
FILLER = "The quick brown fox jumps over the lazy dog while the lab records every token. "


class Checks:
    """Runs the checks in order against one endpoint, each in a fresh runtime and lab."""

    def __init__(self, url: str, model: str, api_key: str, context_length: int, max_tokens: int, workdir: Path, *,
                 ab_turns: int = 6, ab_window: int = 4096, ab_summary_cap: int = 128):
        self.url, self.model, self.api_key = url, model, api_key
        self.context_length, self.max_tokens, self.workdir = context_length, max_tokens, workdir
        self.ab_turns, self.ab_window, self.ab_summary_cap = ab_turns, ab_window, ab_summary_cap

    def config(self, **overrides: Any) -> Config:
        settings: dict[str, Any] = {
            "model.name": self.model, "model.base_url": self.url, "model.api_key": self.api_key,
            "model.context_length": self.context_length, "model.max_tokens": self.max_tokens,
            "store.path": str(self.workdir / f"lab-{time.monotonic_ns()}.duckdb"),
            "memory.path": str(self.workdir), "skills.enabled": False, "tools.workspace": str(self.workdir),
        }
        settings.update(overrides)
        return Config().with_overrides(settings)

    def run(self, config: Config, body: Callable[[Runtime, list[Any]], dict[str, Any]]) -> dict[str, Any]:
        bus, seen = EventBus(), []
        bus.subscribe(seen.append, kinds=(ApiCallFinished, CompressionEvent))
        started = time.perf_counter()
        try:
            with Runtime(config, source="real_server_check", bus=bus) as runtime:
                result = body(runtime, seen)
        except Exception as exc:  # a check that raises has failed; the others still run
            result = {"passed": False, "error": f"{type(exc).__name__}: {exc}"}
        result["seconds"] = round(time.perf_counter() - started, 2)
        return result

    def chat(self) -> dict[str, Any]:
        def body(runtime: Runtime, seen: list[Any]) -> dict[str, Any]:
            turn = runtime.agent.chat("Say hello in one short sentence.")
            return {"passed": turn.status == "completed", "status": turn.status, "error": turn.error,
                    "characters": len(turn.text)}
        return self.run(self.config(**{"agent.stream": False}), body)

    def stream(self) -> dict[str, Any]:
        def body(runtime: Runtime, seen: list[Any]) -> dict[str, Any]:
            turn = runtime.agent.chat("Count from one to five.")
            calls = [e for e in seen if isinstance(e, ApiCallFinished)]
            return {"passed": turn.status == "completed" and bool(turn.text), "status": turn.status,
                    "error": turn.error, "characters": len(turn.text),
                    "usage_reported": bool(calls) and not any(c.usage_estimated for c in calls)}
        return self.run(self.config(**{"agent.stream": True}), body)

    def tools(self) -> dict[str, Any]:
        def body(runtime: Runtime, seen: list[Any]) -> dict[str, Any]:
            turn = runtime.agent.chat("Use the todo tool to add the item 'check the server', then say done.")
            called = any(m.get("role") == "tool" for m in turn.messages)
            return {"passed": turn.status == "completed", "status": turn.status, "error": turn.error,
                    "tool_called": called}
        return self.run(self.config(**{"agent.stream": True}), body)

    def compression(self) -> dict[str, Any]:
        def body(runtime: Runtime, seen: list[Any]) -> dict[str, Any]:
            # Long enough that the part before the kept tail is worth a summary even when the model answers each
            # note with one word (six notes left a span whose summary could not beat it, quote and frame paid).
            for index in range(8):
                runtime.agent.chat(f"Note {index}: {FILLER * 30}Reply with one word.")
            compaction = runtime.agent.compress()
            after = runtime.agent.chat("What was note 2 about? One sentence.")
            applied = [e for e in seen if isinstance(e, CompressionEvent) and e.mode != "none"]
            summarised = [e for e in applied if e.strategy == "summary"]
            by_model = [e for e in summarised if not e.fallback_used]
            return {"passed": bool(by_model) and after.status == "completed",
                    "summaries": len(summarised), "summaries_by_fallback": len(summarised) - len(by_model),
                    "forced_changed": compaction is not None and compaction.changed,
                    "applied": [f"{e.trigger}:{e.strategy}" for e in applied],
                    "status_after": after.status, "error": after.error}
        return self.run(self.config(**{"compression.summariser": "llm"}), body)

    def oversized_message(self) -> dict[str, Any]:
        def body(runtime: Runtime, seen: list[Any]) -> dict[str, Any]:
            refused = runtime.agent.chat(FILLER * (self.context_length // 4))
            after = runtime.agent.chat("Say hello.")
            return {"passed": refused.status != "completed" and after.status == "completed",
                    "refusal": refused.error, "status_after": after.status, "error": after.error}
        return self.run(self.config(), body)

    def server_overflow(self) -> dict[str, Any]:
        def body(runtime: Runtime, seen: list[Any]) -> dict[str, Any]:
            statuses = []
            for index in range(6):
                turn = runtime.agent.chat(f"Part {index}: {FILLER * (self.context_length // 60)}Reply with one word.")
                statuses.append(turn.status)
            compressions = [e for e in seen if isinstance(e, CompressionEvent)]
            triggers = [e.trigger for e in compressions]
            return {"passed": all(s == "completed" for s in statuses) and "overflow" in triggers,
                    "statuses": statuses, "compressions": triggers}
        return self.run(self.config(**{"model.context_length": self.context_length * 4}), body)

    def ab_settings(self, threshold: float, summariser: str) -> dict[str, Any]:
        """What the A/B check changes from the preset, for one of its two configs."""
        return {"model.context_length": self.ab_window, "compression.summariser": summariser,
                "compression.threshold": threshold, "compression.min_threshold_tokens": 1000,
                "compression.summary_max_tokens": self.ab_summary_cap,
                "compression.summary_min_tokens": self.ab_summary_cap}

    def ab(self) -> dict[str, Any]:
        from hermeslab.eval.ab import failure_line, run_ab

        started = time.perf_counter()
        recording = short_recording(DATASET, self.ab_turns)
        thresholds = {"low": 0.7, "high": 0.85}
        configs = {name: self.config(**self.ab_settings(threshold, "llm")) for name, threshold in thresholds.items()}
        preset = self.config()
        deviations = {key: {"preset": _setting(preset, key), "used": value}
                      for key, value in self.ab_settings(thresholds["low"], "llm").items()
                      if key != "compression.threshold" and _setting(preset, key) != value}
        deviations["compression.threshold"] = {"preset": preset.compression.threshold, "used": thresholds}
        rehearsal = run_ab([recording], {name: self.config(**self.ab_settings(threshold, "extractive"))
                                         for name, threshold in thresholds.items()}, executor="serial",
                           progress=False)
        expected = expected_duration(rehearsal, pace_of(server_root(self.url)), answer_cap=2 * self.ab_summary_cap)
        print(f"ab: {expected['summary_calls']} summary calls expected over {recording.id}; "
              + (f"about {expected['seconds']:.0f} s at the server's measured pace" if expected["seconds"] is not None
                 else "the server's pace is not measured yet (run the other checks first for an estimate)"),
              file=sys.stderr)
        before = server_tasks(self.url)
        try:
            frame = run_ab([recording], configs, progress=False)
        except Exception as exc:  # the run itself could not start: the check failed, the others still run
            return {"passed": False, "error": f"{type(exc).__name__}: {exc}", "expected": expected,
                    "deviations_from_preset": deviations, "seconds": round(time.perf_counter() - started, 2)}
        after = server_tasks(self.url)
        served = None if before is None or after is None else after - before
        summaries = int(frame["summary_calls"].fillna(0).sum()) if "summary_calls" in frame else 0
        fallbacks = int(frame["summary_fallbacks"].fillna(0).sum()) if "summary_fallbacks" in frame else 0
        cells_ok = bool(len(frame)) and bool((frame["status"] == "ok").all())
        reached = summaries > 0 and fallbacks == 0 and (served is None or served > 0)
        return {"passed": cells_ok and reached, "recording": recording.id, "window": self.ab_window,
                "cells": len(frame), "cells_failed": int((frame["status"] != "ok").sum()),
                "failure": failure_line(frame), "summaries": summaries, "summaries_by_fallback": fallbacks,
                "server_tasks_served": served, "expected": expected, "deviations_from_preset": deviations,
                "seconds": round(time.perf_counter() - started, 2)}


def short_recording(path: Path, turns: int) -> Recording:
    """The shortest recording of ``path`` (fewest tokens), cut before its user turn number ``turns + 1``."""
    from hermeslab.eval.ab import gather_recordings, recording_weight

    found, _ = gather_recordings([path])
    if not found:
        raise ValueError(f"{path} holds no usable recording")
    shortest = min(found, key=recording_weight)
    users = [index for index, message in enumerate(shortest.messages) if message.get("role") == "user"]
    end = users[turns] if len(users) > turns else len(shortest.messages)
    data = shortest.to_dict()
    data.update(id=f"{shortest.id}/first-{turns}-turns", messages=data["messages"][:end],
                meta={"cut_from": shortest.id, "turns": min(turns, len(users))})
    return Recording.from_dict(data)


def expected_duration(rehearsal: Any, pace: Any, *, answer_cap: int) -> dict[str, Any]:
    """Summary calls and prompt tokens the extractive rehearsal of the A/B counted, and the seconds they should
    take at the server's measured pace (None before it was measured), every answer written to its cap."""
    calls = int(rehearsal["summary_calls"].fillna(0).sum()) if "summary_calls" in rehearsal else 0
    prompt = int(rehearsal["summary_input_tokens"].fillna(0).sum()) if "summary_input_tokens" in rehearsal else 0
    seconds = pace.expected_seconds(prompt, calls * answer_cap)
    return {"summary_calls": calls, "summary_prompt_tokens": prompt, "answer_cap": answer_cap,
            "prompt_per_second": pace.prompt_per_second, "generated_per_second": pace.generated_per_second,
            "seconds": None if seconds is None else round(seconds, 1)}


def _setting(config: Config, key: str) -> Any:
    section, name = key.split(".", 1)
    return getattr(getattr(config, section), name)


def server_tasks(url: str) -> int | None:
    """The number of the latest task the server's slots ran (llama-server's ``GET /slots``); None elsewhere."""
    try:
        answer = httpx2.get(server_root(url) + "/slots", timeout=10.0)
        slots = answer.json() if answer.status_code == 200 else None
    except (httpx2.HTTPError, ValueError):
        return None
    tasks = [slot.get("id_task") for slot in slots or () if isinstance(slot, dict)]
    known = [task for task in tasks if isinstance(task, int)]
    return max(known) if known else None


def server_props(url: str) -> dict[str, Any] | None:
    """What the server says about itself (llama-server's ``GET /props``), trimmed to what identifies the run."""
    try:
        answer = httpx2.get(server_root(url) + "/props", timeout=10.0)
        props = answer.json() if answer.status_code == 200 else None
    except (httpx2.HTTPError, ValueError):
        return None
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings") or {}
    path = props.get("model_path")  # the file's name only: where it lives is the machine's business
    return {"build_info": props.get("build_info"), "model_file": Path(path).name if isinstance(path, str) else None,
            "total_slots": props.get("total_slots"), "n_ctx": settings.get("n_ctx"),
            "chat_template_caps": props.get("chat_template_caps")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="default", help="model name sent to the server (default: default)")
    parser.add_argument("--api-key", default="none", help="API key sent to the server (default: none)")
    parser.add_argument("--context-length", type=int, default=8192,
                        help="the server's context window in tokens (default 8192; below ~4K the system prompt "
                             "and tool schemas leave a summary no room, so the compression check fails)")
    parser.add_argument("--max-tokens", type=int, default=64, help="output cap per request (default 64)")
    parser.add_argument("--only", action="append", help="run only this check (repeatable)")
    parser.add_argument("--ab-turns", type=int, default=6,
                        help="turns of the shortest recording the ab check replays (default 6)")
    parser.add_argument("--ab-window", type=int, default=4096, help="the ab check's window in tokens (default 4096)")
    parser.add_argument("--ab-summary-cap", type=int, default=128,
                        help="the ab check's summary budget in tokens (default 128; answers up to twice that)")
    parser.add_argument("--server-flags", default=None,
                        help="the command line the server was started with, stored with the result")
    add_out_option(parser, "real_server_check")
    args = parser.parse_args(argv)
    record = Record("real_server_check")
    names = ("chat", "stream", "tools", "compression", "oversized_message", "server_overflow", "ab")
    chosen = args.only or list(names)
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        parser.error(f"unknown check {unknown[0]!r} (choose from {', '.join(names)})")
    for option in ("ab_turns", "ab_window", "ab_summary_cap"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be a positive number, got {getattr(args, option)}")
    with tempfile.TemporaryDirectory(prefix="hermeslab-server-check-") as tmp:
        checks = Checks(args.url, args.model, args.api_key, args.context_length, args.max_tokens, Path(tmp),
                        ab_turns=args.ab_turns, ab_window=args.ab_window, ab_summary_cap=args.ab_summary_cap)
        results = {}
        for name in chosen:
            results[name] = getattr(checks, name)()
            print(f"{name}: {'passed' if results[name]['passed'] else 'FAILED'}", file=sys.stderr)
    report = {"url": args.url, "model": args.model, "context_length": args.context_length,
              "server": server_props(args.url), "server_flags": args.server_flags,
              "passed": sorted(n for n, r in results.items() if r["passed"]),
              "failed": sorted(n for n, r in results.items() if not r["passed"]), "checks": results}
    record.finish(report, args.out)
    return 0 if not report["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
