"""Amplifier's simple context manager: an ephemeral view cut down in eight levels, from the kept full history.

Amplifier never changes its history: before every request it measures the
whole of it (characters of each message's text form over four) and, at 92%
of its budget, sends a compacted copy that aims at half the budget. The
levels run in order and stop once under that target: shorten the oldest
quarter of tool results, the next quarter, remove old messages outside the
newest 30%, the next quarter of results, remove outside the newest 18%, every
result but the newest five, remove outside the newest 9%, and at last shorten
the first user message and drop shortened ones. User messages are never
removed before that, only shortened; a call leaves only with all its results;
every system message goes first, and a note of what was done follows the
first one.

hermeslab rewrites the conversation in place, so the strategy keeps the full
history in the conversation's memory and rebuilds the view from it before
every request, as Amplifier does; the trigger is therefore Amplifier's own
check on the full history inside the strategy, which runs before every
request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, unchanged
from hermeslab.core.compression_config import CompressionConfig

from .base import IN_PLACE_NO_BREAKER, Citation, Policy, Preset

STRATEGY = "amplifier_simple_context"
PRESET = "amplifier-context-simple-54ca117"
SOURCE = ("microsoft/amplifier-module-context-simple @ 54ca117e (version 1.0.0), "
          "amplifier_module_context_simple/__init__.py")
COMPACT_THRESHOLD = 0.92
TARGET_USAGE = 0.50
PROTECTED_RECENT = 0.30
#: The protection of the newest messages at levels 3, 5 and 7, as shares of ``PROTECTED_RECENT``.
LEVEL_PROTECTION = (1.0, 0.6, 0.3)
PROTECTED_TOOL_RESULTS = 5
TRUNCATE_CHARS = 250
NOTICE_RESERVE = 800
SAFETY_MARGIN = 1_000
OUTPUT_RESERVE_FRACTION = 0.5
#: A user message is shortened only when longer than this, to a preview of its first characters.
STUB_MIN_CHARS = 80
STUB_PREVIEW_CHARS = 50
#: Amplifier's own guesses of what a shortened user message still costs: characters, and tokens when dropped.
STUB_CHARS = 70
STUB_TOKENS = 18
#: Amplifier stamps every stored message; a stamp of the same length stands in for it when counting.
TIMESTAMP = "2026-02-07T13:34:49.000+00:00"
#: Keys Amplifier adds to the messages it changes, which its count includes.
MARKERS = ("_truncated", "_original_tokens", "_stubbed", "_original_length")


def stored_form(message: Message) -> dict[str, Any]:
    """``message`` as Amplifier's history holds it: no hermeslab-private keys, a timestamp unless a system prompt."""
    stored = {k: v for k, v in message.items() if not k.startswith("_") or k in MARKERS}
    if message.get("role") != "system":
        stored["metadata"] = {**(message.get("metadata") or {}), "timestamp": TIMESTAMP}
    return stored


def message_tokens(message: Message) -> int:
    """Amplifier's estimate: the length of the message's text form over four."""
    return len(str(stored_form(message))) // 4


def estimate(messages: list[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


def budget(window: int, max_tokens: int | None) -> int:
    """Room for the prompt: the window less half the output cap and a safety margin, less the notice's reserve."""
    reserved_output = int((max_tokens or 0) * OUTPUT_RESERVE_FRACTION)
    return window - reserved_output - SAFETY_MARGIN - NOTICE_RESERVE


def should_compact(tokens: int, room: int, threshold: float) -> bool:
    return room > 0 and tokens / room >= threshold


def truncated(message: Message) -> Message:
    """A tool result over ``TRUNCATE_CHARS`` cut to them, with a note of its size (hermeslab's wording)."""
    content = message.get("content", "")
    if not isinstance(content, str) or len(content) <= TRUNCATE_CHARS:
        return message
    original = len(content) // 4
    return {**message, "content": f"[output cut: about {original:,} tokens; run the tool again to see it all] "
                                  f"{content[:TRUNCATE_CHARS]}...", "_truncated": True, "_original_tokens": original}


def stubbed(message: Message) -> Message:
    """A user message over ``STUB_MIN_CHARS`` shortened to a preview of its start (hermeslab's wording)."""
    content = message.get("content", "")
    if not isinstance(content, str) or len(content) <= STUB_MIN_CHARS:
        return message
    preview = content[:STUB_PREVIEW_CHARS].replace("\n", " ").strip()
    if len(content) > STUB_PREVIEW_CHARS:
        preview += "..."
    return {**message, "content": f'[user message shortened: "{preview}"]', "_stubbed": True,
            "_original_length": len(content)}


@dataclass
class Pass:
    """One compaction's running state: the messages being cut, the running count, and what was done."""

    messages: list[Message]
    tokens: int
    target: int
    level: int = 1
    truncated: int = 0
    removed: int = 0
    stubbed: int = 0
    done: list[str] = field(default_factory=list)

    @property
    def reached(self) -> bool:
        return self.tokens <= self.target


def _tool_indices(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "tool"]


def _protected_results(indices: list[int], keep: int) -> set[int]:
    return set(indices[-keep:])


def truncate_wave(state: Pass, indices: list[int], protected: set[int]) -> None:
    """Shorten the results at ``indices`` oldest first, recounting after each, until the target is met."""
    for index in indices:
        if state.reached:
            break
        if index in protected or index >= len(state.messages):
            continue
        message = state.messages[index]
        if message.get("role") != "tool" or message.get("_truncated"):
            continue
        state.messages[index] = truncated(message)
        state.truncated += 1
        state.tokens = estimate(state.messages)


def _results_of(messages: list[Message], call: Message, protected: set[int]) -> tuple[bool, list[int]]:
    """(all of the call's results may go, their indices)."""
    removable, found = True, []
    for tool_call in call.get("tool_calls") or []:
        call_id = tool_call.get("id") or tool_call.get("tool_call_id")
        if not call_id:
            continue
        for index, message in enumerate(messages):
            if message.get("tool_call_id") == call_id:
                if index in protected:
                    removable = False
                else:
                    found.append(index)
    return removable, found


def _pair_from_result(messages: list[Message], index: int, protected: set[int]) -> list[int] | None:
    """The call before result ``index`` and all its results, when they may all go."""
    for back in range(index - 1, -1, -1):
        candidate = messages[back]
        if candidate.get("role") == "assistant" and candidate.get("tool_calls"):
            if back in protected:
                return None
            removable, results = _results_of(messages, candidate, protected)
            return [back, *results] if removable else None
        if candidate.get("role") != "tool":
            break
    return None


def remove_with_protection(state: Pass, protected_share: float) -> None:
    """Remove the oldest messages outside the newest ``protected_share`` (never a user message), calls with all
    their results; then shorten user messages between the first and the last until the target is met."""
    messages = state.messages
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    first_user, last_user = (users[0], users[-1]) if users else (None, None)
    protected = {i for i, m in enumerate(messages) if m.get("role") == "system"}
    if last_user is not None:
        protected.add(last_user)
    protected.update(range(int(len(messages) * (1 - protected_share)), len(messages)))
    user_set = set(users)
    gone: set[int] = set()
    tokens = estimate(messages)
    for index in (i for i in range(len(messages)) if i not in protected and i not in user_set):
        if tokens <= state.target:
            break
        message = messages[index]
        if message.get("role") == "tool":
            pair = _pair_from_result(messages, index, protected)
            if pair is None:
                continue
            gone.update(pair)
        elif message.get("role") == "assistant" and message.get("tool_calls"):
            removable, results = _results_of(messages, message, protected)
            if not removable:
                continue
            gone.update([index, *results])
        else:
            gone.add(index)
        tokens = estimate(messages) - sum(message_tokens(messages[i]) for i in gone)
    shorten: set[int] = set()
    for index in sorted(i for i in users if i not in protected and i not in (first_user, last_user)
                        and not messages[i].get("_stubbed")):
        if tokens <= state.target:
            break
        content = messages[index].get("content", "")
        if isinstance(content, str) and len(content) > STUB_MIN_CHARS:
            shorten.add(index)
            tokens -= (len(content) - STUB_CHARS) // 4
    state.messages = [stubbed(m) if i in shorten else m for i, m in enumerate(messages) if i not in gone]
    state.removed += len(gone)
    state.stubbed += len(shorten)
    state.tokens = estimate(state.messages)


def last_resort(state: Pass) -> None:
    """Level 8: shorten the first user message (unless it is also the last), then drop shortened user messages
    outside the newest protected share, oldest first, until the target is met."""
    messages = state.messages
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    last_user = users[-1] if users else None
    if users and users[0] != last_user and not messages[users[0]].get("_stubbed"):
        content = messages[users[0]].get("content", "")
        if isinstance(content, str) and len(content) > STUB_MIN_CHARS:
            messages[users[0]] = stubbed(messages[users[0]])
            state.stubbed += 1
            state.tokens -= (len(content) - STUB_CHARS) // 4
    if state.reached:
        return
    boundary = int(len(messages) * (1 - PROTECTED_RECENT * LEVEL_PROTECTION[2]))
    gone: set[int] = set()
    for index, message in enumerate(messages):
        if message.get("_stubbed") and index < boundary and index != last_user:
            if state.reached:
                break
            gone.add(index)
            state.tokens -= STUB_TOKENS
    state.messages = [m for i, m in enumerate(messages) if i not in gone]
    state.removed += len(gone)


def compact(messages: list[Message], room: int, target_usage: float, keep_results: int) -> tuple[list[Message],
                                                                                                    Pass]:
    """Amplifier's progressive compaction of ``messages`` toward ``target_usage`` of ``room``: the view and what
    was done. System messages are set aside first and put back in front."""
    system = [dict(m) for m in messages if m.get("role") == "system"]
    state = Pass([dict(m) for m in messages if m.get("role") != "system"], estimate(messages),
                 int(room * target_usage))
    tools = _tool_indices(state.messages)
    waves = [int(len(tools) * share) for share in (0.25, 0.50)]
    steps = (
        lambda: truncate_wave(state, tools[:waves[0]], _protected_results(tools, keep_results)),
        lambda: truncate_wave(state, tools[waves[0]:waves[1]], _protected_results(tools, keep_results)),
        lambda: remove_with_protection(state, PROTECTED_RECENT * LEVEL_PROTECTION[0]),
        lambda: _later_wave(state, keep_results, 0.50, 0.75),
        lambda: remove_with_protection(state, PROTECTED_RECENT * LEVEL_PROTECTION[1]),
        lambda: _later_wave(state, keep_results, 0.0, 1.0),
        lambda: remove_with_protection(state, PROTECTED_RECENT * LEVEL_PROTECTION[2]),
    )
    for level, step in enumerate(steps, start=1):
        state.level = level
        step()
        if state.reached:
            return system + state.messages, state
    state.level = 8
    last_resort(state)
    return system + state.messages, state


def _later_wave(state: Pass, keep_results: int, start: float, end: float) -> None:
    """A wave of results counted again after removals: the share ``start`` to ``end`` of those left."""
    tools = _tool_indices(state.messages)
    truncate_wave(state, tools[int(len(tools) * start):int(len(tools) * end)], _protected_results(tools, keep_results))


def notice(state: Pass, before: int, after: int) -> Message:
    """The system note put after the first message of the view (hermeslab's wording, Amplifier's figures)."""
    return {"role": "system", "_synthetic": True,
            "content": (f"[Context compacted for this request, level {state.level} of 8: {before} messages became "
                        f"{after}; {state.removed} removed, {state.stubbed} user messages shortened, "
                        f"{state.truncated} tool results cut. The system prompt, the latest user message, the newest "
                        f"messages and the newest tool results are whole; the full history is kept.]")}


def full_history(messages: list[Message], memory: dict[str, Any]) -> list[Message]:
    """The whole history behind ``messages``: the kept one plus what came after the last view sent, or
    ``messages`` themselves when they no longer start with that view (the conversation was rewritten)."""
    view, full = memory.get("view"), memory.get("full")
    if view is not None and full is not None and messages[:len(view)] == view:
        return full + list(messages[len(view):])
    return list(messages)


def amplifier_simple_context(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The view Amplifier would send for this request, built from the full history kept in ``memory``."""
    full = full_history(messages, memory)
    room = budget(zoo.budgets.context_length, zoo.max_tokens)
    tokens = estimate(full)
    record: dict[str, Any] = {"strategy": STRATEGY, "amplifier_tokens": tokens, "amplifier_budget": room}
    if should_compact(tokens, room, zoo.cfg.threshold):
        view, state = compact(full, room, zoo.cfg.target_ratio, zoo.cfg.protect_last_n)
        at = 1 if view and view[0].get("role") == "system" else 0  # after the system prompt; first without one
        view.insert(at, notice(state, len(full), len(view)))
        record.update(level=state.level, removed=state.removed, truncated=state.truncated, stubbed=state.stubbed)
    else:
        view, state = full, None
    memory["full"], memory["view"] = full, view
    if view == messages:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_summarise"})
    changed = state.removed + state.truncated + state.stubbed if state else len(full) - len(messages)
    return result(messages, view, condensed=max(changed, 1), zoo=zoo,
                  record={**record, "outcome": "compacted" if state else "restored"})


def before_every_request(cfg: CompressionConfig, window: int, max_tokens: int | None) -> int:
    """Amplifier builds its view before every request, deciding on its own count of the full history."""
    return 1


POLICY = Policy(
    agent="Amplifier (context-simple)",
    source=SOURCE,
    presets=(Preset(PRESET, {
        **IN_PLACE_NO_BREAKER,
        "compression.strategy": STRATEGY,
        "compression.threshold": COMPACT_THRESHOLD,
        "compression.target_ratio": TARGET_USAGE,
        "compression.protect_last_n": PROTECTED_TOOL_RESULTS,
    }, "before every request, once the full history reaches 92% of the budget: a view cut toward 50% in eight "
       "levels (tool results shortened, old messages removed outside the newest 30%, then fewer); nothing is "
       "summarised and the full history is kept."),),
    fidelity="reading",
    strategies={STRATEGY: amplifier_simple_context},
    triggers={STRATEGY: before_every_request},
    citations=(
        Citation("compact_threshold 0.92, target_usage 0.50, protected_recent 0.30, protected_tool_results 5, "
                 "truncate_chars 250, notice reserve 800", "the constants", "__init__.py 57-64, 112-118"),
        Citation("Every message stored with a timestamp", "stored_form", "__init__.py 167-175"),
        Citation("Tokens: len(str(message)) // 4, summed", "message_tokens", "__init__.py 1220-1222"),
        Citation("Budget: window - int(max_output * 0.5) - 1,000; less 800 for the notice", "budget",
                 "__init__.py 1168-1191, 238-240"),
        Citation("Compact when tokens / budget >= 0.92 (never with no budget)", "should_compact", "__init__.py 346-349"),
        Citation("Built before every request from the full history, never stored", "before_every_request",
                 "__init__.py 208-307"),
        Citation("Target int(budget * 0.5); system messages set aside and put back first", "compact",
                 "__init__.py 389, 401-407, 966"),
        Citation("Waves of 25% of results; the newest 5 protected; counts recomputed after removals",
                 "compact, _later_wave", "__init__.py 420-433, 520-529, 584-590"),
        Citation("Levels 3, 5, 7 protect 30%, 18%, 9% of the newest messages", "LEVEL_PROTECTION",
                 "__init__.py 493, 557, 618, 788"),
        Citation("Removal skips user and system messages, the last user message; calls go with all results",
                 "remove_with_protection", "__init__.py 744-833, 874-944"),
        Citation("Then user messages between first and last over 80 characters are shortened", "remove_with_protection",
                 "__init__.py 835-872, 1034-1054"),
        Citation("Level 8: shorten the first user message, drop shortened ones outside the protected share",
                 "last_resort", "__init__.py 633-698"),
        Citation("Tool results over 250 characters keep their first 250", "truncated", "__init__.py 1016-1032"),
        Citation("A notice as a system message at position 1", "notice", "__init__.py 283-299"),
    ),
)
