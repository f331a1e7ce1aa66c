"""Two summary-free strategies to compare the pipeline against.

* ``observation_masking`` — keep every message but replace all tool outputs except
  the newest few with a placeholder. Cheap, keeps the agent's own reasoning.
* ``sliding_window`` — drop the oldest messages (whole tool groups) until the
  conversation fits a budget, keeping the system prompt and the latest real
  user message.

Both return a BaselineResult, which carries the fields the trigger policy and
the evaluation read from a CompressionResult.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from hermeslab.core.messages import validate_messages

from .assemble import sanitize_tool_pairs
from .turns import has_tool_calls, last_real_user_index


@dataclass
class BaselineResult:
    """A compaction made outside the summary pipeline: the fields the policy, the compactor and the replay read."""

    messages: list[dict]
    tokens_before: int
    tokens_after: int
    #: Messages that no longer appear verbatim (masked, dropped, cleared or summarised).
    condensed: int
    effective: bool
    record: dict = field(default_factory=dict)
    aborted: bool = False
    #: The summary a strategy wrote (the summary-free baselines write none).
    summary_text: str | None = None
    fallback_used: bool = False
    summary_error: str | None = None


def _effective(condensed: int, before: int, after: int, min_saving: float) -> bool:
    saved = before - after
    return condensed > 0 and saved > 0 and saved >= min_saving * before


def masked_text(content: str) -> str:
    return f"[tool output omitted to save context: {len(content):,} chars]"


def observation_masking(messages: list[dict], *, keep_last_n_observations: int = 3,
                        estimate: Callable[[dict], int], min_saving: float = 0.10) -> BaselineResult:
    """Replace the text of every tool result but the newest ``keep_last_n_observations``."""
    validate_messages(messages)
    if keep_last_n_observations < 0:
        raise ValueError(f"keep_last_n_observations must not be negative, got {keep_last_n_observations}")
    tool_indices = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = tool_indices[:max(0, len(tool_indices) - keep_last_n_observations)]
    out = list(messages)
    masked = []
    for index in old:
        content = messages[index].get("content")
        if isinstance(content, str) and len(content) > len(masked_text(content)):
            out[index] = {**messages[index], "content": masked_text(content)}
            masked.append(index)
    before = sum(map(estimate, messages))
    after = sum(map(estimate, out))
    record = {"strategy": "observation_masking", "keep_last_n_observations": keep_last_n_observations,
              "masked_indices": masked, "tokens_before": before, "tokens_after": after}
    return BaselineResult(out, before, after, len(masked), _effective(len(masked), before, after, min_saving), record)


def units_of(messages: Sequence[dict], first: int) -> list[list[int]]:
    """Indices from ``first`` on, grouped so that an assistant's tool calls and their results stay together."""
    units: list[list[int]] = []
    for index in range(first, len(messages)):
        if messages[index].get("role") == "tool" and units and (
                has_tool_calls(messages[units[-1][0]])):
            units[-1].append(index)
        else:
            units.append([index])
    return units


def sliding_window(messages: list[dict], *, budget_tokens: int, estimate: Callable[[dict], int],
                   min_saving: float = 0.10) -> BaselineResult:
    """Drop the oldest non-system messages, whole tool groups at a time, until under ``budget_tokens``."""
    validate_messages(messages)
    if budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be positive, got {budget_tokens}")
    first = 0
    while first < len(messages) and messages[first].get("role") in ("system", "developer"):
        first += 1
    latest_user = last_real_user_index(messages)
    costs = [estimate(m) for m in messages]
    before = sum(costs)
    total = before
    dropped: set[int] = set()
    for unit in units_of(messages, first):
        if total <= budget_tokens:
            break
        if latest_user in unit:
            continue
        dropped.update(unit)
        total -= sum(costs[i] for i in unit)
    kept = [m for i, m in enumerate(messages) if i not in dropped]
    out, pairs = sanitize_tool_pairs(kept, missing="drop")
    after = sum(map(estimate, out))
    record = {"strategy": "sliding_window", "budget_tokens": budget_tokens, "dropped_indices": sorted(dropped),
              "over_budget": after > budget_tokens, "tool_pairs": pairs, "tokens_before": before,
              "tokens_after": after}
    return BaselineResult(out, before, after, len(dropped), _effective(len(dropped), before, after, min_saving),
                          record)
