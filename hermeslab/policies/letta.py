"""Letta's compaction (its Python server's v3 agent): evict the oldest messages up to an assistant message, summarise
them, keep the rest.

Past 90% of the window Letta compacts in its default ``sliding_window`` mode:
starting from its 30% eviction share it evicts 10 points more of the message
count at a time, cutting at the newest assistant message at or before that
count, until the system prompt and the kept messages fit in 70% of the
window; the evicted messages become one summary right after the system
prompt. With no such cut (or one at the last message), or when that summary
fails, it summarises everything after the system prompt instead. Letta then
checks the kept part with its tool definitions against the trigger and
summarises it too when it still reaches it; hermeslab's strategies see no tool
definitions, and without them a kept part within 70% of the window never
reaches 90%, so that step is left out. Fidelity is by reading: the ``letta`` 0.16.8 server declares about 70
dependencies (a database and many providers) and was not run here.

The system prompt is Letta's message 0; hermeslab may hold it apart before the
strategy runs, so it is counted as message 0 whether it is in ``messages`` or
not (its tokens only when it is).
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, split_system, summarise, summary_message, unchanged
from hermeslab.core.config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

VERSION = "0.16.8"
PRESET = f"letta-{VERSION}"
STRATEGY = "letta_sliding_window"
#: Share of the window past which Letta compacts.
TRIGGER_SHARE = 0.9
#: The eviction share Letta starts from, and what it adds each round (in its float arithmetic).
EVICTION_START = 0.30
EVICTION_STEP = 0.10
OPENING = "Earlier messages of this conversation were taken out of view to save room; what they said, in short:"


def trigger_threshold(cfg: CompressionConfig, window: int) -> int:
    """``int(context_window * 0.9)``: Letta compacts when its estimate is above it."""
    return int(window * cfg.threshold)


def trigger(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    return trigger_threshold(cfg, window) + 1


def sliding_cut(history: list[Message], system_tokens: int, window: int, estimate: Any) -> int | None:
    """The index in Letta's list (system prompt at 0, ``history`` from 1) where the kept messages start, or None
    when Letta gives up on the sliding window (no assistant message to cut at, or only the last)."""
    total = len(history) + 1
    goal = (1 - EVICTION_START) * window
    tokens: float = window
    eviction = EVICTION_START
    cut: int | None = None
    while tokens >= goal and eviction < 1.0:
        eviction += EVICTION_STEP
        limit = round(eviction * total)
        cut = next((i for i in reversed(range(1, limit + 1)) if i < total
                    and history[i - 1].get("role") == "assistant"), None)
        if cut is None:
            continue
        tokens = system_tokens + sum(estimate(m) for m in history[cut - 1:])
    if cut is None or eviction >= 1.0 or cut >= total - 1:
        return None
    return cut


def letta_sliding_window(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """One Letta compaction: sliding-window eviction with a summary, falling back to summarising everything."""
    system, history = split_system(messages)
    record: dict[str, Any] = {"strategy": STRATEGY}
    if not history:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    window = zoo.budgets.context_length
    system_tokens = sum(zoo.estimate(m) for m in system)
    cut = sliding_cut(history, system_tokens, window, zoo.estimate)
    mode = "sliding_window" if cut is not None else "all"
    kept = history[cut - 1:] if cut is not None else []
    summary = summarise(history[:cut - 1] if cut is not None else history, zoo, kept=kept)
    if not summary.body and cut is not None:  # a failed sliding window falls back to summarising everything
        mode, kept = "all", []
        summary = summarise(history, zoo)
    if not summary.body:
        return unchanged(messages, zoo, {**record, "outcome": "summary_failed"}, aborted=True, error=summary.error)
    out = system + [summary_message("user", f"{OPENING}\n{summary.body}")] + kept
    return result(messages, out, condensed=len(history) - len(kept), zoo=zoo,
                  record={**record, "outcome": "compressed", "mode": mode, "kept": len(kept)},
                  summary=summary.body, fallback=summary.fallback_used)


_S = "letta/services/summarizer"

#: Where each number and rule was read, in letta 0.16.8 (the Python server) as downloaded from the package index.
CITATIONS = (
    Citation("trigger: estimate > int(context_window * 0.9)", "trigger",
             "letta/constants.py:83; letta/services/summarizer/thresholds.py:30-44; "
             "letta/agents/letta_agent_v3.py:938, 1439"),
    Citation("default mode sliding_window; eviction share 0.30", "EVICTION_START",
             f"{_S}/summarizer_config.py:76-82; letta/settings.py:86"),
    Citation("goal: the kept part within (1 - 0.30) of the window; start at 0.30, add 0.10 before each try",
             "sliding_cut", f"{_S}/summarizer_sliding_window.py:144-168"),
    Citation("cut at the newest assistant message at or before round(share * count)", "sliding_cut",
             f"{_S}/summarizer_sliding_window.py:156-183"),
    Citation("the kept part is counted with the system prompt", "sliding_cut",
             f"{_S}/summarizer_sliding_window.py:187-188"),
    Citation("no cut, a share reaching 1.0, or a cut at the last message: give up the sliding window",
             "sliding_cut", f"{_S}/summarizer_sliding_window.py:193-198"),
    Citation("summarised: messages 1 to the cut; kept: the cut onwards", "letta_sliding_window",
             f"{_S}/summarizer_sliding_window.py:200-232"),
    Citation("a failed sliding window falls back to summarising everything after the system prompt",
             "letta_sliding_window", f"{_S}/compact.py:309-346; {_S}/summarizer_all.py:59-86"),
    Citation("the summary goes right after the system prompt", "letta_sliding_window",
             f"{_S}/compact.py:426-465"),
)

POLICY = Policy(
    agent="Letta (Python server, v3 agent)",
    source=f"letta {VERSION} (PyPI, read, not run)",
    presets=(Preset(PRESET, {**IN_PLACE_NO_BREAKER, "compression.strategy": STRATEGY,
                             "compression.threshold": TRIGGER_SHARE},
                    "past 90% of the window: summarise the oldest 40% or more of the messages (up to an assistant "
                    "message) until the rest fits in 70% of the window"),),
    fidelity="reading",
    strategies={STRATEGY: letta_sliding_window},
    triggers={STRATEGY: trigger},
    citations=CITATIONS,
)
