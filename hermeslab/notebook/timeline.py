"""The compaction timeline in a notebook: ``show_timeline(lab_or_replay_run, session=...)``.

Each applied compaction of a conversation is a block: the context before, one
line per message marked kept, pruned (cut down in place), summarised or
dropped; the context after, with the summary and anything added marked; and
the summary text. Counters over the conversation head it. The view is static
HTML, so it is saved with the notebook and survives a kernel restart.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from ..store import Lab
from .timeline_data import ADDED, SUMMARY, CompactionView, Counters, MessageLine, Timeline
from .timeline_sources import lab_timeline, replay_timeline

#: Background of each fate's badge.
FATE_COLOURS = {"kept": "#e8f5e9", "pruned": "#fff3e0", "summarised": "#e3f2fd", "dropped": "#ffebee",
                SUMMARY: "#bbdefb", ADDED: "#f3e5f5"}


class TimelineView:
    """What ``show_timeline`` returns: shown as HTML by Jupyter; ``timeline`` holds the data."""

    def __init__(self, timeline: Timeline):
        self.timeline = timeline

    def _repr_html_(self) -> str:
        return timeline_html(self.timeline)

    def __repr__(self) -> str:
        return timeline_line(self.timeline)


def show_timeline(source: Lab | str | Path | Any, session: str | None = None) -> TimelineView:
    """The compaction timeline of one conversation in a lab (``session`` required) or of a replay run.

    ``source``: a ``Lab``, a lab file path, or a replay run (``hermeslab.eval.replay.replay``'s result; an
    A/B cell's compactions are those of ``replay(recording, config, fast=True)``, the replay the cell ran).
    Raises ValueError, in one line, for a session the lab does not hold.
    """
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if not path.is_file():
            raise ValueError(f"no lab file at {path}")
        source = Lab(path)
    if isinstance(source, Lab):
        if session is None:
            raise ValueError("name the session: show_timeline(lab, session='...') (ids are in lab.sessions())")
        return TimelineView(lab_timeline(source, session))
    if session is not None:
        raise ValueError("a replay run holds one conversation; leave session out")
    return TimelineView(replay_timeline(source))


def counters_text(counters: Counters) -> str:
    return (f"{_count(counters.compactions, 'compaction')} · {counters.tokens_reclaimed:,} tokens reclaimed · "
            f"{_count(counters.tool_outputs_pruned, 'tool output')} pruned · "
            f"{_count(counters.messages_summarised, 'message')} summarised · {counters.messages_dropped} dropped")


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def timeline_line(timeline: Timeline) -> str:
    """The timeline in one line (what a session without compactions shows)."""
    if not timeline.compactions:
        tried = f" ({_count(timeline.not_applied, 'attempt')} that changed nothing)" if timeline.not_applied else ""
        return f"session {timeline.session_id}: no compactions{tried}"
    return f"session {timeline.session_id}: {counters_text(timeline.counters())}"


def timeline_html(timeline: Timeline) -> str:
    head = f'<div class="hermeslab-timeline-counters" style="font-weight:600">{escape(timeline_line(timeline))}</div>'
    if not timeline.compactions:
        return f'<div class="hermeslab-timeline hermeslab-timeline-empty">{head}</div>'
    parts = [head]
    if len(timeline.sessions) > 1:
        rows = "".join(f"<tr><td><code>{escape(session)}</code></td><td>{escape(counters_text(counters))}</td></tr>"
                       for session, counters in timeline.by_session().items())
        parts.append(f'<table class="hermeslab-timeline-sessions" style="font-size:12px">{rows}</table>')
    if timeline.not_applied:
        parts.append(f"<div style='color:#666'>{_count(timeline.not_applied, 'attempt')} that changed nothing "
                     "not shown</div>")
    parts += [_compaction_html(view) for view in timeline.compactions]
    return f'<div class="hermeslab-timeline" style="font-size:13px;line-height:1.35">{"".join(parts)}</div>'


def _compaction_html(view: CompactionView) -> str:
    title = (f"#{view.number} · {'turn ' + str(view.turn) + ' · ' if view.turn is not None else ''}{view.trigger}"
             f" · {view.strategy} · {view.mode} · {view.tokens_before:,} → {view.tokens_after:,} tokens"
             f" (−{view.reclaimed:,})")
    if view.fates_known:
        columns = (f'<div style="display:grid;grid-template-columns:1fr 1fr;gap:12px">'
                   f"{_column('before', view.before)}{_column('after', view.after)}</div>")
    else:
        columns = ("<div>what became of each message was not recorded (a lab written by an older hermeslab); "
                   "only the figures above are known</div>")
    summary = ""
    if view.summary_text:
        summary = ('<div style="margin-top:6px"><b>summary</b><div class="hermeslab-timeline-summary" '
                   'style="white-space:pre-wrap;border-left:3px solid #90caf9;padding:4px 8px;max-height:12em;'
                   f'overflow:auto;background:#f7fbff">{escape(view.summary_text)}</div></div>')
    return (f'<details class="hermeslab-timeline-compaction" open style="margin:8px 0;padding:6px;'
            f'border:1px solid #ddd;border-radius:4px"><summary style="font-weight:600">{escape(title)}</summary>'
            f"{columns}{summary}</details>")


def _column(name: str, lines: tuple[MessageLine, ...]) -> str:
    total = sum(line.tokens for line in lines)
    rows = "".join(_line_html(line) for line in lines)
    return (f'<div class="hermeslab-timeline-{name}"><div><b>{name}</b> · {len(lines)} messages · {total:,} tokens'
            f'</div><table style="border-collapse:collapse;width:100%;table-layout:fixed;margin:0">'
            f'<colgroup><col style="width:7.5em"><col style="width:5.5em"><col><col style="width:4em"></colgroup>'
            f"{rows}</table></div>")


#: One line per message, whatever the notebook's own table style: left-aligned, cut with an ellipsis.
_CELL = "padding:1px 4px;text-align:left;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;background:none"


def _line_html(line: MessageLine) -> str:
    colour = FATE_COLOURS.get(line.fate, "#eee")
    return (f'<tr class="hermeslab-fate-{escape(line.fate)}" style="background:none">'
            f'<td style="{_CELL}"><span style="background:{colour};padding:0 4px;border-radius:3px">'
            f'{escape(line.fate)}</span></td><td style="{_CELL};color:#555">{escape(line.role)}</td>'
            f'<td style="{_CELL}" title="{escape(line.preview)}">{escape(line.preview)}</td>'
            f'<td style="{_CELL};text-align:right;color:#555">{line.tokens:,}</td></tr>')
