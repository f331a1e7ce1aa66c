"""Token usage per API call, with thresholds, compressions and session boundaries marked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from .store.lab import Lab


def _resolve_lab(lab: "Lab | str | Path") -> "Lab":
    from .store import open as open_lab

    return open_lab(lab) if isinstance(lab, (str, Path)) else lab


def token_usage_frame(lab: "Lab | str | Path", session_id: str | None = None) -> pd.DataFrame:
    """One row per successful API call across the session's lineage, numbered in order."""
    lab = _resolve_lab(lab)
    if session_id is None:
        sessions = lab.sessions()
        if sessions.empty:
            raise ValueError("the lab database holds no sessions yet")
        session_id = str(sessions.sort_values("started_at").iloc[-1]["id"])
    chain = list(lab.lineage(session_id))
    frames = []
    for sid in chain:
        calls = lab.api_calls(sid)
        if not calls.empty:
            frames.append(calls[calls["error_class"].isna()].assign(session_id=sid))
    if not frames:
        return pd.DataFrame(columns=["call", "session_id", "turn", "prompt_tokens", "completion_tokens"])
    usage = pd.concat(frames, ignore_index=True)
    usage = usage.sort_values(["created_at", "call_index"], kind="stable").reset_index(drop=True)
    usage["call"] = range(1, len(usage) + 1)
    return usage


def plot_token_usage(
    lab: "Lab | str | Path",
    session_id: str | None = None,
    *,
    context_length: int | None = None,
    threshold_tokens: int | None = None,
    title: str | None = None,
) -> "Figure":
    """Prompt tokens per API call for a session and its ancestors.

    Returns a pyplot-free Figure (no global state; Jupyter displays it, ``savefig`` writes it).

    Dashed lines mark the compression threshold and the context window; triangles
    mark compressions (placed at the first call after them); dotted verticals mark
    where a compression rotated into a new session.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    lab = _resolve_lab(lab)
    usage = token_usage_frame(lab, session_id)
    fig = Figure(figsize=(9, 4.2))
    ax = fig.subplots()
    if usage.empty:
        ax.text(0.5, 0.5, "no API calls logged yet", ha="center", va="center", transform=ax.transAxes)
        return fig
    ax.plot(usage["call"], usage["prompt_tokens"], marker="o", ms=3, lw=1.5, label="prompt tokens")
    ax.bar(usage["call"], usage["completion_tokens"], color="tab:orange", alpha=0.5, width=0.6,
           label="completion tokens")
    if threshold_tokens:
        ax.axhline(threshold_tokens, color="tab:red", ls="--", lw=1, label=f"compression threshold ({threshold_tokens:,})")
    top = max(usage["prompt_tokens"].max(), threshold_tokens or 0) * 1.15
    if context_length and context_length <= top * 1.5:
        ax.axhline(context_length, color="black", ls=":", lw=1, label=f"context window ({context_length:,})")
        top = max(top, context_length * 1.05)
    elif context_length:
        ax.plot([], [], " ", label=f"context window {context_length:,} (off scale)")
    _mark_compressions(ax, lab, usage)
    _mark_session_boundaries(ax, usage)
    ax.set_ylim(0, top)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.set_xlabel("API call")
    ax.set_ylabel("tokens")
    ax.set_title(title or f"Token usage per API call · {usage['session_id'].iloc[-1]}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def _mark_compressions(ax, lab: "Lab", usage: pd.DataFrame) -> None:
    first = True
    for sid in usage["session_id"].unique():
        compressions = lab.compressions(sid)
        for _, row in compressions.iterrows():
            later = usage[usage["created_at"] >= row["created_at"]]
            x = later["call"].iloc[0] - 0.5 if not later.empty else usage["call"].iloc[-1] + 0.5
            ax.scatter([x], [row["tokens_before"]], marker="v", color="tab:purple", zorder=5,
                       label="compression" if first else None)
            first = False


def _mark_session_boundaries(ax, usage: pd.DataFrame) -> None:
    changes = usage[usage["session_id"] != usage["session_id"].shift()]
    for x in changes["call"].iloc[1:]:
        ax.axvline(x - 0.5, color="grey", ls=":", lw=1)

