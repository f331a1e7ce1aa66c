"""Token usage per API call, with the threshold, compressions, session boundaries and turns marked."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .store.lab import Lab


class ShownFigure(Figure):
    """A matplotlib Figure that a notebook renders as a picture whatever the backend (no ``%matplotlib`` needed).

    The figures here are made without pyplot, so no backend registers a display
    for them; ``_repr_png_`` hands IPython the picture itself.
    """

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        FigureCanvasAgg(self).print_png(buffer)
        return buffer.getvalue()


@dataclass
class UsageSource:
    """What to plot: a lab, the sessions of one lineage (oldest first), and the limits if known."""

    lab: Lab
    lineage: list[str]
    context_length: int | None = None
    threshold_tokens: int | None = None


def resolve_usage_source(session_or_lineage: Any, lab: Lab | str | Path | None = None) -> UsageSource:
    """Accept a session id, a list of session ids, a Lab (its latest session), or a live Runtime or chat.

    A Runtime (or anything holding one as ``runtime``, such as the notebook chat)
    brings its own lab, current session, window and compression threshold.
    """
    from .store import Lab
    from .store import open as open_lab

    live = getattr(session_or_lineage, "runtime", session_or_lineage)
    if hasattr(live, "agent") and hasattr(live, "lab_path"):
        if live.writer is not None:
            live.writer.flush()
        compactor = live.agent.compactor
        found = open_lab(live.lab_path)
        return UsageSource(found, found.lineage(live.agent.session.id) or [live.agent.session.id],
                           compactor.window if compactor else live.config.model.context_length,
                           compactor.budgets.threshold_tokens if compactor else None)
    if isinstance(session_or_lineage, Lab):
        return UsageSource(session_or_lineage, session_or_lineage.lineage(_latest_session(session_or_lineage)))
    found = open_lab(lab) if isinstance(lab, (str, Path)) or lab is None else lab
    if isinstance(session_or_lineage, str):
        lineage = found.lineage(session_or_lineage)
        if not lineage:
            raise ValueError(f"no session {session_or_lineage!r} in {found.path}")
        return UsageSource(found, lineage)
    if isinstance(session_or_lineage, Sequence) and session_or_lineage and all(
            isinstance(item, str) for item in session_or_lineage):
        return UsageSource(found, list(session_or_lineage))
    raise TypeError("plot_token_usage takes a session id, a list of session ids, a Lab, or a Runtime; "
                    f"got {type(session_or_lineage).__name__}")


def _latest_session(lab: Lab) -> str:
    sessions = lab.sessions()
    if sessions.empty:
        raise ValueError(f"the lab database {lab.path} holds no sessions yet")
    return str(sessions.sort_values("started_at").iloc[-1]["id"])


def token_usage_frame(lab: Lab, lineage: Sequence[str]) -> pd.DataFrame:
    """One row per successful API call across the sessions of ``lineage``, numbered in order."""
    frames = []
    for sid in lineage:
        calls = lab.api_calls(sid)
        if not calls.empty:
            turn_calls = calls["purpose"].fillna("turn") == "turn"  # the background review's calls are its own
            frames.append(calls[calls["error_class"].isna() & turn_calls].assign(session_id=sid))
    if not frames:
        return pd.DataFrame(columns=["call", "session_id", "turn", "prompt_tokens", "completion_tokens",
                                     "created_at"])
    usage = pd.concat(frames, ignore_index=True)
    usage = usage.sort_values(["created_at", "call_index"], kind="stable").reset_index(drop=True)
    usage["call"] = range(1, len(usage) + 1)
    return usage


def plot_token_usage(
    session_or_lineage: Any,
    *,
    lab: Lab | str | Path | None = None,
    context_length: int | None = None,
    threshold_tokens: int | None = None,
    title: str | None = None,
) -> Figure:
    """Prompt tokens per API call across a session's lineage; a pyplot-free matplotlib Figure.

    ``session_or_lineage`` is a session id (plotted with its ancestors), a list of
    session ids, a Lab (its latest session), or a Runtime / notebook chat (its
    current session). ``lab`` is where ids are looked up (default: the default
    lab, see ``hermeslab.home``). A dashed line marks the compression threshold
    (given, from the Runtime, or from the latest logged compression), triangles
    mark compressions, dotted verticals mark where a new session began, and
    alternate shading with numbers along the top marks which calls made up each turn.
    """
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    source = resolve_usage_source(session_or_lineage, lab)
    compressions = _compressions(source)
    threshold = threshold_tokens or source.threshold_tokens or _logged_threshold(compressions)
    window = context_length or source.context_length or _logged_window(source)
    usage = token_usage_frame(source.lab, source.lineage)
    fig = ShownFigure(figsize=(10.5, 4.4))
    ax = fig.subplots()
    ax.set_title(title or f"Token usage per API call · {source.lineage[-1]}")
    if usage.empty:
        ax.text(0.5, 0.5, "no API calls logged yet", ha="center", va="center", transform=ax.transAxes)
        return fig
    ax.plot(usage["call"], usage["prompt_tokens"], marker="o", ms=3, lw=1.5, label="prompt tokens")
    estimated = usage[usage["usage_estimated"].fillna(False).astype(bool)]
    if not estimated.empty:
        ax.scatter(estimated["call"], estimated["prompt_tokens"], s=40, facecolors="white", edgecolors="tab:blue",
                   zorder=4, label="estimated: the server reported no usage")
    ax.bar(usage["call"], usage["completion_tokens"], color="tab:orange", alpha=0.5, width=0.6,
           label="completion tokens")
    top = max(usage["prompt_tokens"].max(), threshold or 0) * 1.15
    if threshold:
        ax.axhline(threshold, color="tab:red", ls="--", lw=1, label=f"compression threshold ({threshold:,})")
    if window and window <= top * 1.5:
        ax.axhline(window, color="black", ls=":", lw=1, label=f"context window ({window:,})")
        top = max(top, window * 1.05)
    elif window:
        ax.plot([], [], " ", label=f"context window {window:,} (off scale)")
    _mark_turns(ax, usage)
    _mark_compressions(ax, compressions, usage)
    _mark_session_boundaries(ax, usage, top)
    ax.set_ylim(0, top)
    ax.set_xlim(0.5, usage["call"].iloc[-1] + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.set_xlabel("API call")
    ax.set_ylabel("tokens")
    ax.grid(alpha=0.3)
    # Beside the axes, not over them: inside, it hid the first calls of every session it was drawn on.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8)
    fig.tight_layout()
    return fig


def _compressions(source: UsageSource) -> pd.DataFrame:
    frames = [frame for sid in source.lineage if not (frame := source.lab.compressions(sid)).empty]
    return pd.concat(frames, ignore_index=True).sort_values("created_at") if frames else pd.DataFrame()


def _logged_threshold(compressions: pd.DataFrame) -> int | None:
    """The threshold the latest logged compression worked with (its budgets are in ``details``)."""
    for details in reversed(list(compressions.get("details", []))):
        record = json.loads(details) if isinstance(details, str) else (details or {})
        threshold = (record.get("budgets") or {}).get("threshold_tokens")
        if threshold:
            return int(threshold)
    return None


def _logged_window(source: UsageSource) -> int | None:
    rows = source.lab.sql("SELECT context_length FROM sessions WHERE id = ?", [source.lineage[-1]])
    value = rows["context_length"].iloc[0] if not rows.empty else None
    return int(value) if value is not None and not pd.isna(value) else None


def _mark_compressions(ax: Axes, compressions: pd.DataFrame, usage: pd.DataFrame) -> None:
    """A triangle between the calls before and after each compression, at the prompt it compressed.

    The height is the prompt the compression was given, in the unit of the logged prompts
    (``prompt_tokens_before``): a compression before a call compresses that call's prompt, which
    has grown past the previous call's by what came back since. Rows logged without it fall back
    to the last prompt before (the compressor's own count leaves out the tool schemas, so it would
    sit below the line it belongs to).
    """
    for number, row in enumerate(compressions.itertuples(index=False)):
        earlier, later = usage[usage["created_at"] < row.created_at], usage[usage["created_at"] >= row.created_at]
        x = later["call"].iloc[0] - 0.5 if not later.empty else usage["call"].iloc[-1] + 0.5
        compressed = getattr(row, "prompt_tokens_before", None)
        if compressed is not None and not pd.isna(compressed):
            y = compressed
        else:
            y = earlier["prompt_tokens"].iloc[-1] if not earlier.empty else row.tokens_before
        ax.scatter([x], [y], marker="v", s=60, color="tab:purple", zorder=5,
                   label="compression" if number == 0 else None)


def _mark_session_boundaries(ax: Axes, usage: pd.DataFrame, top: float) -> None:
    """A dotted vertical where the calls move to a new session, labelled with its id's suffix."""
    changes = usage[usage["session_id"] != usage["session_id"].shift()].iloc[1:]
    for number, row in enumerate(changes.itertuples(index=False)):
        ax.axvline(row.call - 0.5, color="grey", ls=":", lw=1, label="new session" if number == 0 else None)
        ax.text(row.call - 0.4, top * 0.97, f"…{str(row.session_id)[-6:]}", fontsize=7, color="grey",
                va="top", rotation=90)



def turn_spans(usage: pd.DataFrame) -> list[tuple[int, int, int]]:
    """``(turn, first call, last call)`` for each run of consecutive calls of one turn.

    A turn that a compression moved to a child session stays one span: the
    child goes on with the same turn number.
    """
    starts = usage["turn"] != usage["turn"].shift()
    groups = usage.groupby(starts.cumsum(), sort=True)
    return [(int(group["turn"].iloc[0]), int(group["call"].iloc[0]), int(group["call"].iloc[-1]))
            for _, group in groups]


def _mark_turns(ax: Axes, usage: pd.DataFrame, most_labels: int = 25) -> None:
    """Shade every other turn and number the turns along the top axis (every n-th one when there are many)."""
    spans = turn_spans(usage)
    for index, (_, first, last) in enumerate(spans):
        if index % 2:
            ax.axvspan(first - 0.5, last + 0.5, color="0.92", zorder=0, lw=0)
    step = max(1, -(-len(spans) // most_labels))
    shown = spans[::step]
    top = ax.secondary_xaxis("top")
    top.set_xticks([(first + last) / 2 for _, first, last in shown], [str(turn) for turn, _, _ in shown])
    top.tick_params(labelsize=7, length=0)
    top.set_xlabel("turn (shaded bands alternate)", fontsize=8)
