"""hermeslab's side of the OpenHands comparison: a recording stepped through a preset's driver.

The recording is replayed as hermeslab's agent meets it: before each recorded
assistant reply the ``ContextDriver`` is asked, once, what to do before the
call (``before_call``), and a compaction that changed the context replaces the
history. The window is set so large that only the event count can trigger, as
the OpenHands side runs its condensers without a model whose token limit could.
Each step is recorded in the worker's format (``worker/oh_sdk_steps``): the
condensations made before the reply (forgotten event keys, the summary's
offset, whether there is a summary) and the keys of the events sent.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.driver import ContextDriver
from hermeslab.context.openhands_condensers import MASK
from hermeslab.context.openhands_view import ACTION, OBSERVATION, events_of
from hermeslab.context.types import SummaryOutcome, SummaryRequest
from hermeslab.core.config import Config
from hermeslab.policies.loading import with_overrides
from hermeslab.policies.running import make_compactor

#: A window no recording reaches, so tokens never trigger a compression.
UNREACHABLE_WINDOW = 1_000_000_000
KEY = "_openhands_key"


class FixedSummariser:
    """Answers every summary request with the same text: the comparison is about decisions."""

    def summarise(self, request: SummaryRequest) -> SummaryOutcome:
        return SummaryOutcome(body="stub summary of the forgotten events")


def preset_config(preset: str, overrides: dict[str, Any] | None = None) -> Config:
    """Preset ``preset`` with ``overrides`` (dotted keys), on a window tokens cannot fill."""
    return with_overrides(Config(), {"compression.preset": preset, **(overrides or {}),
                                     "model.context_length": UNREACHABLE_WINDOW, "model.max_tokens": 1024})


def tagged(messages: list[dict]) -> tuple[list[dict], dict[tuple[str, str], str]]:
    """Copies of ``messages`` carrying their keys, and the key of every tool call and result by
    (event kind, call id): a held event keeps its key without its message."""
    out, calls = [], {}
    for index, message in enumerate(messages):
        out.append({**message, KEY: f"m{index}"})
        for number, call in enumerate(message.get("tool_calls") or []):
            calls[(ACTION, str(call.get("id")))] = f"m{index}.{number}"
        if message.get("role") == "tool":
            calls[(OBSERVATION, str(message.get("tool_call_id") or ""))] = f"m{index}"
    return out, calls


def keys_of(history: list[dict], calls: dict[tuple[str, str], str]) -> list[str]:
    """The keys of OpenHands' view of ``history``, held events included (what a cut's positions index)."""
    keys = []
    for event in events_of(history):
        message = history[event.message]
        keys.append(calls[(event.kind, str(event.call_id))] if event.kind == ACTION or event.held
                    else str(message.get(KEY)))
    return keys


def sent_keys(history: list[dict], calls: dict[tuple[str, str], str]) -> list[str]:
    """The keys of what ``history`` sends, in order, a tool result hermeslab masked marked ``!masked``."""
    keys = []
    for message in history:
        if message.get("tool_calls"):
            keys += [calls[(ACTION, str(call.get("id")))] for call in message["tool_calls"]]
        else:
            masked = message.get("role") == "tool" and message.get("content") == MASK
            keys.append(str(message.get(KEY)) + ("!masked" if masked else ""))
    return keys


def replay(messages: list[dict], config: Config) -> list[dict]:
    """One record per recorded assistant reply, as ``hermeslab.reference.openhands.worker`` records them."""
    recording, calls = tagged(messages)
    driver = ContextDriver(make_compactor(config, FixedSummariser()), context_length=config.model.context_length)
    history: list[dict] = []
    steps, made = [], 0
    for index, message in enumerate(recording):
        if message.get("role") == "assistant":
            condensations = []
            compaction = driver.before_call(history, None, first=not steps)
            record = (getattr(compaction.result, "record", None) or {}) if compaction else {}
            if compaction is not None and compaction.changed and "forget_start" in record:
                before = keys_of(history, calls)
                condensations.append({"forgotten": before[record["forget_start"]:record["forget_end"]],
                                      "offset": record["forget_start"] if record["strategy"].endswith("summarizing")
                                      else None,
                                      "summary": record["strategy"].endswith("summarizing")})
            if compaction is not None and compaction.changed:
                history = compaction.messages
                for item in history:
                    if item.get("_compressed_summary") and KEY not in item:
                        item[KEY] = f"c{made}-summary"
                made += len(condensations)
            steps.append({"at": index, "condensations": condensations, "view": sent_keys(history, calls)})
            driver.observe(0, None)
        history = history + [message]
    return steps
