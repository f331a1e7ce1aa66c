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
3. if even that is not enough, the summaries and the opening request go too;
4. a drop that left two user (or two assistant) messages side by side is
   mended as the pipeline places a summary (``_join_same_roles``).

What was dropped and cut is in the result's record, so every call that needed
it is counted. Only the system prompt (and the tool schemas the caller left
out of the budget) can make a prompt that cannot fit at all.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from hermeslab.core.messages import validate_messages

from .assemble import merge_summary, sanitize_tool_pairs, split_summary
from .baselines import BaselineResult, units_of
from .turns import first_real_user_index, is_real_user_message
from .types import is_summary_message

#: Share of a cut text kept from its beginning; the rest of what is kept comes from its end.
HEAD_SHARE = 2 / 3
#: Cutting passes per message before giving up on it (each re-measures what is left).
MAX_CUTS = 6


#: Put between two user messages whose exchange was dropped: says so, and keeps the chat's roles alternating.
DROPPED_NOTE = "[... an earlier exchange was dropped here to fit the context window ...]"


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
    ordinary = [u for u in units if u not in summaries and not keep & set(u)]
    target = budget_tokens
    while True:
        dropped = _drop_oldest(ordinary, costs, target)
        out, cuts = _cut_until_fits(messages, dropped, latest, target, estimate)
        if sum(map(estimate, out)) > target:
            total = sum(costs) - sum(costs[i] for i in dropped)
            dropped |= _drop_oldest(summaries, costs, target, total)
            out, cuts = _cut_until_fits(messages, dropped, latest, target, estimate)
        out, pairs, joined = _sendable(out, dropped, len(messages))
        extra = sum(estimate(m) for m in out if m.get("_fit_synthetic"))
        # The notes the mending put in need room too: plan again for what is left beside them.
        if sum(map(estimate, out)) <= budget_tokens or budget_tokens - extra >= target:
            break
        target = budget_tokens - extra
    after = sum(map(estimate, out))
    record = {"strategy": "fit_window", "budget_tokens": budget_tokens, "dropped_indices": sorted(dropped),
              "cut_messages": cuts, "joined_neighbours": joined, "over_budget": after > budget_tokens,
              "tool_pairs": pairs,
              "tokens_before": before, "tokens_after": after}
    changed = len(dropped) + len(cuts)
    return BaselineResult(out, before, after, changed, changed > 0 and after < before, record)


def _sendable(kept: list[dict], dropped: set[int], total: int) -> tuple[list[dict], dict, list[str]]:
    """The kept messages with tool pairs made whole and the same-role neighbours the drops made mended."""
    position = {id(message): index for message, index in zip(kept, (i for i in range(total) if i not in dropped))}
    out, pairs = sanitize_tool_pairs(kept, missing="drop")

    def were_neighbours(first: dict, second: dict) -> bool:
        at = position.get(id(first))
        return at is not None and position.get(id(second)) == at + 1

    out, joined = _join_same_roles(out, were_neighbours)
    return out, pairs, joined


def _join_same_roles(messages: list[dict], were_neighbours: Callable[[dict, dict], bool]
                     ) -> tuple[list[dict], list[str]]:
    """No two user (or two assistant) messages side by side that a drop put there (``were_neighbours``
    tells the pairs the input already had, which stay); what was done, per pair.

    Dropping the exchange between the opening request and a handoff summary, say, leaves two user
    messages in a row, which the chat format forbids. As the pipeline places a summary, a summary
    standing alone takes the other role when that fits between its neighbours; else it goes ahead
    of the other message's text (the shape of a summary merged into the message after it), so that
    message stays verbatim. Between two user messages otherwise goes an assistant note saying an
    exchange was dropped (joining would change the newer, which may be the request being worked on,
    and dropping the older would lose the opening request); two assistant texts join.
    """
    out: list[dict] = []
    done: list[str] = []
    for message in messages:
        previous = out[-1] if out else None
        role = message.get("role")
        if previous is None or role != previous.get("role") or role not in ("user", "assistant") \
                or previous.get("tool_calls") or were_neighbours(previous, message):
            out.append(message)
            continue
        other = "assistant" if role == "user" else "user"
        before = out[-2].get("role") if len(out) > 1 else None
        if _alone(message):
            out.append({**message, "role": other})
            done.append(f"summary moved to the {other} role")
        elif _alone(previous) and before != other and not (other == "assistant" and before == "tool"):
            out[-1] = {**previous, "role": other}
            out.append(message)
            done.append(f"summary moved to the {other} role")
        elif role == "user" and not _merges(previous, message):
            out += [{"role": "assistant", "content": DROPPED_NOTE, "_fit_synthetic": True}, message]
            done.append("note of the dropped exchange put between two user messages")
        else:
            out[-1], how = _joined(previous, message)
            done.append(how)
    return out, done


def _merges(first: dict, second: dict) -> bool:
    """Whether ``_joined`` puts a summary of the two ahead of the other's text."""
    return (not is_summary_message(second) and _summary_alone(first) is not None) or \
        (not is_summary_message(first) and _alone(second) and isinstance(second.get("content"), str))


def _alone(message: dict) -> bool:
    """A summary with no message merged into it, which can take either role."""
    return is_summary_message(message) and split_summary(message)[1] is None and not message.get("tool_calls")


def _joined(first: dict, second: dict) -> tuple[dict, str]:
    """``first`` and ``second`` (same role, in this order) as one message, and how."""
    tool_calls = {"tool_calls": second["tool_calls"]} if second.get("tool_calls") else {}
    if not is_summary_message(second) and (text := _summary_alone(first)) is not None:
        return {**merge_summary(second, text), **tool_calls}, "summary merged ahead of the next message"
    if not is_summary_message(first) and _alone(second) and isinstance(text := second.get("content"), str):
        return {**merge_summary(first, text), **tool_calls}, "summary merged ahead of the message before it"
    a, b = first.get("content"), second.get("content")
    if isinstance(a, list) or isinstance(b, list):
        content: Any = _parts(a) + _parts(b)
    else:
        content = "\n\n".join(text for text in (a, b) if text)
    return {**second, "content": content}, "assistant texts joined"


def _summary_alone(message: dict) -> str | None:
    """A summary message's framed text without a message merged behind it; None if not a summary (or not text)."""
    content = message.get("content")
    if not is_summary_message(message) or not isinstance(content, str):
        return None
    own = split_summary(message)[1]
    if own is None:
        return content
    if isinstance(own, str) and content.endswith(f"\n\n{own}"):
        return content[: -len(own) - 2]
    return None


def _parts(content: Any) -> list:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


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
