"""What Hermes decided during one ``compress()`` call, read from its own calls rather than re-derived.

The engine (``reference_engine``) wraps Hermes's compressor and its module
helpers so that each call fills a ``CompressProbe``; the functions here turn a
filled probe into the reported decisions:

- **Budgets** are read from the freshly built ``ContextCompressor``.
- **Head, start and end**: ``_protect_head_size`` and
  ``_find_tail_cut_by_tokens`` are wrapped; ``compress()`` passes its aligned
  start to the tail cut and uses the returned cut as its end, so the wrapper's
  argument and result are exactly the span it goes on to replace.
- **Summarised span**: ``_generate_summary`` is wrapped and the turns it
  receives are located in the pruned list by object identity. The span is
  narrower than ``[start, end)`` when Hermes found an earlier handoff summary
  inside the window (reported as ``previous_summary_index``).
- **Prune decisions**: ``_prune_old_tool_results`` is wrapped and its output is
  diffed against the input message by message (pruning rewrites in place, so
  indices line up). Each change is classified by what changed: tool-call
  arguments → ``shrink_args``; multimodal tool content → ``image_placeholder``;
  text equal to Hermes's duplicate back-reference (learned once at start-up by
  pruning two identical results) → ``dedupe``; text that Hermes's one-liner
  builder produced during this pass (recorded by wrapping it) → ``one_line``.
  Any other change is reported as an error instead of being guessed.
- **Prune boundary**: Hermes's backward budget walk sizes one message per call
  of ``_estimate_msg_budget_tokens``; counting those calls during the prune pass
  gives where the walk stopped, and Hermes's ``protect_last_n`` floor can only
  move it earlier. Every non-dedupe rewrite is checked to lie below it.

Like every module of the worker, this one imports only the standard library.
"""

from __future__ import annotations

from typing import Any


class CompressProbe:
    """What Hermes decided during one ``compress()`` call, read from its own calls.

    - ``head_size``: the value ``_protect_head_size`` returned.
    - ``compress_start`` / ``compress_end``: the ``head_end`` argument and the
      return value of ``_find_tail_cut_by_tokens``; ``compress()`` passes its
      aligned start in and uses the result as its end.
    - ``pruned``: the list ``_prune_old_tool_results`` returned. It has the
      input's length and order, so its indices are the input's indices.
    - ``prune_walk_steps``: how many messages the prune pass's backward budget
      walk sized (one ``_estimate_msg_budget_tokens`` call per visited message),
      so the walk stopped at index ``n - prune_walk_steps``.
    - ``one_liners``: every text ``_summarize_tool_result`` produced while pruning.
    - ``summary_index``: what ``_find_latest_context_summary`` returned.
    - ``turns``: the exact list handed to ``_generate_summary``; its items are
      the pruned list's own objects, so identity locates the summarised span.
    """

    def __init__(self) -> None:
        self.head_size: int | None = None
        self.compress_start: int | None = None
        self.compress_end: int | None = None
        self.pruned: list[dict] | None = None
        self.pruning = False
        self.prune_walk_steps = 0
        self.one_liners: set[str] = set()
        self.summary_index: int | None = None
        self.turns: list[dict] | None = None


def outcome(compressor: Any, probe: CompressProbe) -> str:
    """How the call ended: compressed, too_small, nothing_to_compress or aborted."""
    if probe.pruned is None:
        return "too_small"
    if probe.compress_start is None or probe.compress_end is None:
        raise RuntimeError("compress() pruned the messages but never chose a tail cut")
    if probe.compress_start >= probe.compress_end:
        return "nothing_to_compress"
    if compressor._last_compress_aborted:
        return "aborted"
    return "compressed"


def prune_boundary(compressor: Any, n: int, probe: CompressProbe) -> int | None:
    """Index below which the prune pass rewrote old results and arguments.

    The budget walk stopped at ``n - prune_walk_steps``; Hermes then keeps
    at least ``protect_last_n`` messages protected, which can only move the
    boundary earlier.
    """
    if probe.pruned is None:
        return None
    walk_stop = n - probe.prune_walk_steps
    return min(walk_stop, n - min(compressor.protect_last_n, n))


def prune_actions(original: list[dict], probe: CompressProbe, dedupe_marker: str) -> list[dict]:
    """Classify every message the prune pass changed, by what changed in it."""
    if probe.pruned is None:
        return []
    actions = []
    for index, (before, after) in enumerate(zip(original, probe.pruned)):
        if before == after:
            continue
        actions.append({"index": index, "action": _prune_action(index, before, after, probe, dedupe_marker)})
    return actions


def _prune_action(index: int, before: dict, after: dict, probe: CompressProbe, dedupe_marker: str) -> str:
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    role = before.get("role")
    if role == "assistant" and changed == ["tool_calls"]:
        return "shrink_args"
    if role == "tool" and changed == ["content"]:
        old, new = before.get("content"), after.get("content")
        if isinstance(old, (list, dict)):
            return "image_placeholder"
        if new == dedupe_marker:
            return "dedupe"
        if new in probe.one_liners:
            return "one_line"
    raise RuntimeError(f"the prune pass changed message {index} ({role}, fields {changed}) in an unrecognised way")


def summarised_span(probe: CompressProbe) -> list[int] | None:
    """``[start, end)`` of the messages passed to the summariser, located by identity."""
    if probe.turns is None or probe.pruned is None:
        return None
    if not probe.turns:
        return [probe.compress_end, probe.compress_end]
    first = next((i for i, message in enumerate(probe.pruned) if message is probe.turns[0]), None)
    end = None if first is None else first + len(probe.turns)
    if first is None or any(a is not b for a, b in zip(probe.pruned[first:end], probe.turns)):
        raise RuntimeError("the summarised turns are not a contiguous slice of the pruned messages")
    return [first, end]


def decisions(compressor: Any, original: list[dict], probe: CompressProbe, dedupe_marker: str) -> dict:
    """Everything one compress() call decided, indexed against ``original``."""
    n = len(original)
    boundary = prune_boundary(compressor, n, probe)
    actions = prune_actions(original, probe, dedupe_marker)
    for action in actions:
        if action["action"] != "dedupe" and boundary is not None and action["index"] >= boundary:
            raise RuntimeError(
                f"message {action['index']} was rewritten ({action['action']}) above the "
                f"prune boundary {boundary}"
            )
    return {
        "outcome": outcome(compressor, probe),
        "head_size": probe.head_size,
        "compress_start": probe.compress_start,
        "compress_end": probe.compress_end,
        "prune_boundary": boundary,
        "pruned": actions,
        "previous_summary_index": probe.summary_index,
        "summarised_indices": summarised_span(probe),
    }


def budgets(compressor: Any) -> dict:
    """The token budgets of a freshly built compressor."""
    return {
        "context_length": compressor.context_length,
        "threshold_percent": compressor.threshold_percent,
        "threshold_tokens": compressor.threshold_tokens,
        "tail_token_budget": compressor.tail_token_budget,
        "max_summary_tokens": compressor.max_summary_tokens,
    }
