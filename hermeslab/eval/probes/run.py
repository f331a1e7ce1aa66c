"""The probe exam: every recording under every config and window, its probes asked in three arms.

For each (window, config, recording) the recording is replayed (the fast
replay, ``eval.replay``), its effective compactions found (``context``) and
its probes written (``bank``). Each probe is then asked in the ``compacted``,
``ceiling`` and ``floor`` arms, arm by arm, so the probes that share a
context go to the answerer one after another. A context longer than the
answerer's window (prompt tokens in the replay's unit, the question and a
reply's allowance added) is not asked: the row says ``fittable`` False and
scores NaN. A failed call scores NaN with its error; it is not cached, so a
rerun asks it again. Answers and judgements go through the lab's cache
(``cache``), which is also what lets a killed exam resume.

Nothing is averaged here: one row per (recording, config, window,
compaction, probe, arm), with the probe's question, its gold (a set's members
one per line) and where the gold came from, for drilling down. A row that was not scored has NaN ``points``, never
0, so an exam that scored nothing shows as all NaN.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hermeslab.core.config import Config
from hermeslab.core.provider import ProviderError
from hermeslab.core.tokens import count_text
from hermeslab.policies.loading import load_config
from hermeslab.recordings import Recording
from hermeslab.store import Lab

from ..ab import config_label, gather_recordings
from ..replay import ReplayRun, replay
from .bank import BANK_TYPES, PROBE_TYPES, Probe, bank_hash, run_bank
from .cache import Entry, ExamStore, answer_key, context_digest, message_digest
from .calls import ExamCallLog
from .context import ARMS, EffectiveCompaction, effective_compactions
from .judge import Judge, MatchJudge, judgement_key
from .readers import Answerer
from .written import QuestionWriter, written_probes

#: Every bank type: what an exam asks unless told otherwise.
ALL = BANK_TYPES
#: Prompt tokens kept free for the reply when a context is checked against the answerer's window.
REPLY_ALLOWANCE = 64
COLUMNS = ("recording_id", "config", "window", "compaction", "probe_id", "probe_type", "arm", "answer", "points",
           "score", "fittable", "retained_tokens", "removed_tokens", "token_unit", "prompt_tokens",
           "server_cached_tokens", "answerer", "judge", "cached", "error", "question", "gold", "source_message",
           "source_start", "source_end")
#: What a failed answer or judgement may raise; anything else is a bug and stops the exam.
FAILURES = (ProviderError, OSError, ValueError)


def run_exam(recordings: Any, configs: Mapping[str, Any] | Sequence[Any], *, windows: Sequence[int],
             answerer: Answerer, lab: str | Path | Lab | None = None, judge: Judge | None = None,
             progress: bool = True, probe_types: Iterable[str] = ALL, arms: Sequence[str] = ARMS,
             counter: str | None = None, question_writer: QuestionWriter | None = None) -> pd.DataFrame:
    """The exam's rows (``COLUMNS``); see the module docstring.

    ``recordings`` as ``eval.ab.run_ab`` takes them (objects, dicts, JSONL
    paths); ``configs`` a mapping of names to configs (Config, preset name,
    YAML path, ``BASE,key=value``) or a list of them named by
    ``eval.ab.config_label``; each runs at every window of ``windows`` (its
    ``model.context_length``). ``judge`` defaults to the deterministic
    matcher. ``counter`` is the replay's token unit (``replay(counter=...)``).
    ``model_written`` among ``probe_types`` needs ``question_writer``
    (``written.QuestionWriter``), whose replies are cached in the lab too.
    ``frame.attrs`` holds ``bank_hash``, ``token_unit``, ``answerer``,
    ``judge``, ``calls_made``, ``cache_hits``, ``probes``, ``sessions``
    (recordings with at least one probe), ``problems`` (recordings skipped),
    and with a writer ``questions_written`` (its calls) and
    ``written_problems`` (why a reply gave no probes). With a lab, every
    call the answerer, the judge and the writer make to a model is a row of
    its ``api_calls`` (``calls.ExamCallLog``); ``exam_session`` names the
    session holding them (None when no call was made).
    """
    types = _probe_types(probe_types, question_writer)
    arms = _arms(arms)
    named = _configs(configs)
    sizes = _windows(windows)
    _check_answerer(answerer)
    judge = judge if judge is not None else MatchJudge()
    found, problems = gather_recordings(recordings)
    if problems:
        warnings.warn(f"skipped {len(problems)} recording(s); first: {problems[0]}", stacklevel=2)
    store = ExamStore(lab)
    log = ExamCallLog(store.path, label=answerer.name) if store.path is not None else None
    for caller in (answerer, judge, question_writer):
        if log is not None and hasattr(caller, "on_call"):
            caller.on_call = log
    exam = _Exam(answerer, judge, store, arms, types, question_writer)
    cells = [(window, name, config, recording) for window in sizes for name, config in named.items()
             for recording in found]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), unit="replay", desc="probe exam")
    try:
        for window, name, config, recording in cells:
            sized = dataclasses.replace(config, model=dataclasses.replace(config.model, context_length=window))
            run = replay(recording, sized, counter=counter, fast=True)
            exam.examine(run, recording, name, window)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(probes=exam.probes, calls=exam.calls, cached=exam.hits, refresh=False)
    finally:
        store.flush()
        if log is not None:
            log.close()
            for caller in (answerer, judge, question_writer):
                if getattr(caller, "on_call", None) is log:
                    caller.on_call = None
        if bar is not None:
            bar.close()
    frame = pd.DataFrame(exam.rows, columns=list(COLUMNS))
    frame["points"] = frame["points"].astype("float64")
    frame["score"] = frame["points"] / 2
    units = sorted(set(frame["token_unit"]))
    frame.attrs.update(bank_hash=bank_hash(exam.bank), token_unit=units[0] if len(units) == 1 else ", ".join(units),
                       answerer=answerer.name, judge=judge.name, calls_made=exam.calls, cache_hits=exam.hits,
                       probes=len(exam.bank), sessions=len(exam.sessions), problems=problems,
                       exam_session=log.session_id if log is not None and log.calls else None)
    if question_writer is not None:
        frame.attrs.update(questions_written=exam.written_calls, written_problems=exam.written_problems)
    return frame


class _Exam:
    """Asks and judges the probes of one replay after another, keeping the rows and counts."""

    def __init__(self, answerer: Answerer, judge: Judge, store: ExamStore, arms: Sequence[str],
                 types: tuple[str, ...], writer: QuestionWriter | None):
        self.answerer, self.judge, self.store, self.arms, self.types = answerer, judge, store, arms, types
        self.writer = writer if "model_written" in types else None
        self.written_calls = 0
        self.written_problems: list[str] = []
        if self.writer is not None:
            store.load("questions", self.writer.name)
        self.reads_gold = bool(getattr(answerer, "reads_gold", False))
        self.durable = not getattr(answerer, "cheap", False)
        store.load("answer", answerer.name)
        store.load("judgement", judge.name)
        self.rows: list[tuple[Any, ...]] = []
        self.bank: list[Probe] = []
        self.sessions: set[str] = set()
        self.calls = self.hits = self.probes = 0

    def examine(self, run: ReplayRun, recording: Recording, config: str, window: int) -> None:
        compactions = effective_compactions(run)
        probes = [p for p in run_bank(run, compactions) if p.probe_type in self.types]
        if self.writer is not None:
            probes += self._written(run, compactions, {p.probe_id for p in probes})
        if not probes:
            return
        self.bank.extend(probes)
        self.probes += len(probes)
        self.sessions.add(run.recording_id)
        tools = list(recording.tools) or None
        digests: dict[int, tuple[dict[str, Any], str]] = {}
        by_compaction: dict[int, list[Probe]] = {}
        for probe in probes:
            by_compaction.setdefault(probe.compaction, []).append(probe)
        for compaction in compactions:
            asked = by_compaction.get(compaction.index)
            if asked:
                for arm in self.arms:
                    self._ask(run, compaction, arm, asked, tools, digests, config, window)

    def _written(self, run: ReplayRun, compactions: list[EffectiveCompaction], seen: set[str]) -> list[Probe]:
        """The writer's probes of every compaction (a reply that failed or could not be read is noted)."""
        probes = []
        for compaction in compactions:
            try:
                written = written_probes(run.recording_id, compaction, self.writer, self.store)
            except FAILURES as exc:
                self.written_calls += 1
                self.written_problems.append(f"{run.recording_id}, compaction {compaction.index}: "
                                             f"{type(exc).__name__}: {exc}")
                continue
            self.written_calls += written.called
            if written.problem is not None:
                self.written_problems.append(written.problem)
            for probe in written.probes:
                if probe.probe_id not in seen:
                    seen.add(probe.probe_id)
                    probes.append(probe)
        return probes

    def _ask(self, run: ReplayRun, compaction: EffectiveCompaction, arm: str, probes: list[Probe],
             tools: list[dict[str, Any]] | None, digests: dict[int, tuple[dict[str, Any], str]],
             config: str, window: int) -> None:
        messages = compaction.arm(arm)
        sent_tools = tools if arm != "floor" else None
        tokens = {"compacted": compaction.retained_tokens, "ceiling": compaction.ceiling_tokens,
                  "floor": run.counter.count_messages(messages)}[arm]
        context = context_digest([_digest(m, digests) for m in messages], sent_tools)
        limit = self.answerer.window
        for probe in probes:
            fittable = limit is None or tokens + count_text(probe.question) + REPLY_ALLOWANCE <= limit
            answer, points, cached, error, entry = None, math.nan, False, None, Entry("")
            if fittable:
                key = answer_key(self.answerer.name, context, probe.question, probe.gold if self.reads_gold else None)
                found = self.store.get(key)
                if found is not None:
                    entry, cached = found, True
                    self.hits += 1
                else:
                    try:
                        entry = self._call(messages, sent_tools, probe)
                    except FAILURES as exc:
                        error = f"{type(exc).__name__}: {exc}"
                    else:
                        self.store.put(key, "answer", self.answerer.name, probe.question, entry, durable=self.durable)
                if error is None:
                    answer = entry.value
                    try:
                        points = self._judge(probe, answer)
                    except FAILURES as exc:
                        error = f"judge: {type(exc).__name__}: {exc}"
            self.rows.append((run.recording_id, config, window, compaction.index, probe.probe_id, probe.probe_type, arm,
                              answer, points, math.nan, fittable, compaction.retained_tokens,
                              compaction.removed_tokens, run.counter.encoding, entry.prompt_tokens,
                              entry.server_cached_tokens, self.answerer.name, self.judge.name, cached, error,
                              probe.question, "\n".join(probe.golds), probe.source_message, *probe.source_span))

    def _call(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, probe: Probe) -> Entry:
        self.calls += 1
        if self.reads_gold:
            text = self.answerer.answer(messages, tools, probe.question, probe=probe)
        else:
            text = self.answerer.answer(messages, tools, probe.question)
        if not isinstance(text, str):
            raise TypeError(f"answerer {self.answerer.name!r} returned {type(text).__name__}, not a str")
        usage = getattr(self.answerer, "last_call", None)
        return Entry(text, getattr(usage, "prompt_tokens", math.nan), getattr(usage, "server_cached_tokens", math.nan))

    def _judge(self, probe: Probe, answer: str) -> int:
        key = judgement_key(self.judge.name, probe, answer)
        found = self.store.get(key)
        if found is not None:
            return int(found.value)
        points = self.judge.points(probe, answer)
        if points not in (0, 1, 2):
            raise ValueError(f"judge {self.judge.name!r} gave {points!r}, not 0, 1 or 2")
        self.store.put(key, "judgement", self.judge.name, probe.question, Entry(str(points)),
                       durable=not getattr(self.judge, "cheap", False))
        return points


def _digest(message: dict[str, Any], digests: dict[int, tuple[dict[str, Any], str]]) -> str:
    entry = digests.get(id(message))
    if entry is None or entry[0] is not message:
        entry = digests[id(message)] = (message, message_digest(message))
    return entry[1]


def _probe_types(probe_types: Iterable[str], writer: QuestionWriter | None) -> tuple[str, ...]:
    types = tuple(probe_types)
    known = PROBE_TYPES if writer is not None else BANK_TYPES
    unknown = [t for t in types if t not in known]
    if unknown or not types:
        extra = " (model-written probes need a question writer)" if "model_written" in unknown else ""
        raise ValueError(f"probe_types must be some of {', '.join(known)}, got {list(types)!r}{extra}")
    return types


def _arms(arms: Sequence[str]) -> tuple[str, ...]:
    chosen = tuple(arms)
    if not chosen or any(arm not in ARMS for arm in chosen):
        raise ValueError(f"arms must be some of {', '.join(ARMS)}, got {list(chosen)!r}")
    return chosen


def _configs(configs: Mapping[str, Any] | Sequence[Any]) -> dict[str, Config]:
    if isinstance(configs, (str, Path, Config)):
        configs = [configs]
    items = list(configs.items()) if isinstance(configs, Mapping) else [(config_label(c), c) for c in configs]
    if not items:
        raise ValueError("configs must name at least one config")
    named: dict[str, Config] = {}
    for name, spec in items:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"config names must be non-empty strings, got {name!r}")
        named[name] = spec if isinstance(spec, Config) else load_config(spec)
    return named


def _windows(windows: Sequence[int]) -> tuple[int, ...]:
    if isinstance(windows, int) and not isinstance(windows, bool):
        windows = [windows]
    sizes = tuple(windows)
    if not sizes or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in sizes):
        raise ValueError(f"windows must be positive token counts, got {list(sizes)!r}")
    return sizes


def _check_answerer(answerer: Any) -> None:
    if not isinstance(getattr(answerer, "name", None), str) or not callable(getattr(answerer, "answer", None)):
        raise TypeError(f"answerer must have a name and an answer(messages, tools, question) method, "
                        f"got {type(answerer).__name__}")
    window = getattr(answerer, "window", None)
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"answerer.window must be a positive number of tokens or None, got {window!r}")
