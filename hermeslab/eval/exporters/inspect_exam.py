"""A probe exam as Inspect AI evaluations: one log per (config, window, arm), one sample per probe asked.

The exam asks every probe of a compaction in three arms (the compacted
context, the uncompacted ceiling, the question-only floor); each arm of each
config at each window is an evaluation of the task ``hermeslab-exam``, whose
model is the answerer and whose ``grader`` role is the judge. A sample is the
question (input), its gold (target) and the answer (output), scored
``points / 2``; a probe that was not scored is Inspect's unscored score with
why (``unfittable``: the context and question exceed the answerer's window;
``call_failed``: the answer or the judgement failed, also the sample's
error). The sample's messages are the question and the answer only: the arm's
context is the replay's and is not in the exam's rows.

The rows keep each answer's prompt tokens but not its completion tokens, so
the logs carry no model usage; with a lab, every exam call is a row of its
``api_calls`` with its full usage, under the session ``frame.attrs["exam_session"]``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pandas as pd

from .inspect_log import LogHead, eval_log, eval_sample, number_score, plain_value, require_inspect

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

TASK = "hermeslab-exam"
#: Run-wide facts of ``run_exam``'s ``frame.attrs`` copied into every log.
RUN_FACTS = ("bank_hash", "token_unit", "calls_made", "cache_hits", "probes", "sessions", "exam_session")
#: Row columns that describe a probe and go into its sample's metadata.
PROBE_FACTS = ("recording_id", "compaction", "probe_id", "probe_type", "points", "fittable", "retained_tokens",
               "removed_tokens", "token_unit", "prompt_tokens", "server_cached_tokens", "cached",
               "source_message", "source_start", "source_end")


def exam_logs(frame: pd.DataFrame, *, created: datetime | None = None) -> list[EvalLog]:
    """One finished evaluation per (config, window, arm) of ``frame`` (``eval.probes.run.run_exam``'s)."""
    require_inspect()
    if frame.empty:
        raise ValueError("the exam frame has no rows to write (no compaction removed anything to ask about)")
    attrs = frame.attrs
    facts = {key: plain_value(attrs.get(key)) for key in RUN_FACTS if key in attrs}
    facts["skipped"] = [str(problem) for problem in attrs.get("problems", [])]
    moment = created or datetime.now(timezone.utc)
    logs = []
    for (config, window, arm), rows in frame.groupby(["config", "window", "arm"], sort=False):
        answerer, judge = str(rows["answerer"].iloc[0]), str(rows["judge"].iloc[0])
        head = LogHead(task=TASK, model=answerer, run_id=f"exam:{attrs.get('bank_hash', '')}", created=moment,
                       dataset=f"probe bank {attrs.get('bank_hash', '')}",
                       task_args={"config": config, "window": int(window), "arm": arm}, solver=config,
                       tags=(config, arm), metadata=facts, roles={"grader": judge})
        logs.append(eval_log(head, [probe_sample(row) for row in rows.to_dict("records")]))
    return logs


def probe_sample(row: dict[str, Any]) -> EvalSample:
    """One probe asked in one arm: question, gold, answer and its score."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

    answerer, answer, error = str(row["answerer"]), row["answer"], plain_value(row["error"])
    messages = [ChatMessageUser(content=row["question"])]
    if isinstance(answer, str):
        messages.append(ChatMessageAssistant(content=answer, model=answerer))
    if error is not None:
        why, explanation = "call_failed", str(error)
    elif not row["fittable"]:
        why, explanation = "unfittable", "the context and the question exceed the answerer's window"
    else:
        why, explanation = "not_scored", f"judged by {row['judge']}: {plain_value(row['points'])} of 2 points"
    score = number_score(plain_value(row["score"]), why_undefined=why, explanation=explanation,
                         answer=answer if isinstance(answer, str) else None)
    golds = str(row["gold"]).split("\n")
    return eval_sample(f"{row['recording_id']}/{row['compaction']}/{row['probe_id']}", input=row["question"],
                       target=golds if len(golds) > 1 else golds[0], messages=messages, model=answerer,
                       scores={"probe": score}, metadata={key: plain_value(row[key]) for key in PROBE_FACTS},
                       error=error)
