"""Redaction of a summarised middle: the one-pass prefiltered ``redact`` against every rule over the whole text.

The LLM summariser redacts the whole middle it summarises, so the text is
built the way that middle is: the messages of a recording (by default the
shared mini-swe-agent one; ``--recording FILE`` takes any, such as
``datasets/hermeslab_offline_sessions.jsonl``) as labelled blocks ([USER], [ASSISTANT] with its tool calls, [TOOL]) joined by
blank lines, cut at ``--chars`` characters. Each side runs ``--repeat`` times;
its CPU seconds (``time.process_time``) are reported as the median and the
minimum. ``--against REV`` adds a third side, named by its commit:
``redact`` as it is in that git revision, read with ``git show`` (a
read-only command).

Prints one JSON object as its last line and writes it to benchmarks/results/redaction.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from _record import ROOT, Record, add_out_option

from hermeslab.context.redact import redact, redact_exhaustive

RECORDING = ROOT.parent / "shared" / "datasets" / "mini_swe_agent_gemini3pro_swebv.jsonl"


def summarised_middle(path: Path, chars: int) -> str:
    """The recordings' messages as the summariser serialises a span, up to ``chars`` characters."""
    blocks: list[str] = []
    total = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            for message in json.loads(line)["messages"][1:]:
                block = f"[{message['role'].upper()}]\n{message.get('content') or ''}"
                for call in message.get("tool_calls") or []:
                    block += f"\n- {call['function']['name']}({call['function']['arguments']})"
                blocks.append(block)
                total += len(block) + 2
                if total >= chars:
                    return "\n\n".join(blocks)[:chars]
    return "\n\n".join(blocks)[:chars]


def redact_at(revision: str) -> tuple[str, Callable[[str], str]]:
    """``redact`` as it was in ``revision`` (named by its commit), loaded from ``git show`` into a throwaway package.

    The rule table is loaded first where that revision keeps it in a module of its own.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    commit = git("rev-parse", "--short=12", revision).strip()
    package = f"redact_at_{commit}"
    sys.modules[package] = importlib.util.module_from_spec(
        importlib.util.spec_from_loader(package, loader=None, is_package=True))

    def load(stem: str):
        name = f"{package}.{stem}"
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
        sys.modules[name] = module
        path = f"hermeslab/context/{stem}.py"
        exec(compile(git("show", f"{commit}:{path}"), f"{commit}:{path}", "exec"), module.__dict__)
        return module

    if git("ls-tree", "--name-only", commit, "hermeslab/context/secret_patterns.py").strip():
        load("secret_patterns")
    return f"redact@{commit}", load("redact").redact


def cpu_seconds(function: Callable[[str], str], text: str, repeat: int) -> tuple[list[float], str]:
    times: list[float] = []
    out = text
    for _ in range(repeat):
        started = time.process_time()
        out = function(text)
        times.append(time.process_time() - started)
    return times, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", type=Path, default=RECORDING,
                        help="recorded sessions (JSONL) whose messages make the text (default: the shared "
                             "mini-swe-agent file)")
    parser.add_argument("--chars", type=int, default=600_000, help="length of the text in characters")
    parser.add_argument("--repeat", type=int, default=7, help="runs per side")
    parser.add_argument("--against", metavar="REV", help="also time redact() of this git revision")
    add_out_option(parser, "redaction")
    args = parser.parse_args()
    if not args.recording.exists():
        sys.exit(f"the recording {args.recording} is missing (--recording FILE takes another)")
    record = Record("redaction")
    text = summarised_middle(args.recording, args.chars)
    sides: dict[str, Callable[[str], str]] = {"all_patterns": redact_exhaustive, "prefiltered": redact}
    if args.against:
        side, function = redact_at(args.against)
        sides[side] = function
    cpu: dict[str, dict[str, float]] = {}
    outputs: dict[str, str] = {}
    for side, function in sides.items():
        times, outputs[side] = cpu_seconds(function, text, args.repeat)
        cpu[side] = {"median": round(statistics.median(times), 4), "min": round(min(times), 4)}
        print(f"{side:<20} median {cpu[side]['median']:.4f} s  min {cpu[side]['min']:.4f} s")
    record.finish({
        "recording": args.recording.name,
        "chars": len(text),
        "lines": text.count("\n") + 1,
        "repeat": args.repeat,
        "masks": outputs["prefiltered"].count("[REDACTED:"),
        "identical": outputs["prefiltered"] == outputs["all_patterns"],
        "cpu_seconds": cpu,
        "speedup": round(cpu["all_patterns"]["median"] / cpu["prefiltered"]["median"], 2),
    }, args.out)


if __name__ == "__main__":
    main()
