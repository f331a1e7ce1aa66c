"""From one probe of an exam back to the transcript: the span its gold came from and what the compaction left.

An exam row names a probe by recording, config, window, compaction and id;
the replay is deterministic, so replaying that recording under that config
at that window gives the same compaction and the same bank. ``trace`` does
so and returns the probe, the message its gold was cut from (with the span
marked), and the handoff summaries of the compacted context: what the model
was given in place of the removed messages.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hermeslab.context.types import is_summary_message
from hermeslab.core.config import Config
from hermeslab.core.messages import text_of
from hermeslab.policies.loading import load_config
from hermeslab.recordings import Recording

from ..metrics import message_text
from ..replay import replay
from .bank import Probe, bank_of
from .context import effective_compactions

#: Characters of the source message shown on each side of the gold.
AROUND = 300


@dataclass(frozen=True)
class Trace:
    """Where one probe's gold came from and what replaced it."""

    probe: Probe
    #: Role of the message the gold was cut from.
    source_role: str
    #: That message's text around the gold, the gold between ``⟦`` and ``⟧``.
    source_excerpt: str
    #: The handoff summaries of the compacted context (empty when the policy kept none).
    summaries: tuple[str, ...]
    #: Messages the compaction removed, and the context's size after it (tokens in ``token_unit``).
    removed_messages: int
    retained_tokens: int
    token_unit: str

    def gold_in_summary(self) -> bool:
        """Whether any summary holds one of the gold's answers verbatim."""
        return any(gold in summary for gold in self.probe.golds for summary in self.summaries)


def trace(recording: Recording, config: Config | str, window: int, compaction: int, probe_id: str, *,
          counter: str | None = None) -> Trace:
    """Replay ``recording`` under ``config`` at ``window`` and trace probe ``probe_id`` of its ``compaction``-th
    effective compaction (see the module docstring); ``counter`` as the exam was run with."""
    config = config if isinstance(config, Config) else load_config(config)
    sized = dataclasses.replace(config, model=dataclasses.replace(config.model, context_length=window))
    run = replay(recording, sized, counter=counter, fast=True)
    compactions = effective_compactions(run)
    if not 0 <= compaction < len(compactions):
        raise ValueError(f"{recording.id} has {len(compactions)} effective compaction(s) under this config at "
                         f"{window:,} tokens; there is no compaction {compaction}")
    found = compactions[compaction]
    probe = next((p for p in bank_of(recording.id, found) if p.probe_id == probe_id), None)
    if probe is None:
        raise ValueError(f"no probe {probe_id!r} at compaction {compaction} of {recording.id}")
    source: dict[str, Any] = found.before[probe.source_message]
    text = message_text(source)
    start, end = probe.source_span
    excerpt = (("…" if start > AROUND else "") + text[max(0, start - AROUND):start] + "⟦" + text[start:end] + "⟧"
               + text[end:end + AROUND] + ("…" if end + AROUND < len(text) else ""))
    summaries = tuple(text_of(m) for m in found.compacted if is_summary_message(m))
    return Trace(probe, str(source.get("role")), excerpt, summaries, len(found.removed), found.retained_tokens,
                 run.counter.encoding)
