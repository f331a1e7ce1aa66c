"""The probe exam against a real model behind an OpenAI-compatible server: usable answers, pace, prompt cache.

A few recordings are replayed under the configs at one window; every probe of
every effective compaction is asked of the server's model in the three arms
(compacted, ceiling, floor) and judged by the deterministic matcher. The
probes that share a context are sent one after another, the question last,
so a server with a prompt cache (llama-server keeps the last prompt's KV per
slot) evaluates only the part after the shared prefix.

Reported, besides the scorecard's overall rows:

* ``usable_answer_share`` — of the questions asked (fittable arms), those
  whose call returned a non-empty answer the judge could score (right or
  wrong; ``unknown_answer_share`` and ``answer_words_median`` say more of
  what the answers were);
* ``probes_per_second`` — questions answered per second of the exam's wall time;
* ``prompt_tokens_sent`` / ``prompt_tokens_evaluated`` — prompt tokens as the
  server counted them, and those it had to evaluate (sent minus those taken
  from its cache: llama-server's ``timings``), over every call;
* ``server_cached_prompt_share`` — cached / sent over the calls that follow
  another call with the same context (the probes that share a context: the
  same recording, config, window, compaction and arm), where the cache can
  serve the prefix; ``server_cached_prompt_share_all_calls`` over every call;
* the answerer (the server's model, as the exam names it), the judge, the
  controls, the token unit of retained tokens, and what the server says of
  itself at ``GET /props`` (build, model file, slots, window) with the flags
  it was started with when given (``--server-flags``).

Every answer goes to a fresh lab, so each question costs a real call.

Usage: python benchmarks/exam_real_model.py URL [--recordings FILE ...] [--limit 3] [--window 8000]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import pandas as pd
from _record import ROOT, Record, add_out_option

from hermeslab.eval.ab import gather_recordings
from hermeslab.eval.probes.choose import answerer_from, endpoint_base
from hermeslab.eval.probes.run import ALL, run_exam
from hermeslab.eval.probes.scorecard import CONTROLS, SCORE, overall_of, problem, scorecard
from hermeslab.providers.openai_compat import server_root
from hermeslab.providers.server_props import read_props

SHIPPED = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"
#: The part of the server's window a context may fill, by the replay's count: the server counts in its own
#: tokens (another tokenizer, the chat template's markers), so a context at the edge by ours may not fit by its.
WINDOW_SHARE = 0.8
#: The groups of probes sent with one context.
CONTEXT = ["recording_id", "config", "window", "compaction", "arm"]


def finite(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 4)


def cache_figures(frame: pd.DataFrame) -> dict[str, object]:
    """Prompt tokens sent and evaluated, and the server's cached share where probes share a context."""
    calls = frame[~frame["cached"].astype(bool) & frame["prompt_tokens"].notna()]
    follow = calls[calls.duplicated(CONTEXT, keep="first")]
    known = calls[calls["server_cached_tokens"].notna()]
    sent, cached = float(known["prompt_tokens"].sum()), float(known["server_cached_tokens"].sum())
    shared = follow[follow["server_cached_tokens"].notna()]
    shared_sent = float(shared["prompt_tokens"].sum())
    return {
        "calls_with_usage": len(calls), "calls_with_cache_figures": len(known),
        "prompt_tokens_sent": int(sent), "prompt_tokens_evaluated": int(sent - cached),
        "server_cached_prompt_share_all_calls": finite(cached / sent) if sent else None,
        "shared_context_calls": len(shared),
        "server_cached_prompt_share": finite(float(shared["server_cached_tokens"].sum()) / shared_sent)
        if shared_sent else None,
    }


def server_facts(base: str, flags: str | None) -> dict[str, object]:
    props = read_props(server_root(base))
    facts: dict[str, object] = {"props": None if props is None else {
        "build": props.build, "model_path": props.model_path, "slots": props.slots,
        "context_length": props.context_length, "supports_tools": props.supports_tools}}
    if flags:
        facts["flags"] = flags
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8089/v1")
    parser.add_argument("--recordings", nargs="+", default=[str(SHIPPED)], metavar="FILE",
                        help="recorded sessions (JSONL; default the shipped ones)")
    parser.add_argument("--limit", type=int, default=3, help="sessions taken from each file (default 3)")
    parser.add_argument("--window", type=int, default=8_000, help="context window replayed at, tokens (default 8000)")
    parser.add_argument("--config", action="append", metavar="SPEC", help="configs (default seed and hermes-0.19)")
    parser.add_argument("--type", action="append", metavar="TYPE", help="only these probe types (default all)")
    parser.add_argument("--model", help="the server's model (default: the first it lists)")
    parser.add_argument("--answerer-window", type=int,
                        help=f"longest context asked, in the replay's tokens (default {WINDOW_SHARE:.0%} of the "
                             "server's slot window from /props; none when it does not say)")
    parser.add_argument("--max-tokens", type=int, default=48, help="cap of each answer, tokens (default 48)")
    parser.add_argument("--server-flags", help="the command line the server was started with, recorded as given")
    add_out_option(parser, "exam_real_model")
    args = parser.parse_args()
    record = Record("exam_real_model")
    base = endpoint_base(args.url)
    facts = server_facts(base, args.server_flags)
    served = (facts["props"] or {}).get("context_length")
    window = args.answerer_window or (int(served * WINDOW_SHARE) if served else None)
    answerer = answerer_from(args.url, model=args.model, window=window, max_tokens=args.max_tokens)
    recordings, problems = gather_recordings(args.recordings, limit=args.limit)
    for line in problems:
        print(f"skipped {line}", flush=True)
    configs = args.config or ["hermes-0.19", "seed"]
    with tempfile.TemporaryDirectory(prefix="exam-real-") as folder:
        started = time.perf_counter()
        frame = run_exam(recordings, configs, windows=[args.window], answerer=answerer,
                         lab=Path(folder) / "lab.duckdb", probe_types=args.type or ALL, counter="tiktoken")
        seconds = time.perf_counter() - started
    asked = frame[frame["fittable"].eq(True)]
    answered = asked[asked["error"].isna() & asked["answer"].fillna("").str.strip().ne("")]
    usable = answered[answered["points"].notna()]
    table = scorecard(frame, configs[0], n_resamples=1_000) if len(frame) else None
    report = {
        "url": base, "answerer": frame.attrs.get("answerer", answerer.name), "model": answerer.model,
        "judge": frame.attrs.get("judge"), "controls": CONTROLS, "score": SCORE,
        "token_unit": frame.attrs.get("token_unit"), "answerer_window": window, "max_tokens": args.max_tokens,
        **facts, "recordings": [recording.id for recording in recordings], "configs": configs, "window": args.window,
        "probes": frame.attrs.get("probes", 0), "questions": len(frame), "asked": len(asked),
        "unfittable": int((~frame["fittable"].eq(True)).sum()), "errors": int(asked["error"].notna().sum()),
        "first_error": None if asked["error"].dropna().empty else str(asked["error"].dropna().iloc[0])[:300],
        "usable_answer_share": finite(len(usable) / len(asked)) if len(asked) else None,
        "unknown_answer_share": finite(float(usable["answer"].str.strip().str.lower().eq("unknown").mean()))
        if len(usable) else None,
        "answer_words_median": finite(float(usable["answer"].str.split().str.len().median())) if len(usable) else None,
        "calls_made": frame.attrs.get("calls_made", 0), "exam_seconds": round(seconds, 1),
        "probes_per_second": finite(len(answered) / seconds) if seconds else None,
        **cache_figures(frame),
        "ceiling": finite(usable.loc[usable["arm"] == "ceiling", "score"].mean()),
        "floor": finite(usable.loc[usable["arm"] == "floor", "score"].mean()),
        "overall": {} if table is None else {
            f"{config}@{w}": {"raw": finite(row.raw), "normalised": finite(row.normalised), "note": row.note,
                              "probes": int(row.n_probes)} for (w, config), row in overall_of(table).iterrows()},
        "problem": problem(frame),
    }
    record.finish(report, args.out)
    return 1 if report["problem"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
