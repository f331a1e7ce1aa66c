"""Cline's context management (VS Code extension 3.65.0): drop repeated file reads, then hide older history.

Cline fires when the previous request used the window less a buffer that
depends on the window's size. It first replaces every read of a file but the
newest with a short note; when that saves less than 30% of the conversation's
characters it also hides the history after the first user-assistant pair:
half of it, or three quarters when the prompt is more than twice the allowed
size. The first assistant message then says that history was removed.

With its auto-condense setting on (off by default, and only for some model
families), Cline fires at 75% of the window (never above the allowed size)
and, unless dropping repeated reads saves 30%, has the model write a summary
that then follows the first pair, both pair messages replaced by notes.

Cline keeps tool results inside user messages; here a run of consecutive
non-assistant messages is that one user message, so an even count of hidden
messages always ends on an assistant message as in Cline's alternating history.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from hermeslab.context.assemble import sanitize_tool_pairs
from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import (Message, ZooInput, result, split_system, summarise, summary_message,
                                          total, unchanged)
from hermeslab.core.config import CompressionConfig
from hermeslab.core.messages import parse_tool_arguments, text_of, tool_calls_of

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset, share_of_window

SOURCE = "cline/cline @ 7c782abaf4d2b9c944e7cd7370c542151fec7e3e (v3.65.0)"
TRUNCATE = "cline_truncate"
AUTO_CONDENSE = "cline_auto_condense"
VERSION = "3.65.0"

#: Tokens kept free for the window sizes Cline knows by name.
NAMED_WINDOW_BUFFERS = {64_000: 27_000, 128_000: 30_000, 200_000: 40_000}
#: Any other window keeps at least this many tokens free…
OTHER_WINDOW_BUFFER = 40_000
#: …or allows this share of the window, whichever allows more.
OTHER_WINDOW_SHARE = Fraction(4, 5)
#: Share of the conversation's characters that dropping repeated reads must save to stand alone.
ENOUGH_SAVED = Fraction(3, 10)
#: Auto-condense fires at this share of the window.
AUTO_CONDENSE_THRESHOLD = 0.75
#: Messages at the start (Cline's first user-assistant pair) that are never hidden.
KEPT_PAIR = 2
#: Tools whose results are reads of the file named by their ``path`` argument.
FILE_READ_TOOLS = frozenset({"read_file"})

READ_REMOVED = "[An older read of this file was removed to save room; the newest read of it is current.]"
HISTORY_REMOVED = ("[Earlier turns of this conversation were removed to fit the context window. The first "
                   "request is kept above; give the newest messages the most weight.]")
GO_ON = "[Go on helping the user; the summary below says where the work stands.]"
RESULTS_REMOVED = "[The results of tool calls removed with the earlier history are left out.]"


# ---------------------------------------------------------------- when it fires


def max_allowed_size(window: int) -> Fraction:
    """The largest prompt Cline lets stand: the window less its buffer for that size."""
    if window in NAMED_WINDOW_BUFFERS:
        return Fraction(window - NAMED_WINDOW_BUFFERS[window])
    return max(Fraction(window - OTHER_WINDOW_BUFFER), window * OTHER_WINDOW_SHARE)


def cline_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """``tokens >= min(floor(window * threshold), max_allowed_size)``; the output cap plays no part."""
    by_share = share_of_window(window, cfg.threshold, round_up=False)
    return max(1, min(by_share, math.ceil(max_allowed_size(window))))


# ---------------------------------------------------------------- repeated file reads


def cline_units(history: list[Message]) -> list[list[int]]:
    """Indices of ``history`` grouped as Cline's messages: each assistant message, each run of the others."""
    units: list[list[int]] = []
    for index, message in enumerate(history):
        joins = (message.get("role") != "assistant" and units
                 and history[units[-1][0]].get("role") != "assistant")
        if joins:
            units[-1].append(index)
        else:
            units.append([index])
    return units


def _read_paths(history: list[Message]) -> dict[str, str]:
    """Tool call id → the path a file-read call names."""
    paths: dict[str, str] = {}
    for message in history:
        for call in tool_calls_of(message):
            function = call.get("function") or {}
            if function.get("name") not in FILE_READ_TOOLS:
                continue
            try:
                path = parse_tool_arguments(function.get("arguments")).get("path")
            except ValueError:
                continue
            if isinstance(path, str) and path:
                paths[str(call.get("id"))] = path
    return paths


def repeated_reads(history: list[Message], start: int) -> list[int]:
    """Indices at or after ``start`` of file-read results that a newer read of the same file supersedes."""
    paths = _read_paths(history)
    reads: dict[str, list[int]] = {}
    for index in range(start, len(history)):
        message = history[index]
        if message.get("role") != "tool" or message.get("content") == READ_REMOVED:
            continue
        path = paths.get(str(message.get("tool_call_id")))
        if path is not None:
            reads.setdefault(path, []).append(index)
    return sorted(i for indices in reads.values() for i in indices[:-1])


def drop_repeated_reads(history: list[Message]) -> tuple[list[Message], list[int], Fraction]:
    """(history with superseded reads replaced by a note, their indices, share of the characters saved)."""
    units = cline_units(history)
    start = units[KEPT_PAIR][0] if len(units) > KEPT_PAIR else len(history)
    indices = repeated_reads(history, start)
    out = list(history)
    saved = 0
    for index in indices:
        saved += len(text_of(history[index])) - len(READ_REMOVED)
        out[index] = {**history[index], "content": READ_REMOVED}
    characters = sum(len(text_of(m)) for m in history)
    return out, indices, Fraction(saved, characters) if characters else Fraction(0)


# ---------------------------------------------------------------- hiding history


def hidden_units(unit_count: int, keep: str) -> int:
    """How many of Cline's messages after the first pair it hides: half or three quarters, an even count."""
    rest = max(unit_count - KEPT_PAIR, 0)
    if keep == "none":
        return rest
    if keep == "half":
        return rest // 4 * 2
    if keep == "quarter":
        return rest * 3 // 4 // 2 * 2
    raise ValueError(f"keep must be 'none', 'half' or 'quarter', got {keep!r}")


def hide_history(history: list[Message], keep: str) -> tuple[list[Message], int]:
    """Cline's truncation: (history with the first pair and what follows the hidden range, messages hidden).

    The hidden range ends on an assistant message (one step back if not), as
    Cline's does. The first kept message after it loses its tool results;
    where nothing else of it is left, a short user message stands in for it,
    as Cline's user message keeps its other blocks.
    """
    units = cline_units(history)
    count = hidden_units(len(units), keep)
    end = KEPT_PAIR + count - 1
    if count and history[units[end][0]].get("role") != "assistant":
        end -= 1
    if end < KEPT_PAIR:
        return list(history), 0
    notice = {"role": "assistant", "content": HISTORY_REMOVED}
    first = [notice if history[i].get("role") == "assistant" else history[i] for unit in units[:KEPT_PAIR]
             for i in unit]
    rest = [history[i] for unit in units[end + 1:] for i in unit]
    hidden = len(history) - len(first) - len(rest)
    if rest and rest[0].get("role") != "assistant":
        run = units[end + 1]
        others = [history[i] for i in run if history[i].get("role") != "tool"]
        rest = (others or [{"role": "user", "content": RESULTS_REMOVED, "_synthetic": True}]) + rest[len(run):]
    out, _ = sanitize_tool_pairs(first + rest, missing="drop")
    return out, hidden


# ---------------------------------------------------------------- the two strategies


def cline_truncate(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """Cline's default context management: drop repeated reads, then hide half (or three quarters) if needed."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": TRUNCATE}
    deduped, dropped, share = drop_repeated_reads(history)
    record.update(reads_dropped=len(dropped), share_saved=float(share))
    if dropped and share >= ENOUGH_SAVED:
        return result(messages, system + deduped, condensed=len(dropped), zoo=zoo,
                      record={**record, "outcome": "reads_dropped"})
    prompt = total(messages, zoo.estimate)
    keep = "quarter" if Fraction(prompt, 2) > max_allowed_size(zoo.budgets.context_length) else "half"
    kept, hidden = hide_history(deduped, keep)
    if not hidden and not dropped:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_hide"})
    return result(messages, system + kept, condensed=hidden + len(dropped), zoo=zoo,
                  record={**record, "outcome": "truncated" if hidden else "reads_dropped", "keep": keep,
                          "hidden": hidden})


def cline_auto_condense(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """Cline's auto-condense: drop repeated reads; unless that saves 30%, the first pair's notes and a summary."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": AUTO_CONDENSE}
    deduped, dropped, share = drop_repeated_reads(history)
    record.update(reads_dropped=len(dropped), share_saved=float(share))
    if dropped and share >= ENOUGH_SAVED:
        return result(messages, system + deduped, condensed=len(dropped), zoo=zoo,
                      record={**record, "outcome": "reads_dropped"})
    units = cline_units(history)
    if len(units) - KEPT_PAIR <= 2:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    summary = summarise(deduped, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True,
                         error=summary.error or "empty summary")
    out = system + [{"role": "user", "content": GO_ON, "_synthetic": True},
                    {"role": "assistant", "content": HISTORY_REMOVED},
                    summary_message("user", summary.body)]
    return result(messages, out, condensed=len(history), zoo=zoo,
                  record={**record, "outcome": "compressed", "summarised": len(history)},
                  summary=summary.body, fallback=summary.fallback_used)


# ---------------------------------------------------------------- the policy


_WHERE = "src/core/context/context-management/"

POLICY = Policy(
    agent="Cline",
    source=SOURCE,
    presets=(
        Preset(f"cline-{VERSION}",
               {**IN_PLACE_NO_BREAKER, "compression.strategy": TRUNCATE, "compression.threshold": 1.0},
               "at the window less 27K-40K by its size: drop repeated file reads; unless that saves 30%, hide "
               "half of the history after the first exchange (three quarters past twice the limit)."),
        Preset(f"cline-{VERSION}-auto-condense",
               {**IN_PLACE_NO_BREAKER, "compression.strategy": AUTO_CONDENSE,
                "compression.threshold": AUTO_CONDENSE_THRESHOLD},
               "at 75% of the window (never above the size limit): drop repeated file reads; unless that saves "
               "30%, keep notes for the first exchange and a summary of the rest."),
    ),
    fidelity="reading",
    strategies={TRUNCATE: cline_truncate, AUTO_CONDENSE: cline_auto_condense},
    triggers={TRUNCATE: cline_trigger, AUTO_CONDENSE: cline_trigger},
    citations=(
        Citation("window 64,000 keeps 27,000 free, 128,000 keeps 30,000, 200,000 keeps 40,000",
                 "NAMED_WINDOW_BUFFERS", f"{_WHERE}context-window-utils.ts 20-29"),
        Citation("any other window: max(window - 40,000, 0.8 * window)", "OTHER_WINDOW_BUFFER, OTHER_WINDOW_SHARE",
                 f"{_WHERE}context-window-utils.ts 30-31"),
        Citation("fires when tokens >= min(floor(window * share), allowed size), allowed size alone without a share",
                 "cline_trigger", f"{_WHERE}ContextManager.ts 160-165, 240-243"),
        Citation("auto-condense share defaults to 0.75", "AUTO_CONDENSE_THRESHOLD",
                 "src/shared/storage/state-keys.ts 269; src/core/task/index.ts 2395-2401"),
        Citation("auto-condense is off by default and only for next-generation model families",
                 "a preset of its own", "src/shared/storage/state-keys.ts 257; src/core/task/index.ts 1886, 2374"),
        Citation("every read of a file but the newest is replaced by a note", "drop_repeated_reads",
                 f"{_WHERE}ContextManager.ts 1069-1080, 1006-1030"),
        Citation("reads are looked for after the first pair (or the hidden range)", "repeated_reads start",
                 f"{_WHERE}ContextManager.ts 628, 821"),
        Citation("truncation only when the reads saved less than 30% of the characters", "ENOUGH_SAVED",
                 f"{_WHERE}ContextManager.ts 636-649, 1267-1288"),
        Citation("three quarters hidden when tokens / 2 exceed the allowed size, else half",
                 "cline_truncate keep", f"{_WHERE}ContextManager.ts 246"),
        Citation("first pair kept; half: floor(n / 4) * 2, three quarters: floor(n * 3 / 4 / 2) * 2, all: n",
                 "hidden_units", f"{_WHERE}ContextManager.ts 298-321"),
        Citation("the hidden range ends on an assistant message (one step back)", "hide_history",
                 f"{_WHERE}ContextManager.ts 323-332"),
        Citation("the first message after the hidden range loses its tool results", "hide_history",
                 f"{_WHERE}ContextManager.ts 486-499"),
        Citation("the first assistant message's text becomes a removal notice", "HISTORY_REMOVED",
                 f"{_WHERE}ContextManager.ts 739-748"),
        Citation("after a summary the first user message becomes a note to go on", "GO_ON",
                 f"{_WHERE}ContextManager.ts 724-734, 753-784"),
        Citation("auto-condense refuses with two or fewer messages after the hidden range", "nothing_to_summarise",
                 "src/core/task/index.ts 2406-2415"),
        Citation("auto-condense first tries dropping repeated reads and compacts only if that saved under 30%",
                 "cline_auto_condense", "src/core/task/index.ts 2417-2426"),
        Citation("after the summary, everything after the first pair is hidden", "keep 'none'",
                 "src/core/task/tools/handlers/SummarizeTaskHandler.ts 220-236"),
    ),
)
