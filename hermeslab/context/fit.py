"""The last resort when a summary cannot make a prompt fit the window: drop the oldest turns, then cut.

A provider refused the prompt and compressing did not bring it under the
window (the summary plus the fixed cost is already too much, or one message
alone is larger than the window). Rather than end the turn, the conversation
is made to fit ``budget_tokens``:

1. whole units (a message, or an assistant message with its tool results) are
   dropped oldest first, except handoff summaries and the request that opened
   the conversation (they go last), the latest user request (a summary merged
   ahead of it included) and the newest unit;
2. if that is not enough, the longest texts are cut to their beginning and end
   around a marker that says how much was cut: tool results first, then
   summaries and replies (a summary keeps its opening, where the task is
   quoted), then older user messages — never the system prompt or the latest
   request;
3. if even that is not enough, the summaries and the opening request go too.

What was dropped and cut is in the result's record, so every call that needed
it is counted. Only the system prompt (and the tool schemas the caller left
out of the budget) can make a prompt that cannot fit at all.
"""

from __future__ import annotations

from typing import Callable, Sequence

from hermeslab.core.messages import validate_messages

from .assemble import sanitize_tool_pairs, split_summary
from .baselines import BaselineResult, units_of
from .turns import first_real_user_index, is_real_user_message
from .types import is_summary_message

#: Share of a cut text kept from its beginning; the rest of what is kept comes from its end.
HEAD_SHARE = 2 / 3
#: Cutting passes per message before giving up on it (each re-measures what is left).
MAX_CUTS = 6


def cut_marker(removed_chars: int) -> str:
    return f"\n[... {removed_chars:,} characters cut to fit the context window ...]\n"


def fit_to_budget(messages: list[dict], *, budget_tokens: int, estimate: Callable[[dict], int]) -> BaselineResult:
    """``messages`` made to cost at most ``budget_tokens`` (see the module docstring); never raises for size."""
    validate_messages(messages)
    first = 0
    while first < len(messages) and messages[first].get("role") in ("system", "developer"):
        first += 1
    costs = [estimate(m) for m in messages]
    before = sum(costs)
    units = units_of(messages, first)
    latest = _latest_request(messages)
    keep = {latest} | set(units[-1] if units else ())
    opening = first_real_user_index(messages)
    summaries = [u for u in units if (_holds_summary(messages, u) or opening in u) and not keep & set(u)]
    dropped = _drop_oldest([u for u in units if u not in summaries and not keep & set(u)], costs, budget_tokens)
    out, cuts = _cut_until_fits(messages, dropped, latest, budget_tokens, estimate)
    if sum(map(estimate, out)) > budget_tokens:
        total = sum(costs) - sum(costs[i] for i in dropped)
        dropped |= _drop_oldest(summaries, costs, budget_tokens, total)
        out, cuts = _cut_until_fits(messages, dropped, latest, budget_tokens, estimate)
    out, pairs = sanitize_tool_pairs(out, missing="drop")
    after = sum(map(estimate, out))
    record = {"strategy": "fit_window", "budget_tokens": budget_tokens, "dropped_indices": sorted(dropped),
              "cut_messages": cuts, "over_budget": after > budget_tokens, "tool_pairs": pairs,
              "tokens_before": before, "tokens_after": after}
    changed = len(dropped) + len(cuts)
    return BaselineResult(out, before, after, changed, changed > 0 and after < before, record)


def _latest_request(messages: Sequence[dict]) -> int | None:
    """The newest user message that is a request (a summary merged ahead of one counts), not scaffolding."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        if is_real_user_message(message) or (is_summary_message(message) and split_summary(message)[1]):
            return index
    return None


def _drop_oldest(units: list[list[int]], costs: list[int], budget_tokens: int, total: int | None = None) -> set[int]:
    """Indices of the oldest ``units`` whose removal brings ``total`` (all of ``costs``) to the budget."""
    total = sum(costs) if total is None else total
    dropped: set[int] = set()
    for unit in units:
        if total <= budget_tokens:
            break
        dropped.update(unit)
        total -= sum(costs[i] for i in unit)
    return dropped


def _holds_summary(messages: Sequence[dict], unit: list[int]) -> bool:
    return any(is_summary_message(messages[i]) for i in unit)


def _cut_until_fits(messages: list[dict], dropped: set[int], latest: int | None, budget_tokens: int,
                    estimate: Callable[[dict], int]) -> tuple[list[dict], list[dict]]:
    """The kept messages, the longest texts cut around a marker until they fit; what was cut, per message."""
    kept = [i for i in range(len(messages)) if i not in dropped]
    out = {i: messages[i] for i in kept}
    cuts: list[dict] = []
    total = sum(estimate(m) for m in out.values())
    rank = {"tool": 0, "assistant": 1, "user": 2}
    texts = [i for i in kept if i != latest and messages[i].get("role") in rank
             and isinstance(messages[i].get("content"), str)]
    for index in sorted(texts, key=lambda i: (rank[messages[i]["role"]] if not is_summary_message(messages[i]) else 1,
                                              -len(messages[i]["content"]))):
        if total <= budget_tokens:
            break
        original, cost = messages[index]["content"], estimate(messages[index])
        target = cost - (total - budget_tokens)  # what this message may cost for the list to fit
        keep = int(len(original) * max(0, target) / max(cost, 1))
        for _ in range(MAX_CUTS):
            candidate = {**messages[index], "content": _cut(original, keep)}
            if estimate(candidate) <= target or keep == 0:
                break
            keep = int(keep * 0.8)
        if len(candidate["content"]) >= len(original):
            continue  # the marker alone costs more than the text: cutting cannot help here
        total += estimate(candidate) - cost
        out[index] = candidate
        kept_chars = min(keep, len(original))
        cuts.append({"index": index, "role": candidate.get("role"), "chars_cut": len(original) - kept_chars,
                     "chars_kept": kept_chars})
    return [out[i] for i in kept], cuts


def _cut(text: str, keep: int) -> str:
    """``text`` cut to ``keep`` characters, its beginning and end around a marker saying how much went."""
    if keep >= len(text):
        return text
    head = int(keep * HEAD_SHARE)
    return text[:head] + cut_marker(len(text) - keep) + text[len(text) - (keep - head):]
