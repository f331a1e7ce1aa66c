"""The numbers of one replay: what it cost, how big the context got, what compression did, kept and lost.

``measure(run)`` turns a ``ReplayRun`` into one flat row (session × config):

* **usage** — answered calls, prompt tokens summed over them (the quadratic
  bill), the largest prompt, completion tokens, all in the replay's billing
  unit (``token_unit``: exact counts in the recorded model's encoding, the same
  for every config); beside them, what the config's own estimator made of the
  prompts it sent (``decision_prompt_tokens`` in ``decision_unit``: chars/4
  for ``hermes-0.19``), which is what its thresholds were compared with;
* **compression** — attempts in total and by trigger, ineffective ones, summary
  calls with the tokens they read and wrote, and the summaries the configured
  summariser did not write: ``summary_fallbacks`` (its fallback, the
  extractive one, answered) and ``summary_failures`` (nobody did, so that
  compression kept the middle of the conversation). Either means the run mixed
  summarisers, which ``eval.checked`` refuses unless told to keep such runs;
* **cost** — of the model calls and the summary calls, at the recorded
  model's list price (``eval.prices``), without prompt caching and with it.
  The cached part of a call is the prompt prefix it shares with the previous
  call (the tool schemas and the messages up to the first one that changed):
  an ideal cache, since providers also round to blocks and expire entries;
* **invariants** — what compressions broke that was intact before: tool calls
  and results left without their partner, the latest real user message gone,
  roles out of order;
* **task survival** — the share of compressions after which the latest real
  user message is still there verbatim;
* **retention** — key facts (ids, paths, numbers, names) that a compression
  took out of the context and that a later recorded reply uses again: the
  share still present verbatim in the context of the call that uses them;
* **deviations** — where the loop could not follow the recording, and the
  recording shapes the replay adapted to (``eval.replay``);
* **failed turns** — turns that ended without an answer (status ``failed`` or
  ``max_iterations``): a run with any did less work than the recording, so
  its costs are not comparable (``stats.paired_compare`` flags such pairs).

A fact is a word (the text split at whitespace, quotes, brackets and
``; = | ! ? *``, a ``.``, ``:`` or ``,`` that ends a clause dropped) that
``context.entities`` recognises on its own as an identifier: ``src/app.py``,
``order_4711``, ``1,250``, ``v2.3.1``. Each
(compression, fact) pair is judged once, at the first call after the
compression whose recorded reply uses the fact. Shares with nothing to count
are NaN (not defined), and their numerators and denominators are reported
beside them so that runs can be pooled.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Callable, Mapping, Sequence

from hermeslab.context.entities import extract_entities
from hermeslab.core.cache import bounded_put
from hermeslab.core.messages import text_of, tool_calls_of

from .prices import Price, price_for
from .replay import DEVIATIONS, CompressionRecord, ReplayRun
from .replay_compression import holds_user_message

try:
    from ._factwords import candidate_words as _candidate_words
except ImportError:  # built without a compiler: found in Python
    _candidate_words = None

TRIGGERS = ("preflight", "turn", "pressure", "overflow", "manual")
#: The columns naming units, and the token figures (or figures made from tokens) each one names.
UNIT_COLUMNS: dict[str, tuple[str, ...]] = {
    "token_unit": ("prompt_tokens", "peak_prompt_tokens", "completion_tokens", "cached_prompt_tokens",
                   "summary_input_tokens", "summary_tokens", "cost_usd", "cost_cached_usd"),
    "decision_unit": ("decision_prompt_tokens",),
}
#: Deviations where the loop did not follow the recording (the rest are shapes the replay adapted to).
DIVERGENCES = ("missed_calls", "extra_calls", "tool_mismatches")

#: Characters that separate words and are never part of a fact (line breaks and tabs become plain spaces).
_SEPARATORS = str.maketrans(dict.fromkeys("\"'`()[]{}<>;=|!?*\\\n\r\t", " "))
#: A word's own trailing mark in running text ("see src/app.py." or "line 42,"): dropped, the word kept.
_CLAUSE_ENDS = (". ", ", ", ": ")
#: Tokens already judged by the entity extractor (bounded: the oldest tenth goes when full).
_FACT_VERDICTS: dict[str, bool] = {}
_FACT_VERDICTS_MAX = 200_000
#: A word that is never a fact: ASCII letters, lower case after the first (the extractor needs more signal).
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*")
#: Candidate facts of message texts (bounded: the oldest tenth goes when full).
_TEXT_WORDS: dict[str, frozenset[str]] = {}
_TEXT_WORDS_MAX = 50_000
#: Candidate facts of recorded replies, by the identity of their content and tool calls (bounded: the oldest
#: tenth goes when full).
_REPLY_WORDS: dict[tuple[int, int], tuple[Any, Any, frozenset[str]]] = {}
_REPLY_WORDS_MAX = 100_000
#: Tool-call arguments with their string escapes read (bounded: the oldest tenth goes when full).
_READ_ARGUMENTS: dict[str, str] = {}
_READ_ARGUMENTS_MAX = 50_000


def measure(run: ReplayRun, prices: Mapping[str, Price] | None = None) -> dict[str, float | int | str]:
    """The flat metrics row of ``run`` (see the module docstring); ``prices`` replaces the default table."""
    if not isinstance(run, ReplayRun):
        raise TypeError(f"measure() needs a ReplayRun (from hermeslab.eval.replay.replay), got {type(run).__name__}")
    price, unknown_model = price_for(run.model, prices)
    calls = run.calls
    prompt = sum(call.prompt_tokens for call in calls)
    completion = sum(call.completion_tokens for call in calls)
    cached = cached_prompt_tokens(run)
    summary_in = sum(s.input_tokens for s in run.summaries)
    summary_out = sum(s.output_tokens for s in run.summaries)
    row: dict[str, float | int | str] = {
        "recorded_calls": len(run.replies),
        "api_calls": len(calls),
        "token_unit": run.counter.encoding,
        "prompt_tokens": prompt,
        "peak_prompt_tokens": max((call.prompt_tokens for call in calls), default=0),
        "completion_tokens": completion,
        "cached_prompt_tokens": cached,
        "compressions": len(run.compressions),
        "decision_unit": run.decision_unit,
        "decision_prompt_tokens": sum(call.decision_tokens or 0 for call in calls),
    }
    for trigger in TRIGGERS:
        row[f"compressions_{trigger}"] = sum(1 for c in run.compressions if c.trigger == trigger)
    row["ineffective_compressions"] = sum(1 for c in run.compressions if c.ineffective)
    row["summary_calls"] = len(run.summaries)
    row["summary_input_tokens"] = summary_in
    row["summary_tokens"] = summary_out
    row["summary_fallbacks"] = sum(1 for s in run.summaries if s.fallback_used)
    row["summary_failures"] = sum(1 for s in run.summaries if s.error is not None and not s.fallback_used)
    row["cost_usd"] = price.cost(prompt + summary_in, 0, completion + summary_out)
    row["cost_cached_usd"] = price.cost(prompt + summary_in, cached, completion + summary_out)
    row["price_is_default"] = int(unknown_model)
    row.update(invariant_violations(run.compressions))
    kept, judged = task_survival(run.compressions)
    row["task_kept"], row["task_judged"], row["task_survival"] = kept, judged, _share(kept, judged)
    retained, at_risk = retention(run)
    row["facts_retained"], row["facts_at_risk"], row["retention"] = retained, at_risk, _share(retained, at_risk)
    for key in DEVIATIONS:
        row[key] = run.deviations.get(key, 0)
    row["deviations"] = sum(run.deviations.get(key, 0) for key in DIVERGENCES)
    row["failed_turns"] = sum(1 for status in run.statuses if status in ("failed", "max_iterations"))
    row["refused_calls"] = run.refused_calls
    return row


def _share(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


# ---------------------------------------------------------------- prompt caching


def cached_prompt_tokens(run: ReplayRun) -> int:
    """Prompt tokens every call shares with the call before it, summed (see the module docstring)."""
    total = 0
    for previous, call in itertools.pairwise(run.calls):
        before, now = previous.messages, call.messages
        count = len(before)
        if len(now) >= count and now[:count] == before:
            total += previous.prompt_tokens
            continue
        shared = 0
        for old, new in zip(before, now, strict=False):
            if old is not new and old != new:
                break
            shared += 1
        if shared:
            total += run.tool_tokens + sum(run.counter.count_message(m) for m in now[:shared])
    return total


# ---------------------------------------------------------------- invariants


def orphan_tool_messages(messages: Sequence[dict[str, Any]]) -> int:
    """Tool calls that get no result, plus results that answer no earlier open call."""
    open_calls: set[str] = set()
    orphans = 0
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            open_calls.update(call.get("id") for call in tool_calls_of(message))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls:
                open_calls.discard(call_id)
            else:
                orphans += 1
    return orphans + len(open_calls)


def role_order_problems(messages: Sequence[dict[str, Any]]) -> int:
    """Places where the chat order breaks: a system message after the start, a tool result that does
    not follow its assistant's calls, or two user (or two assistant) messages in a row."""
    problems = 0
    previous: str | None = None
    calling = False  # the latest assistant message called tools and its results may follow
    for message in messages:
        role = message.get("role")
        if role == "system":
            problems += previous not in (None, "system")
        elif role == "tool":
            problems += not calling
        elif role == previous and role in ("user", "assistant"):
            problems += 1
        if role != "tool":
            calling = role == "assistant" and bool(message.get("tool_calls"))
        previous = role
    return problems


def invariant_violations(compressions: Sequence[CompressionRecord]) -> dict[str, int]:
    """What the applied compressions broke that was intact in their input."""
    orphans = missing = order = 0
    for record in compressions:
        if not record.changed:
            continue
        orphans += max(0, orphan_tool_messages(record.after) - orphan_tool_messages(record.before))
        order += max(0, role_order_problems(record.after) - role_order_problems(record.before))
        missing += record.latest_user is not None and not _holds(record)
    return {"orphan_tool_pairs": orphans, "latest_user_missing": missing, "role_order_violations": order,
            "invariant_violations": orphans + missing + order}


def task_survival(compressions: Sequence[CompressionRecord]) -> tuple[int, int]:
    """(compressions after which the latest real user message is still there verbatim, compressions judged)."""
    judged = [record for record in compressions if record.changed and record.latest_user is not None]
    return sum(1 for record in judged if _holds(record)), len(judged)


def _holds(record: CompressionRecord) -> bool:
    return holds_user_message(record.after, {"role": "user", "content": record.latest_user})


# ---------------------------------------------------------------- retention


def retention(run: ReplayRun) -> tuple[int, int]:
    """(facts retained, facts at risk) over the run; see the module docstring."""
    applied: dict[int, list[CompressionRecord]] = {}
    for record in run.compressions:
        if record.changed:
            applied.setdefault(record.call, []).append(record)
    if not applied:
        return 0, 0
    texts: dict[int, str] = {}  # message_text by message object, for this measurement

    def text(message: dict[str, Any]) -> str:
        found = texts.get(id(message))
        if found is None:
            found = texts[id(message)] = message_text(message)
        return found

    pending: list[set[str]] = []  # per compression, the candidate facts it took out whose next use is to come
    retained = at_risk = 0
    for position in range(min(applied), len(run.calls)):
        for record in applied.get(position, ()):
            removed: set[str] = set()
            for message in removed_messages(record, text):
                removed |= text_words(text(message))
            pending.append(removed)
        if not any(pending):
            continue
        call = run.calls[position]
        used = reply_words(run.replies[call.reply_index])
        context: str | None = None
        for removed in pending:
            hits = removed & used
            if not hits:
                continue
            removed -= hits
            for fact in hits:
                if is_fact(fact):
                    at_risk += 1
                    if context is None:
                        context = "\n".join([text(m) for m in call.messages])
                    retained += fact in context
    return retained, at_risk


def word_set(text: str) -> set[str]:
    """The distinct words of a text, as the module docstring defines them (string methods only, C speed)."""
    return set(_words(text))


def _words(text: str) -> list[str]:
    """Every word of a text in order, repeats included (``word_set`` without the set)."""
    spaced = text.translate(_SEPARATORS)
    for mark in _CLAUSE_ENDS:
        spaced = spaced.replace(mark, " ")
    return spaced.rstrip(".,:").split()


def candidate_words(text: str) -> frozenset[str]:
    """The words of a text that could be facts: ``word_set(text)`` without the plain ones
    (``[A-Za-z][a-z]*``, never a fact), which are most words. In one C pass where it was built."""
    if _candidate_words is not None:
        return _candidate_words(text)
    return frozenset(word for word in _words(text) if _PLAIN_WORD.fullmatch(word) is None)


def text_words(text: str) -> frozenset[str]:
    """``candidate_words(text)``, remembered by text: the recorded messages a compression removes are the
    same texts under every config replayed over a recording."""
    words = _TEXT_WORDS.get(text)
    if words is None:
        words = candidate_words(text)
        bounded_put(_TEXT_WORDS, text, words, _TEXT_WORDS_MAX)
    return words


def reply_words(reply: dict[str, Any]) -> frozenset[str]:
    """``candidate_words(message_text(reply))``, remembered by the reply's content and tool calls.

    A replay puts the recording's own content string and tool-call list into
    each reply it serves, so every config replayed over a recording reads the
    same objects; the entry keeps them alive so their ids cannot be reused.
    """
    content, calls = reply.get("content"), reply.get("tool_calls")
    key = (id(content), id(calls))
    entry = _REPLY_WORDS.get(key)
    if entry is not None and entry[0] is content and entry[1] is calls:
        return entry[2]
    words = candidate_words(message_text(reply))
    bounded_put(_REPLY_WORDS, key, (content, calls, words), _REPLY_WORDS_MAX)
    return words


def facts_in(text: str) -> list[str]:
    """The facts a text names, each once."""
    return [word for word in word_set(text) if is_fact(word)]


def removed_messages(record: CompressionRecord,
                     text: Callable[[dict[str, Any]], str] | None = None) -> list[dict[str, Any]]:
    """Messages of the context before a compression that are not in its output unchanged (system prompt aside).

    ``text`` is how a message's text is read (default ``message_text``); a caller may pass a memoised one.
    """
    read = text or message_text
    kept = {id(m) for m in record.after}
    texts = {read(m) for m in record.after}
    return [m for m in record.before
            if id(m) not in kept and m.get("role") != "system" and read(m) not in texts]


def message_text(message: dict[str, Any]) -> str:
    """What a message says: its text and the arguments of its tool calls, their string escapes read
    (a command's line break is a break between words, not a ``\\n`` glued to the next one)."""
    content = message.get("content")
    text = content if isinstance(content, str) else text_of(message)
    calls = message.get("tool_calls")
    if not calls:
        return text
    arguments = ((call.get("function") or {}).get("arguments") or "" for call in calls)
    return "\n".join([text, *(_read_escapes(raw) if "\\" in raw else raw for raw in arguments)])


def _read_escapes(raw: str) -> str:
    """``raw`` with its JSON string escapes read, remembered by text: every config replayed over a recording
    reads the same recorded arguments, in its replies and in its history."""
    read = _READ_ARGUMENTS.get(raw)
    if read is None:
        read = _JSON_ESCAPE.sub(_unescape, raw)
        bounded_put(_READ_ARGUMENTS, raw, read, _READ_ARGUMENTS_MAX)
    return read


#: A JSON string escape other than ``\\uXXXX``; matched left to right, so an escaped backslash is one unit.
_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt])')
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", "b": " ", "f": " ", '"': '"', "\\": "\\", "/": "/"}


def _unescape(match: re.Match[str]) -> str:
    return _UNESCAPED[match.group(1)]


def is_fact(token: str) -> bool:
    """Whether the entity extractor, reading ``token`` alone, finds exactly it (remembered per token)."""
    verdict = _FACT_VERDICTS.get(token)
    if verdict is None:
        verdict = extract_entities(token) == [token]
        bounded_put(_FACT_VERDICTS, token, verdict, _FACT_VERDICTS_MAX)
    return verdict
