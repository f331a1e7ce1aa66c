"""An A/B run as Inspect AI evaluations: one log per config, one sample per recorded session.

Each config is an evaluation of the task ``hermeslab-ab`` whose solver is the
config (its name, hash, YAML without secrets and what it changed from its
preset in the metadata), so ``inspect view`` lists the configs of a run side
by side under one run id. A sample's scores are the row's metrics, one score
per numeric metric; a metric the session leaves undefined (NaN, such as a
retention with no fact at risk) is Inspect's unscored score. A failed cell is
a sample with its error and no scores. The recorded conversation is the
sample's messages when the recordings are given.

The token metrics are scores, not model usage: they are counted in the row's
``token_unit`` over a replay, not billed by any server, so the log carries no
``model_usage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pandas as pd

from hermeslab.core.config import Config
from hermeslab.core.messages import text_of
from hermeslab.recordings import Recording

from ..results import config_records
from ..stats import metric_columns
from .inspect_log import LogHead, chat_messages, eval_log, eval_sample, number_score, plain_value, require_inspect

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

TASK = "hermeslab-ab"
UNDEFINED = "not defined for this session"


def ab_logs(frame: pd.DataFrame, configs: Mapping[str, Config], *,
            recordings: Mapping[str, Recording] | None = None, created: datetime | None = None) -> list[EvalLog]:
    """One finished evaluation per config of ``frame`` (``eval.ab.run_ab``'s), configs in the frame's order.

    ``configs`` maps each config name of the frame to its Config (the model it
    names is the log's model). Raises ValueError for an empty frame or a
    config it does not name.
    """
    require_inspect()
    if frame.empty:
        raise ValueError("the A/B frame has no rows to write")
    names = list(dict.fromkeys(frame["config"]))
    unknown = [name for name in names if name not in configs]
    if unknown:
        raise ValueError(f"no Config given for the A/B config(s) {', '.join(map(repr, unknown))}")
    attrs = frame.attrs
    records = {record["name"]: record for record in config_records({name: configs[name] for name in names})}
    metrics = metric_columns(frame)
    notes = [str(line) for key in ("nothing_compressed", "compacting_every_call") for line in attrs.get(key, [])]
    run_id = str(attrs.get("run_id") or "unnamed-run")
    logs = []
    for name in names:
        config = configs[name]
        head = LogHead(
            task=TASK, model=config.model.name, run_id=run_id, created=created or datetime.now(timezone.utc),
            dataset=f"A/B run {run_id}", task_args={"config": name, "baseline": names[0]}, solver=name,
            tags=(name,), metadata={"config": records[name],
                                     "deviations_from_preset": attrs.get("deviations_from_preset", {}).get(name, {}),
                                     "hermes_texts": attrs.get("hermes_texts", {}).get(name),
                                     "run_notes": notes,
                                     "skipped": [str(problem) for problem in attrs.get("problems", [])]})
        rows = frame[frame["config"] == name]
        logs.append(eval_log(head, [cell_sample(row, metrics, config.model.name, recordings or {})
                                    for row in rows.to_dict("records")]))
    return logs


def cell_sample(row: Mapping[str, Any], metrics: list[str], model: str,
                recordings: Mapping[str, Recording]) -> EvalSample:
    """One (session, config) cell: its metrics as scores, its other columns as metadata."""
    session = str(row["session_id"])
    recording = recordings.get(session)
    messages = chat_messages(recording.messages, recording.model) if recording is not None else []
    first_user = next((text_of(m) for m in recording.messages if m.get("role") == "user"), session) \
        if recording is not None else session
    failed = row["status"] != "ok"
    scores = {} if failed else {metric: number_score(plain_value(row[metric]), why_undefined=UNDEFINED)
                                for metric in metrics}
    metadata = {key: plain_value(value) for key, value in row.items()
                if key not in metrics and key not in ("session_id", "error")}
    if recording is not None:
        metadata["recorded_model"] = recording.model
    return eval_sample(session, input=first_user, messages=messages, model=model, scores=scores,
                       metadata=metadata, error=str(row["error"] or "the cell failed") if failed else None)
