"""The recordings the parity benchmarks replay: every ``*.jsonl`` of a folder, and the project's own sessions.

The folder is the shared datasets (``../shared/datasets`` beside the
checkout) unless a benchmark is told another; the project's own recordings
are added whenever they are present.
"""

from __future__ import annotations

import json
from pathlib import Path

from _record import ROOT

#: The shared recordings: ``../shared/datasets`` beside the checkout.
SHARED = ROOT.parent / "shared" / "datasets"
OWN = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"


def load(path: Path, limit: int | None) -> list[dict]:
    """The sessions of one recorded-session file, the first ``limit`` of them when given."""
    with path.open(encoding="utf-8") as handle:
        sessions = [json.loads(line) for line in handle if line.strip()]
    return sessions[:limit] if limit else sessions


def recordings_by_file(datasets: Path, limit: int | None) -> dict[str, list[dict]]:
    """Every ``*.jsonl`` in ``datasets``, then the project's own, by file name; empty when there are none."""
    files = sorted(datasets.glob("*.jsonl")) + ([OWN] if OWN.exists() else [])
    return {path.name: load(path, limit) for path in files}
