"""hermeslab's records in Inspect AI's log types: messages, token usage, scores, samples and a whole log.

Inspect (``inspect-ai``) is an optional extra, imported only when a log is
built, so the base install imports hermeslab without it; without it the
build stops with one line naming ``pip install 'hermeslab[inspect]'``.
Everything here is a pure conversion: the sources (``inspect_lab``,
``inspect_ab``, ``inspect_exam``) read what they need and these functions
only reshape it.

Token usage follows Inspect's own OpenAI provider, which splits a reported
``prompt_tokens`` (cache reads and writes included) into ``input_tokens``
charged at full rate plus the cache fields, and takes ``total_tokens`` as
prompt plus completion (inspect_ai/model/_openai.py, lines 1190-1212,
inspect-ai 0.3.285). A count whose cache figures exceed its prompt tokens was
reported the other way (cache tokens counted apart), and its prompt tokens are
then kept whole.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pandas as pd

from hermeslab import __version__
from hermeslab.core.messages import Message, text_of, tool_calls_of

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample, EvalScore
    from inspect_ai.model import ChatMessage, ModelUsage
    from inspect_ai.scorer import Score

MISSING = "writing Inspect logs needs the inspect-ai package: pip install 'hermeslab[inspect]'"


def require_inspect() -> None:
    """Stop with one line naming the extra when inspect-ai is not installed."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise ImportError(MISSING) from None


# ---------------------------------------------------------------- messages


def chat_messages(messages: Sequence[Message], model: str | None = None) -> list[ChatMessage]:
    """Recorded-session messages as Inspect chat messages, tool calls and their results joined by id."""
    require_inspect()
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser

    names: dict[str, str] = {}
    converted: list[ChatMessage] = []
    for message in messages:
        role, text = message.get("role"), text_of(message)
        if role in ("system", "developer"):  # OpenAI's newer name for the system prompt
            converted.append(ChatMessageSystem(content=text))
        elif role == "user":
            converted.append(ChatMessageUser(content=text))
        elif role == "assistant":
            calls = [tool_call(call) for call in tool_calls_of(message)]
            names.update((call.id, call.function) for call in calls)
            converted.append(ChatMessageAssistant(content=text, tool_calls=calls or None, model=model))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            converted.append(ChatMessageTool(content=text, tool_call_id=call_id, function=names.get(call_id)))
        else:
            raise ValueError(f"a message with role {role!r} has no Inspect counterpart "
                             "(system or developer, user, assistant, tool)")
    return converted


def tool_call(call: Mapping[str, Any]) -> Any:
    """One OpenAI-shaped tool call as an Inspect ``ToolCall``; arguments that are not a JSON object are kept as a
    parse error (Inspect holds arguments as an object)."""
    from inspect_ai.tool import ToolCall

    function = call.get("function") or {}
    raw = function.get("arguments", "")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        arguments = None
    problem = None
    if not isinstance(arguments, dict):
        arguments, problem = {}, f"arguments are not a JSON object: {raw}"
    return ToolCall(id=str(call.get("id") or ""), function=str(function.get("name") or ""), arguments=arguments,
                    parse_error=problem)


# ---------------------------------------------------------------- usage


@dataclass(frozen=True)
class Tokens:
    """Token counts of some calls as their server reported them (OpenAI's convention: prompt includes cache)."""

    prompt: int = 0
    completion: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.prompt + other.prompt, self.completion + other.completion,
                      self.cache_read + other.cache_read, self.cache_write + other.cache_write,
                      self.reasoning + other.reasoning)


def model_usage(tokens: Tokens) -> ModelUsage:
    """``tokens`` as Inspect's ``ModelUsage`` (see the module docstring for the split of the prompt)."""
    require_inspect()
    from inspect_ai.model import ModelUsage

    cached = tokens.cache_read + tokens.cache_write
    full_rate = tokens.prompt - cached if tokens.prompt >= cached else tokens.prompt
    return ModelUsage(input_tokens=full_rate, output_tokens=tokens.completion,
                      total_tokens=tokens.prompt + tokens.completion,
                      input_tokens_cache_read=tokens.cache_read or None,
                      input_tokens_cache_write=tokens.cache_write or None,
                      reasoning_tokens=tokens.reasoning or None)


def usage_by_key(parts: Iterable[tuple[str, Tokens]]) -> dict[str, ModelUsage]:
    """Tokens summed per key (a model or a call's purpose), as Inspect usage."""
    summed: dict[str, Tokens] = {}
    for key, tokens in parts:
        summed[key] = summed.get(key, Tokens()) + tokens
    return {key: model_usage(tokens) for key, tokens in summed.items()}


# ---------------------------------------------------------------- scores


def number_score(value: float | int | None, *, why_undefined: str, explanation: str | None = None,
                 answer: str | None = None) -> Score:
    """A numeric score; a missing or NaN value is kept as Inspect's unscored score with the reason."""
    require_inspect()
    from inspect_ai.scorer import Score

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Score.unscored(reason=why_undefined, explanation=explanation, answer=answer)
    return Score(value=value if isinstance(value, int) else float(value), explanation=explanation, answer=answer)


def score_summaries(samples: Sequence[EvalSample]) -> list[EvalScore]:
    """Per score name, in first-seen order: the mean of the samples that have a value, and how many do."""
    from inspect_ai.log import EvalMetric, EvalScore

    values: dict[str, list[float]] = {}
    missing: dict[str, int] = {}
    for sample in samples:
        for name, score in (sample.scores or {}).items():
            number = float(score.value) if isinstance(score.value, (int, float)) else math.nan
            values.setdefault(name, [])
            if math.isnan(number):
                missing[name] = missing.get(name, 0) + 1
            else:
                values[name].append(number)
    summaries = []
    for name, numbers in values.items():
        metrics = {"mean": EvalMetric(name="mean", value=sum(numbers) / len(numbers))} if numbers else {}
        summaries.append(EvalScore(name=name, scorer=name, scored_samples=len(numbers),
                                   unscored_samples=missing.get(name, 0), metrics=metrics))
    return summaries


def plain_value(value: Any) -> Any:
    """A frame cell as plain JSON data: NaN and NA as None, numpy scalars as Python's."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


# ---------------------------------------------------------------- samples and logs


def eval_sample(sample_id: str, *, input: str, messages: Sequence[ChatMessage], model: str,
                target: str | list[str] = "", scores: Mapping[str, Score] | None = None,
                metadata: Mapping[str, Any] | None = None, usage: Mapping[str, ModelUsage] | None = None,
                role_usage: Mapping[str, ModelUsage] | None = None, error: str | None = None,
                started: datetime | None = None, completed: datetime | None = None) -> EvalSample:
    """One Inspect sample: the conversation, its last assistant text as the output, scores and usage."""
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ModelOutput

    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    output = ModelOutput.from_content(model, last.text if last is not None else "")
    seconds = (completed - started).total_seconds() if started is not None and completed is not None else None
    return EvalSample(
        id=sample_id, epoch=1, input=input, target=target, messages=list(messages), output=output,
        scores=dict(scores) if scores else None, metadata=dict(metadata or {}), model_usage=dict(usage or {}),
        role_usage=dict(role_usage or {}), error=EvalError(message=error, traceback="", traceback_ansi="")
        if error else None, started_at=_utc(started), completed_at=_utc(completed), total_time=seconds)


@dataclass(frozen=True)
class LogHead:
    """What names an evaluation: its task and arguments, the model, the solver (a config), when and which run."""

    task: str
    model: str
    run_id: str
    created: datetime
    dataset: str
    task_args: dict[str, Any] = field(default_factory=dict)
    solver: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    roles: dict[str, str] = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        """Stable for the same task, arguments, solver and run, so exporting again names the same evaluation."""
        identity = json.dumps([self.task, self.task_args, self.solver, self.model, self.run_id], sort_keys=True,
                              default=str)
        return hashlib.sha256(identity.encode()).hexdigest()[:22]


def eval_log(head: LogHead, samples: Sequence[EvalSample], *, usage: Mapping[str, ModelUsage] | None = None,
             role_usage: Mapping[str, ModelUsage] | None = None) -> EvalLog:
    """A finished Inspect evaluation of ``samples``; usage defaults to the samples' summed per model."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalPlanStep, EvalResults, EvalSpec
    from inspect_ai.log import EvalStats
    from inspect_ai.model import ModelConfig

    if not samples:
        raise ValueError(f"nothing to write for {head.task} ({head.model}): no samples")
    spec = EvalSpec(
        eval_id=head.task_id, run_id=head.run_id, created=_utc(head.created.replace(microsecond=0)), task=head.task, task_id=head.task_id,
        task_args=head.task_args, solver=head.solver, tags=list(head.tags) or None,
        dataset=EvalDataset(name=head.dataset, samples=len(samples), sample_ids=[s.id for s in samples]),
        model=head.model, model_roles={role: ModelConfig(model=name) for role, name in head.roles.items()} or None,
        config=EvalConfig(), packages={"hermeslab": __version__}, metadata=head.metadata or None)
    plan = EvalPlan(steps=[EvalPlanStep(solver=head.solver, params=head.task_args)] if head.solver else [])
    results = EvalResults(total_samples=len(samples), completed_samples=sum(s.error is None for s in samples),
                          scores=score_summaries(samples))
    starts = [s.started_at for s in samples if s.started_at]
    ends = [s.completed_at for s in samples if s.completed_at]
    stats = EvalStats(started_at=min(starts, default=""), completed_at=max(ends, default=""),
                      model_usage=dict(usage) if usage is not None else _summed(s.model_usage for s in samples),
                      role_usage=dict(role_usage) if role_usage is not None
                      else _summed(s.role_usage for s in samples))
    return EvalLog(status="success", eval=spec, plan=plan, results=results, stats=stats, samples=list(samples))


def log_file_name(log: EvalLog) -> str:
    """Inspect's own naming, ``{created}_{task}_{id}.eval`` with ``_ / : +`` made ``-`` in each part
    (inspect_ai/_util/log_layout.py, lines 24-49, and _util/file.py, lines 724-730, inspect-ai 0.3.285)."""
    def clean(part: str) -> str:
        return part.translate(str.maketrans({"_": "-", "/": "-", ":": "-", "+": "-"}))

    return f"{clean(log.eval.created)}_{clean(log.eval.task)}_{clean(log.eval.task_id)}.eval"


def _summed(usages: Iterable[Mapping[str, ModelUsage]]) -> dict[str, ModelUsage]:
    total: dict[str, ModelUsage] = {}
    for usage in usages:
        for key, part in usage.items():
            total[key] = total[key] + part if key in total else part
    return total


def _utc(moment: datetime | None) -> str | None:
    """A lab timestamp (naive UTC) or an aware one as an ISO text in UTC."""
    if moment is None:
        return None
    aware = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
    return aware.isoformat()
