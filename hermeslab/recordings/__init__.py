"""Recorded sessions: the shared datasets' JSONL format, and building one from the lab.

* ``format`` — `Recording`, its validation and its one JSONL line;
* ``lab`` — `import_lab`: a lab conversation as a recording (it loads DuckDB and
  pandas, so it is not imported here).

Both sit below the notebook and eval, which export and replay recordings;
reading and writing whole dataset files, and importing other agents' logs
(``hermeslab.eval.importers``), belong to ``hermeslab.eval``.
"""

from hermeslab.recordings.format import (
    Recording,
    RecordingError,
    RecordingProblem,
    json_kind,
    recorded_call,
    recorded_text,
    recording_line,
    validate_recording,
)

__all__ = [
    "Recording",
    "RecordingError",
    "RecordingProblem",
    "json_kind",
    "recorded_call",
    "recorded_text",
    "recording_line",
    "validate_recording",
]
