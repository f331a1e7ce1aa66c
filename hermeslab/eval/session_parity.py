"""Whole-session parity with Hermes 0.19.0: the same compressions at the same calls, the same prompt totals.

``planned_session`` turns a recording into what the Hermes worker's agent
replay needs (``HermesReference.agent_replay_many``): the turns exactly as
hermeslab's replay plans them, each recorded reply as hermeslab's loop puts it
into history, the tool schemas the loop sends and every recorded result. So
both sides make the same calls, and any difference is a decision.

``hermeslab_session`` replays the same recording through hermeslab
(``replay(..., fast=True)``) and reduces both runs to one shape:
``compressions`` as ``(call, trigger, output messages without the system
message)`` for every attempt that reached the compression pipeline, and the
billed prompt total. ``compare`` says whether two such runs are the same
session and where they first differ, and names the first compression one side
applied and the other did not (the usual cause of a later difference).
"""

from __future__ import annotations

from typing import Any, Mapping

from hermeslab.core.config import Config
from hermeslab.core.messages import strip_surrogates
from hermeslab.core.tokens import encoding_for_model
from hermeslab.recovery.repair import history_copy
from hermeslab.recordings import Recording

from .replay import replay
from .replay_compression import FixedSummariser
from .replay_plan import RecordedTools, planned_recording


def planned_session(recording: Recording | Mapping[str, Any]) -> dict:
    """The worker's input for one recording (see the module docstring)."""
    recording, plan = planned_recording(recording)
    replies = [message for message in recording.messages if message.get("role") == "assistant"]
    turns = []
    for turn in plan.turns:
        served = []
        for message in replies[turn.first_reply:turn.first_reply + turn.replies]:
            reply: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                reply["tool_calls"] = message["tool_calls"]
            served.append(history_copy(reply))
        turns.append({"users": [strip_surrogates(text) for text in turn.users], "replies": served,
                      "stop_after": turn.stop_after})
    return {"id": recording.id, "system_prompt": plan.system_prompt,
            "tools": RecordedTools(plan, recording.tools).schemas() or None,
            "turns": turns, "results": dict(plan.results)}


def session_encoding(recording: Recording | Mapping[str, Any]) -> str:
    """The encoding both sides bill this recording's prompts in (the recorded model's)."""
    model = recording.model if isinstance(recording, Recording) else recording.get("model")
    return encoding_for_model(model)


def hermeslab_session(recording: Recording | Mapping[str, Any], config: Config) -> dict:
    """hermeslab's replay of ``recording`` under ``config``, in the shape the worker reports."""
    run = replay(recording, config, summariser=FixedSummariser(), fast=True)
    compressions = []
    for record in run.compressions:
        out = [m for m in record.after if m.get("role") != "system"]
        compressions.append({"call": record.call, "trigger": record.trigger, "output_len": len(out),
                             "changed": record.changed})
    return {"id": run.recording_id, "calls": [{"prompt_tokens": c.prompt_tokens} for c in run.calls],
            "compressions": compressions, "refusals": len(run.refusals), "statuses": list(run.statuses),
            "prompt_tokens_total": sum(c.prompt_tokens for c in run.calls)}


def shape(run: dict) -> list[tuple[int, str, int]]:
    """The sequence a session is compared on: (call index, trigger, output messages) per compression."""
    return [(c["call"], c["trigger"], c["output_len"]) for c in run["compressions"]]


def compare(ours: dict, hermes: dict) -> dict:
    """Whether two runs of one session are identical, the first difference, and the prompt-total gap."""
    mine, theirs = shape(ours), shape(hermes)
    first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), None)
    if first is None and len(mine) != len(theirs):
        first = min(len(mine), len(theirs))
    applied = next((i for i, (a, b) in enumerate(zip(ours["compressions"], hermes["compressions"]))
                    if a["changed"] != b["changed"]), None)
    total, reference = ours["prompt_tokens_total"], hermes["prompt_tokens_total"]
    diff = (total - reference) / reference * 100 if reference else 0.0
    return {"identical": mine == theirs, "first_difference": None if first is None else {
        "index": first, "hermeslab": mine[first] if first < len(mine) else None,
        "hermes": theirs[first] if first < len(theirs) else None,
        "applied_differs_at": applied if applied is not None and applied <= first else None},
        "prompt_tokens_hermeslab": total, "prompt_tokens_hermes": reference, "total_diff_pct": diff,
        "calls_hermeslab": len(ours["calls"]), "calls_hermes": len(hermes["calls"])}
