"""Phase 2: where the summarised middle starts and ends.

The head (system prompt and, on the first compression, the opening turns) and
a tail sized by tokens stay verbatim; everything between is summarised. The
tail walk, its floors and the two anchors reproduce Hermes 0.19.0 exactly under
the ``hermes-0.19`` preset; three switches fix its known faults in the seed:

* ``summary_aware_head`` — an existing handoff summary is found *before* the
  head is sized, so a resumed conversation drops head protection, and the
  summarised range always reaches the old summary: it is folded into the new
  one instead of kept beside it.
* ``keep_latest_user`` — when the latest real user message sits right after the
  head, it joins the head; Hermes instead summarises it with its whole turn,
  so the model loses the request it is working on.
* ``cap_reply_anchor`` — the last assistant reply is pulled into the tail only
  when the resulting tail fits the soft budget; Hermes pulls it in at any cost,
  which keeps a long tool-only run verbatim and defeats the compression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from hermeslab.core.config import CompressionConfig

from .budget import Budgets
from .turns import align_backward, align_forward, last_assistant_reply_index, last_real_user_index, turn_end

#: Conversations with no more than this many messages beyond the head are left alone.
MIN_MESSAGES_BEYOND_HEAD = 4


@dataclass(frozen=True)
class Boundary:
    #: First summarised index.
    start: int
    #: First index of the verbatim tail.
    end: int
    #: Leading messages protected before alignment (system prompt included).
    head_size: int
    #: Short tags naming every rule that moved a boundary, in order.
    reasons: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return self.start >= self.end

    def as_record(self) -> dict:
        return {"start": self.start, "end": self.end, "head_size": self.head_size, "reasons": list(self.reasons)}


def protected_head_size(messages: Sequence[dict], cfg: CompressionConfig, *, iterative: bool) -> int:
    """System prompt plus ``protect_first_n`` opening messages, which only the first compression keeps."""
    system = 1 if messages and messages[0].get("role") == "system" else 0
    return system + (0 if iterative else cfg.protect_first_n)


def min_tail_messages(total: int, head_end: int, cfg: CompressionConfig) -> int:
    """Fewest messages the tail keeps, leaving at least two messages to summarise when it can."""
    available = max(0, total - head_end - 1)
    if available <= 1:
        return 0
    floor = max(3, min(cfg.protect_last_n, cfg.tail_floor_cap))
    return min(floor, max(3, available - 2), available)


def _walk_back(messages: Sequence[dict], head_end: int, limit: int, min_tail: int,
               estimate: Callable[[dict], int]) -> int:
    """Cut before the newest message that would take the tail past ``limit`` (once ``min_tail`` is met)."""
    total = len(messages)
    used = 0
    cut = total
    for index in range(total - 1, head_end - 1, -1):
        tokens = estimate(messages[index])
        if used + tokens > limit and total - index >= min_tail:
            break
        used += tokens
        cut = index
    return cut


def _fill_budget(messages: Sequence[dict], head_end: int, limit: int, estimate: Callable[[dict], int]) -> int:
    """Cut at the newest message whose inclusion takes the tail past ``limit`` (that message stays)."""
    used = 0
    for index in range(len(messages) - 1, head_end - 1, -1):
        used += estimate(messages[index])
        if used > limit:
            return index
    return head_end


def _tail_by_tokens(messages: Sequence[dict], head_end: int, budgets: Budgets, cfg: CompressionConfig,
                    estimate: Callable[[dict], int], reasons: list[str]) -> int:
    total = len(messages)
    min_tail = min_tail_messages(total, head_end, cfg)
    cut = _walk_back(messages, head_end, budgets.soft_tail_tokens, min_tail, estimate)
    if cut <= head_end:
        # Everything fits the soft budget: keep just over the plain budget so something is left to summarise.
        reasons.append("whole_fits_soft_budget")
        cut = _fill_budget(messages, head_end, budgets.tail_token_budget, estimate)
    if cut > total - min_tail:
        reasons.append("min_tail")
        cut = total - min_tail
    if cut <= head_end:
        reasons.append("whole_fits_budget")
        cut = max(total - min_tail, head_end + 1)
    aligned = align_backward(messages, cut)
    if aligned != cut:
        reasons.append("tool_group")
    return aligned


def choose_boundary(messages: Sequence[dict], *, budgets: Budgets, cfg: CompressionConfig, compression_count: int,
                    previous_summary_index: int | None, estimate: Callable[[dict], int]) -> Boundary:
    """The summarised range ``[start, end)``; ``start >= end`` means nothing to summarise.

    ``previous_summary_index`` is where a handoff summary was found before the
    head was sized (only under ``summary_aware_head``); its presence, like a
    previous compression, turns off the protection of the opening turns.
    """
    iterative = compression_count >= 1 or previous_summary_index is not None
    head_size = protected_head_size(messages, cfg, iterative=iterative)
    total = len(messages)
    if total <= head_size + MIN_MESSAGES_BEYOND_HEAD:
        return Boundary(head_size, head_size, head_size, ("too_small",))
    reasons: list[str] = ["iterative_head" if iterative else "first_head"]
    head_end = align_forward(messages, head_size)
    cut = _tail_by_tokens(messages, head_end, budgets, cfg, estimate, reasons)

    user = last_real_user_index(messages, head_end)
    if user is not None and user < cut:
        if user > head_end:
            reasons.append("latest_user")
            cut = user
        elif cfg.keep_latest_user:
            reasons.append("latest_user_in_head")
            head_size = user + 1
            head_end = align_forward(messages, head_size)
        else:
            reasons.append("latest_user_turn_summarised")
            cut = turn_end(messages, user)

    reply = last_assistant_reply_index(messages, head_end)
    if reply is not None and reply < cut:
        moved = max(align_backward(messages, reply), head_end + 1)
        if cfg.cap_reply_anchor and sum(estimate(m) for m in messages[moved:]) > budgets.soft_tail_tokens:
            reasons.append("last_reply_over_budget")
        else:
            reasons.append("last_reply")
            cut = moved

    end = min(align_forward(messages, max(cut, head_end + 1)), total)
    if previous_summary_index is not None and head_end <= previous_summary_index and end <= previous_summary_index:
        # The old summary must be folded into the new one, never kept beside it.
        reasons.append("fold_previous_summary")
        end = align_forward(messages, previous_summary_index + 1)
    return Boundary(head_end, end, head_size, tuple(reasons))
