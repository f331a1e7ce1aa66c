"""When no summary can fit: the summarised range leaves the context whole, and is counted.

A window too small for any useful summary (or a summary that would not shrink
the context) leaves two choices: refuse the compression, so the prompt stays
over the threshold and every later call fails, or let the oldest turns go.
The second keeps the conversation usable; it is logged as ``dropped_oldest``
with the input indices that went, so nothing leaves the context untraced.
"""

from __future__ import annotations

from hermeslab.core.config import CompressionConfig

from .assemble import sanitize_tool_pairs, user_content_present
from .boundary import Boundary
from .types import is_summary_message

#: Stands between two user messages the drop would otherwise leave side by side.
DROPPED_NOTE = "[earlier messages were dropped here to fit the context window]"


def _joined(parts: list[list[dict]]) -> list[dict]:
    """The parts in order, with a short assistant note wherever a join puts two user messages together."""
    out: list[dict] = []
    for part in parts:
        if part and out and out[-1].get("role") == part[0].get("role") == "user":
            out.append({"role": "assistant", "content": DROPPED_NOTE, "_synthetic": True})
        out.extend(part)
    return out


def drop_range(pruned: list[dict], boundary: Boundary, latest: tuple[int, dict] | None, *,
               cfg: CompressionConfig, keep: int | None = None) -> tuple[list[dict], dict]:
    """``pruned`` without ``[boundary.start, boundary.end)``, and the record of what went.

    ``keep`` is an earlier summary inside the range that stays (it already holds
    the older turns, and fits). The latest real request (its index and message)
    stays too: when it was in the range it takes the range's place. Tool pairs
    are repaired as after any assembly.
    """
    head, tail = pruned[:boundary.start], pruned[boundary.end:]
    if keep is not None:
        head = head + [pruned[keep]]
    out = head + tail
    reinserted = latest is not None and not user_content_present(out, latest[1])
    middle = []
    if reinserted:
        middle = [{key: value for key, value in latest[1].items() if key != "_compressed_summary"}]
    out = _joined([head, middle, tail])
    out, pairs = sanitize_tool_pairs(out, missing=cfg.missing_results)
    kept = {keep}
    if reinserted and latest is not None and not is_summary_message(pruned[latest[0]]):
        kept.add(latest[0])
    dropped = [index for index in range(boundary.start, boundary.end) if index not in kept]
    return out, {"dropped_indices": dropped, "latest_user_reinserted": reinserted, "tool_pairs": pairs}
