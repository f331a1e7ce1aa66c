"""The recall exam: can a model still answer questions about what a compression took out?

For each compression of a replay that changed the context, a model writes
short factual questions, with reference answers, about the messages the
compression removed (the *region*). Each question is then answered from the
compacted context alone (the model says "unknown" when the context does not
tell) and judged against the reference: 2 points correct, 1 partly, 0 wrong
or unknown. The score is the mean of the points over 2.

A model's reply is never guessed at: a question list that is not the JSON
asked for, an empty answer or a judgement that is not a bare digit is an
error, counted and logged with its reason, and the region or question is
skipped. A failed model call is handled the same way, so the replay's other
metrics are never lost to an exam that could not finish. Every step (a
question list, an answer, a judgement) is counted in ``exam_steps`` and the
ones whose reply could be used in ``exam_usable``; an exam that had steps but
scored no question says so in ``ExamReport.problem``.

Every request carries ``ExamSettings.max_tokens``: the replies asked for are a
few words, a digit or a short JSON list, and a model that does not stop would
otherwise write until its context is full on every call.

Every call goes through an SQLite cache keyed by the step, the model, the
prompt and the cap, so rerunning an exam (or another config that leaves the
same context) makes no calls for what was asked before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermeslab.context.extractive import strip_think
from hermeslab.core.config import Config
from hermeslab.core.messages import text_of
from hermeslab.core.provider import ChatRequest, Provider, ProviderError

from .metrics import message_text, removed_messages
from .replay import ReplayRun

log = logging.getLogger(__name__)

#: The metrics ``recall_exam`` returns, in order.
EXAM_METRICS = ("exam_questions", "exam_score", "exam_full", "exam_partial", "exam_wrong", "exam_errors", "exam_calls",
                "exam_steps", "exam_usable")
#: Where the command line keeps exam replies unless told otherwise.
DEFAULT_CACHE_PATH = Path.home() / ".cache" / "hermeslab" / "recall-exam.sqlite"
#: What an answer says when the context does not hold it; it scores 0 without a judge call.
UNKNOWN = "unknown"

_QUESTIONS_SYSTEM = (
    "You write exam questions about a piece of a conversation between a user, an assistant and its tools. "
    "Write {count} short factual questions whose answers are stated in the text: exact names, paths, ids, "
    "numbers, errors, decisions. Each answer must be a few words, taken from the text. Reply with only a JSON "
    'list, no prose: [{{"question": "...", "answer": "..."}}, ...]'
)
_ANSWER_SYSTEM = (
    "Answer the question from the conversation context below and nothing else. Reply with the answer "
    f"only, in a few words. If the context does not say, reply with exactly: {UNKNOWN}"
)
_JUDGE_SYSTEM = (
    "You grade an answer against a reference answer. Reply with one digit and nothing else: 2 if the "
    "answer is correct, 1 if it is partly correct, 0 if it is wrong or says it does not know."
)
#: Changes whenever a prompt does, so results of other prompts are never mistaken for these.
PROMPTS_DIGEST = hashlib.sha256(json.dumps([_QUESTIONS_SYSTEM, _ANSWER_SYSTEM, _JUDGE_SYSTEM]).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ExamSettings:
    """How big an exam is and what it reads. ``model`` None asks the config's model; ``cache_path`` None
    keeps replies only for the one exam.

    ``max_tokens`` caps each answer and each judgement, and the question list
    at that many per question. The replies asked for are a few words, one
    digit, or a JSON list of short pairs, well under 100 tokens each; without a
    cap a model that never stops runs every call to the end of its context,
    which costs minutes and a window's worth of tokens per call. The default
    leaves some room for a short reasoning preamble (it is stripped); a model
    that reasons at length before it answers needs a larger cap. A reply cut by
    the cap is unusable and counted like any other.
    """

    questions_per_region: int = 3
    max_region_chars: int = 12_000
    max_context_chars: int = 48_000
    model: str | None = None
    cache_path: str | Path | None = None
    max_tokens: int = 256
    #: The answerer's endpoint for every config (None: each config's own); see ``shared_endpoint``.
    base_url: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("questions_per_region", "max_region_chars", "max_context_chars", "max_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ExamSettings.{name} must be a positive integer, got {value!r}")
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ValueError(f"ExamSettings.model must be a non-empty model name or None, got {self.model!r}")
        if self.cache_path is not None and not isinstance(self.cache_path, (str, Path)):
            raise TypeError(f"ExamSettings.cache_path must be a path or None, got {type(self.cache_path).__name__}")

    @property
    def identity(self) -> str:
        """What decides the exam's numbers (the cache's place does not), as stable text."""
        return (f"exam(questions={self.questions_per_region}, region_chars={self.max_region_chars}, "
                f"context_chars={self.max_context_chars}, max_tokens={self.max_tokens}, "
                f"model={self.model or 'config'}, endpoint={self.base_url or 'config'}, prompts={PROMPTS_DIGEST})")

    def step_tokens(self, step: str) -> int:
        """The cap of one request: ``max_tokens``, per question for the question list."""
        return self.max_tokens * self.questions_per_region if step == "questions" else self.max_tokens


@dataclass(frozen=True)
class Question:
    question: str
    answer: str


class ExamOutputError(ValueError):
    """A model reply the exam cannot use; the message says why."""


# ---------------------------------------------------------------- reading replies


_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*)\n```\Z", re.DOTALL)


def parse_questions(reply: str, limit: int) -> list[Question]:
    """The first ``limit`` questions of a JSON list of ``{"question", "answer"}`` objects.

    A list wrapped in one ```json fence is accepted; anything else that is
    not exactly such a non-empty list raises ExamOutputError.
    """
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExamOutputError(f"the question list is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(items, list) or not items:
        raise ExamOutputError(f"the question list must be a non-empty JSON list, got {type(items).__name__} "
                              f"{_preview(text)}")
    questions = []
    for number, item in enumerate(items[:limit]):
        if not isinstance(item, dict) or not all(isinstance(item.get(key), str) and item[key].strip()
                                                 for key in ("question", "answer")):
            raise ExamOutputError(f"question {number} must be an object with non-empty 'question' and 'answer' "
                                  f"strings, got {_preview(json.dumps(item))}")
        questions.append(Question(item["question"].strip(), item["answer"].strip()))
    return questions


def parse_grade(reply: str) -> int:
    """The judge's bare digit 0, 1 or 2; anything else raises ExamOutputError."""
    text = reply.strip()
    if text not in ("0", "1", "2"):
        raise ExamOutputError(f"the judgement must be a bare 0, 1 or 2, got {_preview(text)}")
    return int(text)


def _preview(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:79] + "…")


# ---------------------------------------------------------------- the cache


class ExamCache:
    """Model replies by key in an SQLite file (``None``: in memory), safe to share between threads and processes.

    Writers never overwrite (``INSERT OR IGNORE``): equal keys come from equal
    prompts, so the first reply stored is as good as any.
    """

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path).expanduser()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:" if self.path is None else str(self.path), timeout=30.0,
                                   check_same_thread=False, isolation_level=None)
        if self.path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO replies (key, reply) VALUES (?, ?)", (key, reply))

    def close(self) -> None:
        with self._lock:
            self._db.close()


#: One cache per (process, file): a connection must not cross a fork.
_CACHES: dict[tuple[int, Path], ExamCache] = {}
_CACHES_LOCK = threading.Lock()


def open_cache(path: str | Path) -> ExamCache:
    """This process's cache at ``path``, opened on first use and kept open."""
    where = (os.getpid(), Path(path).expanduser().resolve())
    with _CACHES_LOCK:
        cache = _CACHES.get(where)
        if cache is None:
            cache = _CACHES[where] = ExamCache(where[1])
        return cache


def cache_key(step: str, model: str, system: str, user: str, max_tokens: int) -> str:
    """The cache's key of one request; a reply is kept apart from replies under other caps (a cut one differs)."""
    return hashlib.sha256(json.dumps([step, model, system, user, max_tokens]).encode()).hexdigest()


class _Asker:
    """Model calls through the cache, counting the ones actually made and every step asked."""

    def __init__(self, provider: Provider, model: str, cache: ExamCache, settings: ExamSettings):
        self.provider, self.model, self.cache, self.settings = provider, model, cache, settings
        self.calls = 0
        self.steps = 0

    def __call__(self, step: str, system: str, user: str) -> str:
        self.steps += 1
        cap = self.settings.step_tokens(step)
        key = cache_key(step, self.model, system, user, cap)
        reply = self.cache.get(key)
        if reply is None:
            request = ChatRequest(messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                                  model=self.model, temperature=0.0, max_tokens=cap)
            self.calls += 1
            reply = strip_think(text_of(self.provider.complete(request).message or {}))
            self.cache.put(key, reply)
        return reply


# ---------------------------------------------------------------- the exam


def render(messages: Sequence[dict[str, Any]]) -> str:
    """Messages as labelled text blocks, tool-call arguments included."""
    return "\n\n".join(f"[{str(m.get('role') or 'unknown').upper()}]\n{message_text(m)}".rstrip() for m in messages)


def clip_middle(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail around a marker saying what was left out."""
    if len(text) <= limit:
        return text
    template = "\n[… {} characters left out …]\n"
    keep = limit - len(template.format(len(text)))  # no count is longer than len(text)'s
    if keep < 2:
        return text[:limit]
    return text[: keep - keep // 2] + template.format(len(text) - keep) + text[len(text) - keep // 2:]


_FAILURES = (ProviderError, OSError, ExamOutputError)


@dataclass(frozen=True)
class ExamReport:
    """An exam's metrics (``EXAM_METRICS``) and the first reason a step was unusable (None when none was)."""

    metrics: dict[str, float | int]
    first_error: str | None = None

    @property
    def problem(self) -> str | None:
        """A sentence when the exam had steps but scored no question (its score then says nothing), else None."""
        steps, usable = self.metrics["exam_steps"], self.metrics["exam_usable"]
        if not steps or self.metrics["exam_questions"]:
            return None
        reason = f"; first problem: {self.first_error}" if self.first_error else ""
        return f"the recall exam scored no question: {usable} of {steps} exam step(s) gave usable output{reason}"


def recall_exam(run: ReplayRun, provider: Provider, settings: ExamSettings = ExamSettings(),
                cache: ExamCache | None = None) -> dict[str, float | int]:
    """The exam of every compression of ``run`` that changed the context (see the module docstring).

    ``cache`` None opens the one at ``settings.cache_path`` (or a fresh one in
    memory). The model is ``settings.model``, else the provider's own.
    """
    return examine(run, provider, settings, cache).metrics


def examine(run: ReplayRun, provider: Provider, settings: ExamSettings = ExamSettings(),
            cache: ExamCache | None = None) -> ExamReport:
    """``recall_exam`` with the first reason a step was unusable, for saying why an exam scored nothing."""
    if not isinstance(run, ReplayRun):
        raise TypeError(f"recall_exam() needs a ReplayRun, got {type(run).__name__}")
    if not isinstance(settings, ExamSettings):
        raise TypeError(f"settings must be an ExamSettings, got {type(settings).__name__}")
    model = settings.model or getattr(provider, "model", None)
    if not isinstance(model, str) or not model:
        raise ValueError("the exam needs a model name: set ExamSettings.model or use a provider with a 'model'")
    owned = cache is None and settings.cache_path is None
    if cache is None:
        cache = ExamCache(None) if owned else open_cache(settings.cache_path)
    ask = _Asker(provider, model, cache, settings)
    grades: list[int] = []
    problems: list[str] = []
    try:
        for number, record in enumerate(run.compressions):
            if not record.changed:
                continue
            place = f"recall exam of {run.recording_id}, compression {number}"
            region = render(removed_messages(record))
            if not region:
                continue
            try:
                system = _QUESTIONS_SYSTEM.format(count=settings.questions_per_region)
                reply = ask("questions", system, clip_middle(region, settings.max_region_chars))
                questions = parse_questions(reply, settings.questions_per_region)
            except _FAILURES as exc:
                problems.append(f"{place}: no questions: {exc}")
                log.warning("%s", problems[-1])
                continue
            context = clip_middle(render(record.after), settings.max_context_chars)
            for question in questions:
                try:
                    grades.append(_grade(ask, question, context))
                except _FAILURES as exc:
                    problems.append(f"{place}: question {question.question!r} skipped: {exc}")
                    log.warning("%s", problems[-1])
    finally:
        if owned:
            cache.close()
    return ExamReport(_summary(grades, len(problems), ask.calls, ask.steps), problems[0] if problems else None)


def _grade(ask: _Asker, question: Question, context: str) -> int:
    answer = ask("answer", _ANSWER_SYSTEM, f"CONTEXT:\n{context}\n\nQUESTION: {question.question}")
    if not answer:
        raise ExamOutputError("the answer is empty")
    if answer.strip().rstrip(".").lower() == UNKNOWN:
        return 0
    judged = ask("judge", _JUDGE_SYSTEM,
                 f"QUESTION: {question.question}\nREFERENCE ANSWER: {question.answer}\nANSWER: {answer}")
    return parse_grade(judged)


def _summary(grades: list[int], errors: int, calls: int, steps: int) -> dict[str, float | int]:
    """The metrics; each error ends exactly one step (a question list, an answer or a judgement)."""
    asked = len(grades)
    return {
        "exam_questions": asked,
        "exam_score": sum(grades) / (2 * asked) if asked else math.nan,
        "exam_full": grades.count(2),
        "exam_partial": grades.count(1),
        "exam_wrong": grades.count(0),
        "exam_errors": errors,
        "exam_calls": calls,
        "exam_steps": steps,
        "exam_usable": steps - errors,
    }


# ---------------------------------------------------------------- at a config's endpoint


def require_endpoint(config: Config) -> None:
    """Raise ValueError unless ``config`` names a model endpoint: the exam never asks the offline model."""
    if not (config.model.base_url or config.model.api_key):
        raise ValueError("the recall exam needs a real model endpoint: set model.base_url (and model.api_key "
                         "if the endpoint wants one) in the config")


def shared_endpoint(configs: dict[str, Config]) -> tuple[str | None, str | None]:
    """(base_url, api_key) of the one endpoint the configs name, for configs that name none; (None, None)
    when every config names its own.

    The exam's answerer must be a real model; a config compared against one that names it (the
    offline preset beside a config with ``model.base_url``, say) is examined by that same answerer,
    so the configs differ only in their context. Raises ValueError, naming the configs, when none
    names an endpoint or several are named and a config has none.
    """
    named = {name: (c.model.base_url, c.model.api_key) for name, c in configs.items()
             if c.model.base_url or c.model.api_key}
    missing = [name for name in configs if name not in named]
    if not missing:
        return None, None
    if not named:
        raise ValueError("the recall exam needs a real model endpoint: set model.base_url (and model.api_key "
                         "if the endpoint wants one) in a config")
    endpoints = set(named.values())
    if len(endpoints) > 1:
        raise ValueError(f"{', '.join(missing)} name(s) no endpoint and the others name {len(endpoints)} "
                         "different ones; set model.base_url on every config, or on one to examine all with it")
    return next(iter(endpoints))


def answering(config: Config, settings: ExamSettings) -> Config:
    """The config whose endpoint answers the exam: ``config``, or its model at the shared endpoint."""
    if settings.base_url is None and settings.api_key is None:
        return config
    return config.with_overrides({"model.base_url": settings.base_url, "model.api_key": settings.api_key})


def exam_at_endpoint(run: ReplayRun, config: Config, settings: ExamSettings) -> ExamReport:
    """``examine`` of ``run`` asking the endpoint ``config`` names, or the shared one ``settings`` names
    (its model unless ``settings`` names one)."""
    from hermeslab.providers import open_provider

    config = answering(config, settings)
    require_endpoint(config)
    with open_provider(config) as handle:
        return examine(run, handle.provider, dataclasses.replace(settings, model=settings.model or config.model.name))

