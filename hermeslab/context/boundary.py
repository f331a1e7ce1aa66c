"""Phase 2: where the summarised middle starts and ends.

The head (system prompt and, on the first compression, the opening turns) and
a tail sized by tokens stay verbatim; everything between is summarised. The
tail walk, its floors and the two anchors reproduce Hermes 0.19.0 exactly under
the ``hermes-0.19`` preset; four switches fix its known faults in the seed:

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
* ``fit_tail_to_budget`` — the tail's floor is the newest assistant/tool group
  instead of up to eight messages; a cut inside an older tool group moves past
  the group rather than before it when keeping the group would break the soft
  budget; and the latest user message pulls the cut back only while the tail
  still fits that budget (otherwise the pipeline re-inserts it after the
  summary). Hermes's floor and anchors can keep more than a small window
  holds, so its compressions leave the prompt too large.

Under ``keep_latest_user`` the tail also never *starts* with the latest real
user message when the assembly would have to merge the summary into it: a
merged message counts as a summary, so the next compression would fold the
request into its summary. The cut moves back by one group instead, or, when
that group does not fit the budget, past the request (which the pipeline
then re-inserts after the summary, merged behind it when the summary is a
user message).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Callable, Sequence

from hermeslab.core.config import CompressionConfig

from .assemble import choose_summary_role
from .budget import SUMMARY_FLOOR_TOKENS, Budgets
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


def newest_group_tail(messages: Sequence[dict], head_end: int) -> int:
    """Messages from the newest assistant message after the head to the end (its results and anything later).

    With no assistant message after the head, the last message alone.
    """
    total = len(messages)
    for index in range(total - 1, head_end - 1, -1):
        if messages[index].get("role") == "assistant":
            return total - index
    return min(1, total - head_end)


def _suffix_tokens(messages: Sequence[dict], estimate: Callable[[dict], int]) -> list[int]:
    """``after[i]``: the tokens of ``messages[i:]``; every tail the rules weigh is then one lookup."""
    return list(accumulate(map(estimate, reversed(messages)), initial=0))[::-1]


def _walk_back(after: Sequence[int], head_end: int, limit: int, min_tail: int) -> int:
    """Cut before the newest message that would take the tail past ``limit`` (once ``min_tail`` is met)."""
    total = len(after) - 1
    cut = total
    for index in range(total - 1, head_end - 1, -1):
        if after[index] > limit and total - index >= min_tail:
            break
        cut = index
    return cut


def _fill_budget(after: Sequence[int], head_end: int, limit: int) -> int:
    """Cut at the newest message whose inclusion takes the tail past ``limit`` (that message stays)."""
    for index in range(len(after) - 2, head_end - 1, -1):
        if after[index] > limit:
            return index
    return head_end


def _tail_by_tokens(messages: Sequence[dict], head_end: int, budgets: Budgets, cfg: CompressionConfig,
                    after: Sequence[int], reasons: list[str]) -> int:
    total = len(messages)
    if cfg.fit_tail_to_budget:
        min_tail = min(newest_group_tail(messages, head_end), max(0, total - head_end - 1))
    else:
        min_tail = min_tail_messages(total, head_end, cfg)
    cut = _walk_back(after, head_end, budgets.soft_tail_tokens, min_tail)
    # Under the soft budget's overshoot the span can shrink to a few messages, less than any summary costs.
    tiny_span = cfg.fit_tail_to_budget and after[head_end] - after[max(cut, head_end)] < SUMMARY_FLOOR_TOKENS
    if cut <= head_end or tiny_span:
        # Everything fits the soft budget: keep just over the plain budget so something is left to summarise.
        reasons.append("whole_fits_soft_budget" if cut <= head_end else "span_under_summary_floor")
        cut = _fill_budget(after, head_end, budgets.tail_token_budget)
    if cut > total - min_tail:
        reasons.append("min_tail")
        cut = total - min_tail
    if cut <= head_end:
        reasons.append("whole_fits_budget")
        cut = max(total - min_tail, head_end + 1)
    aligned = align_backward(messages, cut)
    if aligned != cut and cfg.fit_tail_to_budget and after[aligned] > budgets.soft_tail_tokens:
        # Keeping the whole group would break the budget: summarise all of it instead.
        forward = align_forward(messages, cut)
        if forward <= total - min_tail:
            reasons.append("tool_group_summarised")
            return forward
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
    after = _suffix_tokens(messages, estimate)
    reasons: list[str] = ["iterative_head" if iterative else "first_head"]
    head_end = align_forward(messages, head_size)
    cut = _tail_by_tokens(messages, head_end, budgets, cfg, after, reasons)

    user = last_real_user_index(messages, head_end)
    if user is not None and user < cut:
        if user > head_end and cfg.fit_tail_to_budget and after[user] > budgets.soft_tail_tokens:
            reasons.append("latest_user_over_budget")
        elif user > head_end:
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
        if cfg.cap_reply_anchor and after[moved] > budgets.soft_tail_tokens:
            reasons.append("last_reply_over_budget")
        else:
            reasons.append("last_reply")
            cut = moved

    end = min(align_forward(messages, max(cut, head_end + 1)), total)
    if previous_summary_index is not None and head_end <= previous_summary_index and end <= previous_summary_index:
        # The old summary must be folded into the new one, never kept beside it.
        reasons.append("fold_previous_summary")
        end = align_forward(messages, previous_summary_index + 1)
    if (cfg.keep_latest_user and end < total and end == last_real_user_index(messages, head_end)
            and choose_summary_role(messages[:head_end], messages[end:])[0] is None):
        end = _unmerged_end(messages, end, head_end, previous_summary_index, budgets, cfg, after, reasons)
    return Boundary(head_end, end, head_size, tuple(reasons))


def _unmerged_end(messages: Sequence[dict], end: int, head_end: int, previous_summary_index: int | None,
                  budgets: Budgets, cfg: CompressionConfig, after: Sequence[int], reasons: list[str]) -> int:
    """A tail start other than the latest user message, which the summary would otherwise be merged into.

    Preferably one group earlier; when that group breaks the budget, just past
    the user's message, which the pipeline then re-inserts after the summary.
    """
    earlier = align_backward(messages, end) if messages[end - 1].get("role") == "tool" else end - 1
    floor = head_end if previous_summary_index is None else max(head_end, previous_summary_index)
    later = align_forward(messages, end + 1)
    fits = not cfg.fit_tail_to_budget or after[earlier] <= budgets.soft_tail_tokens
    if earlier > floor and (fits or later >= len(messages)):
        reasons.append("latest_user_not_merged")
        return earlier
    if later < len(messages):
        reasons.append("latest_user_reinserted")
        return later
    return end
