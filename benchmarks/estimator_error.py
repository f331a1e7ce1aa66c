"""How far the rough chars/4 estimate is from the tiktoken count, per message, on the shared recordings.

For every message of the recording files, Hermes's per-message estimate
(``rough_message_tokens``: content characters / 4 + 10, plus each tool call's
repr / 4; unit "rough chars/4") is compared with hermeslab's count
(``TokenCounter.count_message``; unit "tiktoken cl100k_base", 3 framing tokens
per message included). Reported: the median of |rough / tiktoken - 1| over
all messages and per role, the median signed error, and for tool results
whose text is JSON (an object or array that parses) the summed rough estimate
over the summed count.

Usage: python benchmarks/estimator_error.py [--datasets DIR] [--out FILE] [FILE ...]
Prints one JSON object as its last line and writes it to benchmarks/results/estimator_error.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from _record import Record, add_out_option

from hermeslab.core.rough import rough_message_tokens
from hermeslab.core.tokens import TokenCounter

DEFAULT_FILES = ("mini_swe_agent_gemini3pro_swebv.jsonl", "tau2_bench_gpt41.jsonl", "tau_bench_airline_gpt4o.jsonl")


def is_json_text(content: object) -> bool:
    if not isinstance(content, str) or not content.lstrip()[:1] in ("{", "["):
        return False
    try:
        return isinstance(json.loads(content), (dict, list))
    except ValueError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--datasets", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "datasets")
    add_out_option(parser, "estimator_error")
    options = parser.parse_args()

    record = Record("estimator_error")
    counter = TokenCounter()
    errors: dict[str, list[float]] = {}
    json_rough = json_tiktoken = 0
    json_messages = 0
    cpu = time.process_time()
    for name in options.files:
        with (options.datasets / name).open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                for message in json.loads(line)["messages"]:
                    rough, counted = rough_message_tokens(message), counter.count_message(message, remember=False)
                    errors.setdefault(str(message.get("role")), []).append(rough / counted - 1)
                    if message.get("role") == "tool" and is_json_text(message.get("content")):
                        json_rough += rough
                        json_tiktoken += counted
                        json_messages += 1
    cpu = time.process_time() - cpu
    everything = [e for values in errors.values() for e in values]
    record.finish({
        "files": options.files,
        "units": {"rough": "rough chars/4 (Hermes's per-message estimate)",
                  "tiktoken": "tiktoken cl100k_base (hermeslab's count, 3 framing tokens per message)"},
        "messages": len(everything),
        "median_abs_error": round(statistics.median(abs(e) for e in everything), 3),
        "median_signed_error": round(statistics.median(everything), 3),
        "median_abs_error_by_role": {role: round(statistics.median(abs(e) for e in values), 3)
                                     for role, values in sorted(errors.items())},
        "messages_by_role": {role: len(values) for role, values in sorted(errors.items())},
        "json_tool_results": {"messages": json_messages, "rough_tokens": json_rough,
                              "tiktoken_tokens": json_tiktoken,
                              "rough_over_tiktoken": round(json_rough / json_tiktoken, 3) if json_tiktoken else None},
        "cpu_seconds": {"measuring": round(cpu, 2)},
    }, options.out)


if __name__ == "__main__":
    main()
