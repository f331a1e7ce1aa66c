"""Inspect AI evaluation logs (``.eval``, or the older ``.json``): one conversation per sample and epoch.

The log is read with the inspect-ai package's own reader, sample by sample,
so a large log is never held whole and the format stays Inspect's to define;
the package is an optional extra (``pip install 'hermeslab[inspect]'``) and a
log read without it is skipped with that advice. A sample's ``messages`` are
its conversation. Reasoning parts are the model's private notes and images
are not text: both are left out of the content. The tools the model was
offered come from the sample's first model event.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermeslab.recordings import Recording

from .base import ImportOptions, Sample, Skip, SourceFormat
from .transcript import Transcript, finished

ZIP_MAGIC = b"PK\x03\x04"
#: Members every ``.eval`` archive holds.
EVAL_MEMBERS = ("header.json", "_journal/start.json")
MISSING = "reading Inspect logs needs the inspect-ai package: pip install 'hermeslab[inspect]'"


def _recognises(sample: Sample) -> bool:
    if sample.head.startswith(ZIP_MAGIC):
        try:
            with zipfile.ZipFile(sample.path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError):
            return False
        return any(member in names for member in EVAL_MEMBERS)
    document = sample.document
    return isinstance(document, dict) and isinstance(document.get("eval"), dict) and "version" in document


def _read(path: Path, options: ImportOptions) -> Iterator[Recording | Skip]:
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        yield Skip(str(path), MISSING)
        return
    try:
        header = read_eval_log(str(path), header_only=True)
        samples = read_eval_log_samples(str(path), all_samples_required=False)
        for sample in samples:
            yield sample_recording(sample, header.eval, path)
    except Exception as exc:  # noqa: BLE001 - the reader's errors are its own; each becomes one line
        yield Skip(str(path), f"inspect-ai could not read this log: {type(exc).__name__}: {exc}".splitlines()[0])


def sample_recording(sample: Any, spec: Any, path: Path) -> Recording | Skip:
    """The conversation of one Inspect sample (an ``EvalSample``) of the eval ``spec``."""
    transcript = Transcript()
    for message in sample.messages:
        if message.role == "tool":
            transcript.answer(str(message.tool_call_id or ""), _text(message.content))
            continue
        transcript.say(message.role, _text(message.content))
        for call in getattr(message, "tool_calls", None) or []:
            transcript.call(str(call.id), str(call.function), call.arguments)
    tools = None
    first_call = next((event for event in sample.events if event.event == "model"), None)
    if first_call is not None and first_call.tools:
        tools = [{"type": "function", "function": {"name": info.name, "description": info.description,
                                                    "parameters": info.parameters.model_dump(exclude_none=True)}}
                 for info in first_call.tools]
    output_model = getattr(sample.output, "model", None) if sample.output is not None else None
    name = f"inspect/{spec.task}/{spec.task_id}/{sample.id}/{sample.epoch}"
    return finished(Recording(
        id=name, messages=transcript.messages, tools=tools, model=output_model or spec.model,
        source=f"Inspect {path}", meta={"importer": "inspect", "task": spec.task, "run_id": spec.run_id,
                                        "sample_id": sample.id, "epoch": sample.epoch}),
        f"{path}: sample {sample.id} epoch {sample.epoch}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if getattr(part, "type", None) == "text")


FORMAT = SourceFormat("inspect", "an Inspect AI evaluation log (.eval, or .json)", _recognises, _read)
