"""Qwen Code's chat compression: the whole history becomes one summary, then the recently touched files return.

Qwen Code compacts at ``min(0.85 × window, window − 33,000)`` tokens (the
20,000-token summary reserve plus a 13,000-token buffer); a window of 33,000
or less leaves no room for that ceiling and compacts at 85% of it. Everything
before the request being sent is summarised. Afterwards the model sees the
summary with a line asking it to resume, an acknowledgement, then one user
message with the files the last assistant turns touched (up to five, newest
first): a file up to 5,000 tokens is embedded in full, within 50,000 tokens
for all of them; a larger one is only named. A call still waiting for its
results stays after all that, and the request being sent comes last. A
compaction that leaves no summary or makes the history larger fails; after
three failures in a row automatic compaction stops.

Qwen Code reads the files from disk; a replay has no disk, so a file's content
is its newest full text in the conversation (a read result or the content a
write sent), and a file whose text the conversation never showed is named.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import (Message, ZooInput, result, split_system, summarise, summary_message,
                                          total, unchanged)
from hermeslab.core.config import CompressionConfig
from hermeslab.core.messages import parse_tool_arguments, text_of, tool_calls_of

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

SOURCE = ("QwenLM/qwen-code: packages/core/src/services/chatCompressionService.ts @ "
          "00b481a30437e76f2196d18e3783c16d39e1d9f8, postCompactAttachments.ts @ "
          "15234f76bc4ffd076892da398e87abf6665dbe91")
STRATEGY = "qwen_code_compress"
NAME = "qwen-code-00b481a"

#: Share of the window Qwen Code prefers to compact at.
DEFAULT_PCT = 0.85
#: Tokens kept for the summary's own output.
SUMMARY_RESERVE = 20_000
#: Tokens kept between the trigger and the window less the summary reserve.
AUTOCOMPACT_BUFFER = 13_000
#: Consecutive failed compactions after which automatic compaction stops.
MAX_CONSECUTIVE_FAILURES = 3
#: Files restored after a compaction, newest first.
MAX_FILES_TO_RESTORE = 5
#: A file up to this many tokens is embedded whole; a larger one is only named.
MAX_TOKENS_PER_FILE = 5_000
#: Tokens all embedded files may take together; past it, files are only named.
FILE_TOKEN_BUDGET = 50_000
#: Qwen Code's characters per token when sizing files.
CHARS_PER_TOKEN = 4
#: Tools whose calls touch the file their ``file_path`` (here also ``path``) names.
FILE_TOUCHING_TOOLS = frozenset({"read_file", "write_file", "edit", "replace"})
#: A cooldown no replay outlasts: the third failure in a row switches automatic compaction off.
STOPPED = 1e12

RESUME = ("Pick the task up from the summary above, at the step that was in progress; do not acknowledge the "
          "summary, introduce yourself or greet the user again.")
ACK = "Understood; I have the context."
FILES_NAMED = ("Files used just before the conversation was compacted, named only because they are large; read "
               "any you need again:")
FILE_EMBEDDED = "A file used just before the conversation was compacted, with its full content:"


# ---------------------------------------------------------------- when it fires


def auto_threshold(window: int, share: float = DEFAULT_PCT) -> Fraction:
    """``min(share × window, window − 20,000 − 13,000)``; ``share × window`` when that ceiling is not positive."""
    proportional = window * Fraction(str(share))
    ceiling = max(0, window - SUMMARY_RESERVE) - AUTOCOMPACT_BUFFER
    return min(proportional, Fraction(ceiling)) if ceiling > 0 else proportional


def qwen_trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Compacts unless ``tokens < auto``: the smallest whole count at or past it (the output cap plays no part)."""
    return max(1, math.ceil(auto_threshold(window, cfg.threshold)))


# ---------------------------------------------------------------- the files that come back


def _file_path(call: dict) -> str | None:
    function = call.get("function") or {}
    if function.get("name") not in FILE_TOUCHING_TOOLS:
        return None
    try:
        arguments = parse_tool_arguments(function.get("arguments"))
    except ValueError:
        return None
    path = arguments.get("file_path", arguments.get("path"))
    return path if isinstance(path, str) and path else None


def recent_file_paths(history: list[Message], limit: int = MAX_FILES_TO_RESTORE) -> list[str]:
    """The files the newest assistant calls touched, newest first (the last call of a turn first), each once."""
    seen: list[str] = []
    for message in reversed(history):
        if message.get("role") != "assistant":
            continue
        for call in reversed(tool_calls_of(message)):
            path = _file_path(call)
            if path is not None and path not in seen:
                seen.append(path)
                if len(seen) >= limit:
                    return seen
    return seen


def latest_text(history: list[Message], path: str) -> str | None:
    """The text of ``path`` after the newest call touching it: a read's result or a write's content; None after
    an edit or an unanswered read, whose result shows no full text."""
    results = {str(m.get("tool_call_id")): m for m in history if m.get("role") == "tool"}
    for message in reversed(history):
        for call in reversed(tool_calls_of(message)):
            if _file_path(call) != path:
                continue
            name = (call.get("function") or {}).get("name")
            if name == "read_file" and str(call.get("id")) in results:
                return text_of(results[str(call.get("id"))])
            if name == "write_file":
                content = parse_tool_arguments((call.get("function") or {}).get("arguments")).get("content")
                return content if isinstance(content, str) else None
            return None
    return None


def restored_files(history: list[Message], limit: int = MAX_FILES_TO_RESTORE) -> list[str]:
    """The text parts Qwen Code adds after the acknowledgement: a list of named files, then each embedded file.

    At the default five files of at most 5,000 tokens each, the shared
    50,000-token budget cannot bind; it does when more files are restored.
    """
    named: list[str] = []
    embedded: list[str] = []
    used = 0
    for path in recent_file_paths(history, limit):
        text = latest_text(history, path)
        if text is None or len(text) > MAX_TOKENS_PER_FILE * CHARS_PER_TOKEN:
            named.append(path)
        elif used + len(text) > FILE_TOKEN_BUDGET * CHARS_PER_TOKEN:
            named.append(path)
        else:
            embedded.append(f"{FILE_EMBEDDED}\n\n## {path}\n\n```\n{text}\n```")
            used += len(text)
    parts = [FILES_NAMED + "\n\n" + "\n".join(f"- {p}" for p in named)] if named else []
    return parts + embedded


# ---------------------------------------------------------------- the compaction


def pending(history: list[Message]) -> tuple[list[Message], list[Message], list[Message]]:
    """(the history Qwen Code summarises, a trailing call with its waiting results, the request being sent).

    The request being sent is a trailing user message, which Qwen Code adds
    after compacting; a trailing assistant message with calls is kept so the
    results waiting for it still have their call (those results are
    summarised too, as Qwen Code sends the pending result with the history).
    """
    if history and history[-1].get("role") == "user":
        return history[:-1], [], [history[-1]]
    end = len(history)
    while end > 0 and history[end - 1].get("role") == "tool":
        end -= 1
    if end > 0 and history[end - 1].get("role") == "assistant" and tool_calls_of(history[end - 1]):
        return history, history[end - 1:], []
    return history, [], []


def compacted(summary: str, files: list[str], call: list[Message], request: list[Message]) -> list[Message]:
    """Qwen Code's history after a compaction, with the request being sent appended as it will be."""
    out = [summary_message("user", f"{summary}\n\n{RESUME}")]
    if call and not files:
        return out + [{**call[0], "content": ACK}, *call[1:]]
    out.append({"role": "assistant", "content": ACK})
    if files:
        out.append({"role": "user", "content": [{"type": "text", "text": text} for text in files]})
    return out + call + request


def qwen_compress(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Qwen Code compaction of ``messages`` (system messages stay in front, untouched)."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    span, call, request = pending(history)
    waiting_results = len(call) - 1 if call else 0
    if len(span) - waiting_results < 2:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    summary = summarise(span, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True,
                         error=summary.error or "empty summary")
    files = restored_files(span)
    out = system + compacted(summary.body, files, call, request)
    if total(out, zoo.estimate) > total(messages, zoo.estimate):
        return unchanged(messages, zoo, {**record, "outcome": "inflated"}, aborted=True,
                         error="the compacted history is larger than the original")
    kept = len(call) + len(request)
    return result(messages, out, condensed=len(history) - kept, zoo=zoo,
                  record={**record, "outcome": "compressed", "files_restored": len(files), "kept": kept},
                  summary=summary.body, fallback=summary.fallback_used)


# ---------------------------------------------------------------- the policy

_STOP_AFTER_THREE: dict[str, Any] = {
    **IN_PLACE_NO_BREAKER,
    "compression.failure_cooldown_ladder": [0.0] * (MAX_CONSECUTIVE_FAILURES - 1) + [STOPPED],
}

_CCS = "packages/core/src/services/chatCompressionService.ts"
_PCA = "packages/core/src/services/postCompactAttachments.ts"

POLICY = Policy(
    agent="Qwen Code",
    source=SOURCE,
    presets=(Preset(NAME, {**_STOP_AFTER_THREE, "compression.strategy": STRATEGY,
                           "compression.threshold": DEFAULT_PCT},
                    "at min(85% of the window, the window less 33K): one summary of everything, an acknowledgement, "
                    "then up to five recently used files; stops after three failed compactions in a row."),),
    fidelity="reading",
    strategies={STRATEGY: qwen_compress},
    triggers={STRATEGY: qwen_trigger},
    citations=(
        Citation("summary output capped at 20,000 tokens, reserved from the window", "SUMMARY_RESERVE",
                 f"{_CCS} 50, 65"),
        Citation("preferred share 0.85", "DEFAULT_PCT", f"{_CCS} 58"),
        Citation("buffer 13,000 tokens below the window less the reserve", "AUTOCOMPACT_BUFFER", f"{_CCS} 73"),
        Citation("auto = min(share x window, window - 20,000 - 13,000); share x window when that is not positive",
                 "auto_threshold", f"{_CCS} 159-194 (169, 176-181)"),
        Citation("compacts unless tokens < auto", "qwen_trigger", f"{_CCS} ChatCompressionService.compress"),
        Citation("three consecutive failures stop automatic compaction", "failure_cooldown_ladder",
                 f"{_CCS} 91; ChatCompressionService.compress (the first gate)"),
        Citation("the whole history (and a pending tool result) is summarised", "pending, summarise(span)",
                 f"{_CCS} ChatCompressionService.compress (sideQueryHistory)"),
        Citation("fewer than two messages: nothing to do", "nothing_to_summarise",
                 f"{_CCS} ChatCompressionService.compress (curatedHistory.length < 2)"),
        Citation("an empty summary or a larger result is a failure and changes nothing", "aborted",
                 f"{_CCS} ChatCompressionService.compress (EMPTY_SUMMARY, INFLATED_TOKEN_COUNT)"),
        Citation("summary as a user message with a resume line, then an acknowledgement", "RESUME, ACK",
                 f"{_PCA} postProcessSummary, composePostCompactHistory"),
        Citation("up to 5 files, newest call first, from read_file, write_file, edit, replace", "recent_file_paths",
                 f"{_PCA} 24, 60-65, extractRecentFilePaths"),
        Citation("a file over 5,000 tokens (4 characters each) is named, not embedded", "MAX_TOKENS_PER_FILE",
                 f"{_PCA} 55, readFileSizeAdaptive; tokenEstimation.ts CHARS_PER_TOKEN"),
        Citation("embedded files share 50,000 tokens; past it they are named", "FILE_TOKEN_BUDGET",
                 f"{_PCA} 56, buildFileRestorationBlocks"),
        Citation("named files first in one block, then each embedded file, all in one user message",
                 "restored_files", f"{_PCA} buildFileRestorationBlocks, composePostCompactHistory"),
        Citation("a trailing call stays after the files, or joins the acknowledgement when there are none",
                 "pending", f"{_PCA} trailingFunctionCallContent, composePostCompactHistory"),
    ),
)
