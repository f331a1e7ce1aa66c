"""Recordings from other agents' logs: one module per source format, detection, and importing folders.

Every importer answers with `Recording`s in the recorded-session format, so an
imported conversation can be replayed and compared like the shared datasets.
``base`` says what a format module provides; ``detect`` tells formats apart;
``gather`` walks files and folders and accounts for every skip; ``transcript``
turns another agent's events into the format's messages. The formats:

* ``openai`` — OpenAI chat JSONL;
* ``hermes_state`` — a Hermes ``state.db`` of 0.19 or later, compactions and review turns undone;
* ``lab`` — hermeslab's own lab;
* ``minisweagent`` — mini-swe-agent ``.traj.json`` trajectories;
* ``sweagent`` — SWE-agent ``.traj`` trajectories;
* ``claude_code`` — Claude Code session logs, compactions and abandoned branches left out;
* ``codex`` — Codex CLI rollouts, compactions left out;
* ``openhands`` — OpenHands trajectories, event folders and evaluation output, condensations left out;
* ``openhands_sdk`` — OpenHands 1.x (SDK) conversation event folders, condensations left out;
* ``inspect_eval`` — Inspect AI evaluation logs, read with inspect-ai's own reader (an optional extra).
"""

from .base import ImportOptions, Sample, Skip, SourceFormat
from .detect import FORMATS, detect, format_named, sample_of
from .gather import ImportReport, Taken, import_paths
from .hermes_state import HermesTranscript, hermes_chains, import_hermes_state
from .openai import import_openai_jsonl

__all__ = [
    "FORMATS",
    "HermesTranscript",
    "ImportOptions",
    "ImportReport",
    "Sample",
    "Skip",
    "SourceFormat",
    "Taken",
    "detect",
    "format_named",
    "hermes_chains",
    "import_hermes_state",
    "import_openai_jsonl",
    "import_paths",
    "sample_of",
]
