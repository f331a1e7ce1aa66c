"""Exact token counts: the C counter against bpe-openai and tiktoken, same texts, same process, both encodings.

The texts are what ``TokenCounter`` counts one at a time (message contents,
names, tool-call ids, tool names and arguments), from two corpora: the seeded
synthetic coding session of ``compress_vs_hermes.py`` (200 messages, ~614K
characters) and the first messages of a shared recording (``--recording``,
cut at about as many characters), counted in cl100k_base and in o200k_base.
Each round counts every corpus in every encoding with every backend, in a
shuffled order, so load from other processes falls on all of them alike; per
backend the median and minimum wall milliseconds and the median and minimum CPU
seconds (``time.process_time``) of a whole-corpus pass are reported, with the
speed-up over bpe-openai, and whether every backend gave every text the same
count. The time each backend takes to load (its first use in this process) is
reported too. Every backend runs warm after that: the C counter's table of
character classes fills as code points are first met (a cost of the first
round only, and none for ASCII, whose classes are built in), as the other
backends' regex engines carry their Unicode tables. tiktoken counts cl100k_base only: its o200k_base rank file is
not bundled, and a benchmark downloads nothing.

Usage: python benchmarks/token_count.py [--repeat N] [--recording FILE] [--out FILE]
Prints one JSON object as its last line and writes it to benchmarks/results/token_count.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from _record import ROOT, Record, add_out_option
from compress_vs_hermes import synthetic_session

from hermeslab.core import tokens
from hermeslab.core.tokens import ENCODINGS

RECORDING = ROOT.parent / "shared" / "datasets" / "mini_swe_agent_gemini3pro_swebv.jsonl"


def message_texts(messages: list[dict]) -> list[str]:
    """The non-empty strings ``TokenCounter`` counts in ``messages``, in its order."""
    texts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(part.get("text", "") for part in content if isinstance(part, dict))
        texts.extend((message.get("name") or "", message.get("tool_call_id") or ""))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            texts.extend((function.get("name") or "", function.get("arguments") or ""))
    return [text for text in texts if text]


def recorded_texts(path: Path, chars: int) -> list[str]:
    """The texts of the recording's messages, session after session, until ``chars`` characters."""
    texts: list[str] = []
    total = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            for text in message_texts(json.loads(line)["messages"]):
                texts.append(text)
                total += len(text)
                if total >= chars:
                    return texts
    return texts


def bundled_tiktoken(encoding: str) -> tuple[Callable[[str], int], str] | None:
    """tiktoken for cl100k_base, whose rank file is bundled (o200k_base's would be downloaded)."""
    return tokens._tiktoken(encoding) if encoding == "cl100k_base" else None


def load_backends(encoding: str) -> tuple[dict[str, Callable[[str], int]], dict[str, float]]:
    """Each backend this process has for ``encoding``, and the milliseconds it took to load."""
    makers = {"bpecount": tokens._bpecount, "bpe-openai": tokens._bpe_openai, "tiktoken": bundled_tiktoken}
    backends: dict[str, Callable[[str], int]] = {}
    load_ms: dict[str, float] = {}
    for name, make in makers.items():
        started = time.perf_counter()
        made = make(encoding)
        if made is not None:
            made[0]("warm")
            backends[name] = made[0]
            load_ms[name] = round((time.perf_counter() - started) * 1000, 1)
    return backends, load_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds (every corpus with every backend per round)")
    parser.add_argument("--recording", type=Path, default=RECORDING,
                        help="recorded sessions (JSONL) whose message texts make the second corpus")
    add_out_option(parser, "token_count")
    args = parser.parse_args()
    if args.repeat < 1:
        sys.exit("--repeat must be at least 1")
    if not args.recording.exists():
        sys.exit(f"the recording {args.recording} is missing (--recording FILE takes another)")
    record = Record("token_count")
    synthetic = message_texts(synthetic_session())
    corpora = {"synthetic_session": synthetic,
               "recording": recorded_texts(args.recording, sum(map(len, synthetic)))}
    backends = {}
    load_ms = {}
    for encoding in ENCODINGS:
        backends[encoding], load_ms[encoding] = load_backends(encoding)

    keys = [(encoding, corpus, name) for encoding in ENCODINGS for corpus in corpora for name in backends[encoding]]
    counts = {(encoding, corpus, name): [backends[encoding][name](text) for text in corpora[corpus]]
              for encoding, corpus, name in keys}
    wall: dict[tuple[str, str, str], list[float]] = {key: [] for key in keys}
    cpu: dict[tuple[str, str, str], list[float]] = {key: [] for key in keys}
    rng = random.Random(0)
    for _ in range(args.repeat):
        rng.shuffle(keys)
        for encoding, corpus, name in keys:
            count, texts = backends[encoding][name], corpora[corpus]
            started_wall, started_cpu = time.perf_counter(), time.process_time()
            for text in texts:
                count(text)
            wall[encoding, corpus, name].append(time.perf_counter() - started_wall)
            cpu[encoding, corpus, name].append(time.process_time() - started_cpu)

    report: dict[str, object] = {"repeat": args.repeat, "recording": args.recording.name, "load_ms": load_ms}
    for encoding in ENCODINGS:
        names = list(backends[encoding])
        rows: dict[str, object] = {}
        for corpus, texts in corpora.items():
            key = (encoding, corpus)
            reference = counts[(*key, names[0])]
            row: dict[str, object] = {
                "texts": len(texts),
                "chars": sum(map(len, texts)),
                "tokens": sum(reference),
                "identical": all(counts[(*key, name)] == reference for name in names),
            }
            for name in names:
                row[name] = {"median_ms": round(statistics.median(wall[(*key, name)]) * 1000, 2),
                             "min_ms": round(min(wall[(*key, name)]) * 1000, 2),
                             "cpu_seconds": {"median": round(statistics.median(cpu[(*key, name)]), 5),
                                             "min": round(min(cpu[(*key, name)]), 5)}}
            if "bpecount" in names and "bpe-openai" in names:
                row["speedup_over_bpe_openai"] = round(
                    statistics.median(wall[(*key, "bpe-openai")]) / statistics.median(wall[(*key, "bpecount")]), 2)
                row["cpu_speedup_over_bpe_openai"] = round(
                    statistics.median(cpu[(*key, "bpe-openai")]) / statistics.median(cpu[(*key, "bpecount")]), 2)
            rows[corpus] = row
            print(f"{encoding} {corpus}: {row['texts']} texts, {row['chars']} chars, {row['tokens']} tokens, "
                  f"identical {row['identical']}")
            for name in names:
                figures = row[name]
                print(f"  {name:<11} median {figures['median_ms']:7.2f} ms  min {figures['min_ms']:7.2f} ms  "
                      f"cpu median {figures['cpu_seconds']['median'] * 1000:7.2f} ms")
        report[encoding] = rows
    report["identical"] = all(report[encoding][corpus]["identical"] for encoding in ENCODINGS for corpus in corpora)
    record.finish(report, args.out)


if __name__ == "__main__":
    main()
