"""Whole-session parity with Hermes 0.19.0: the same compressions at the same calls, the same prompt totals.

``planned_session`` turns a recording into what the Hermes worker's agent
replay needs (``HermesReference.agent_replay_many``): the turns exactly as
hermeslab's replay plans them, each recorded reply as hermeslab's loop puts it
into history, the tool schemas the loop sends and every recorded result. So
both sides make the same calls, and any difference is a decision.

``hermeslab_session`` replays the same recording through hermeslab
(``replay(..., fast=True)``) and reduces both runs to one shape:
``compressions`` as ``(call, trigger, output messages without the system
message)`` for every attempt that reached the compression pipeline, each with
the digest of every output message (``message_digest``: role, content, tool
calls with their ids and arguments, tool-call id), the billed prompt of every
call and their total. ``compare`` says whether two such runs are the same
session (same compressions at the same calls), whether they are the same in
content too (every compression's output message for message, every call's
billed prompt), and where they first differ: the first compression one side
applied and the other did not (the usual cause of a later difference), the
first differing message with both sides' view of it, the first call billed
differently.
"""

from __future__ import annotations

from typing import Any, Mapping

from hermeslab.core.config import Config
from hermeslab.core.messages import strip_surrogates
from hermeslab.core.tokens import encoding_for_model
from hermeslab.recovery.repair import history_copy
from hermeslab.recordings import Recording
from hermeslab.reference.worker.message_digest import compared

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
                             "changed": record.changed, **compared(out)})
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
    content = first_content_difference(ours, hermes) if first is None else None
    return {"identical": mine == theirs, "content_identical": first is None and content is None,
            "first_content_difference": content, "first_difference": None if first is None else {
        "index": first, "hermeslab": mine[first] if first < len(mine) else None,
        "hermes": theirs[first] if first < len(theirs) else None,
        "applied_differs_at": applied if applied is not None and applied <= first else None},
        "prompt_tokens_hermeslab": total, "prompt_tokens_hermes": reference, "total_diff_pct": diff,
        "calls_hermeslab": len(ours["calls"]), "calls_hermes": len(hermes["calls"])}


def first_content_difference(ours: dict, hermes: dict) -> dict | None:
    """Where two runs with the same compressions first differ in content, or None when they do not.

    Each compression's output is compared message for message (by digest; both
    sides' view of the first differing message is reported), then every call's
    billed prompt.
    """
    for index, (mine, theirs) in enumerate(zip(ours["compressions"], hermes["compressions"])):
        if mine["digests"] == theirs["digests"]:
            continue
        at = next((i for i, (a, b) in enumerate(zip(mine["digests"], theirs["digests"])) if a != b),
                  min(len(mine["digests"]), len(theirs["digests"])))
        return {"compression": index, "call": mine["call"], "trigger": mine["trigger"], "message": at,
                "hermeslab": mine["views"][at] if at < len(mine["views"]) else None,
                "hermes": theirs["views"][at] if at < len(theirs["views"]) else None}
    mine_calls = [call["prompt_tokens"] for call in ours["calls"]]
    their_calls = [call["prompt_tokens"] for call in hermes["calls"]]
    if mine_calls != their_calls:
        at = next((i for i, (a, b) in enumerate(zip(mine_calls, their_calls)) if a != b),
                  min(len(mine_calls), len(their_calls)))
        return {"billed_call": at, "hermeslab": mine_calls[at] if at < len(mine_calls) else None,
                "hermes": their_calls[at] if at < len(their_calls) else None}
    return None
