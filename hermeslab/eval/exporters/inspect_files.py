"""Writing Inspect AI logs into a folder whole or not at all, with inspect-ai's own writer.

Each log is written by ``inspect_ai.log.write_eval_log`` under a hidden
temporary name in the target folder (which ``inspect view`` does not list),
and only when every log of the batch has been written are they renamed to
their Inspect names; a failure removes the temporary files and leaves the
folder as it was. The folder must exist already: a mistyped path must not
make folders (``notebook.export.export_target``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hermeslab.notebook.export import export_target

from .inspect_log import log_file_name, require_inspect

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog


def log_folder(folder: str | Path) -> Path:
    """The existing folder ``folder`` names, checked before any work (and inspect-ai with it)."""
    require_inspect()
    base = Path(folder).expanduser()
    if not base.is_dir():
        raise ValueError(f"no folder {base} to write Inspect logs in; create it first or give another folder")
    return base


def write_logs(logs: Sequence[EvalLog], folder: str | Path) -> list[Path]:
    """Write ``logs`` into the existing ``folder`` under Inspect's names; the paths written, in order."""
    from inspect_ai.log import write_eval_log

    base = log_folder(folder)
    targets = [export_target(base / log_file_name(log), "eval") for log in logs]
    if len(set(targets)) < len(targets):
        raise ValueError("two logs of this export would have the same file name")
    temporaries = [target.with_name(f".{target.name}.{secrets.token_hex(4)}.part") for target in targets]
    try:
        for log, temporary in zip(logs, temporaries):
            write_eval_log(log, str(temporary), format="eval")
        for temporary, target in zip(temporaries, targets):
            os.replace(temporary, target)
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
    return targets
