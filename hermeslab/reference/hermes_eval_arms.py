"""The jev arm of Hermes's compaction eval, run from its own source beside hermeslab's preset, on recordings.

Lean-era hermes-agent cannot be installed or assembled here (``docs/presets.md``,
"Fidelity: by reading"), but one of its eval's files is self-contained:
``evals/compaction/jev_arm.py`` needs only the standard library. Read from the
repository into a folder of its own (outside the checkout, with a
``SOURCE.json`` naming the commit), it runs in the zoo worker
(``zoo/worker/hermes_jev_steps.py``) under this interpreter. CI cannot rebuild
that folder: nothing here fetches it.

Both sides step a recording the same way: before each recorded assistant
reply, when the history's tokens (hermeslab's count of each recorded message,
given to both) reach the preset's trigger, the arm compacts; each side records
whether the history changed and which messages it then holds (a message whose
tool calls were cut shows the ids it keeps). The worker's decision model is
the file's own offline asker, whose answers sit under the plugin's threshold
as the published scorecard measured Jev's; when the file's arm cannot fit the
history into its request it raises, and the step records the fallback.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from hermeslab.context.budget import derive_budgets
from hermeslab.context.zoo_common import ZooInput
from hermeslab.core.config import CompressionConfig, Config
from hermeslab.core.errors import ConfigError
from hermeslab.core.messages import tool_calls_of
from hermeslab.core.tokens import message_estimator
from hermeslab.policies.hermes_scorecard import (DROP_TOOL_CALLS, EVAL_COMMIT, JEV_PINNED_ROWS,
                                                 JEV_TAIL40_PINNED_ROWS, POLICY)
from hermeslab.reference.zoo.client import ZooReference

#: The marker beside the source naming where it was read.
MARKER = "SOURCE.json"
JEV_ARM = Path("evals") / "compaction" / "jev_arm.py"
WORKER_AGENT = "hermes_jev"
Message = dict[str, Any]


def default_source() -> Path:
    """Where the source folder is kept unless another is named: beside the other reference environments."""
    return Path.home() / ".cache" / "hermeslab" / f"hermes-agent-{EVAL_COMMIT[:8]}-src"


def read_source(folder: Path) -> dict[str, Any]:
    """The folder's marker, checked: it must name the eval's commit and the arm's file must be there."""
    marker, arm = folder / MARKER, folder / JEV_ARM
    if not marker.is_file() or not arm.is_file():
        raise ConfigError(f"{folder} holds no {JEV_ARM} with a {MARKER}: read the file from NousResearch/"
                          f"hermes-agent @ {EVAL_COMMIT} into that folder first (docs/presets.md)")
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{marker}: not a JSON marker ({exc})") from None
    if not isinstance(found, dict) or found.get("commit") != EVAL_COMMIT:
        raise ConfigError(f"{marker}: names commit {found.get('commit') if isinstance(found, dict) else None!r}, "
                          f"the presets were read at {EVAL_COMMIT}")
    return found


_PRESETS = {preset.name: preset for preset in POLICY.presets}


def _cfg(preset: str) -> CompressionConfig:
    """The preset's compression settings (its overrides laid over the defaults, which are ``seed``'s)."""
    return Config().with_overrides(dict(_PRESETS[preset].overrides)).compression


def threshold_tokens(preset: str, window: int) -> int:
    """Where the preset fires at this window: the arms bring no trigger of their own, so the lean preset's."""
    return derive_budgets(dataclasses.replace(_cfg(preset), strategy="summary"), window).threshold_tokens


def wire(messages: list[Message], preset: str) -> list[Message]:
    """The recording as both sides step it: each message with its index as ``key`` and hermeslab's count."""
    estimate = message_estimator(_cfg(preset))
    wired = []
    for index, message in enumerate(messages):
        entry: Message = {"key": f"m{index}", "role": message.get("role"), "content": message.get("content"),
                          "tokens": estimate(message)}
        if message.get("tool_calls"):
            entry["tool_calls"] = message["tool_calls"]
        if message.get("tool_call_id"):
            entry["tool_call_id"] = message["tool_call_id"]
        wired.append(entry)
    return wired


def _call_ids(message: Message) -> list[str]:
    return [str(call.get("id")) for call in tool_calls_of(message)]


def view(history: list[Message], original_calls: dict[str, list[str]]) -> list[str]:
    """The keys held after the system prompt; a message with cut calls as ``key:kept,ids``."""
    body = history[1:] if history and history[0].get("role") == "system" else history
    return [m["key"] if _call_ids(m) == original_calls[m["key"]] else f"{m['key']}:{','.join(_call_ids(m))}"
            for m in body]


def ours(messages: list[Message], params: dict[str, Any]) -> list[dict]:
    """hermeslab's preset stepped over one recording (``params``: preset, threshold)."""
    preset = params["preset"]
    cfg = _cfg(preset)
    strategy = POLICY.strategies[cfg.strategy]
    wired = wire(messages, preset)
    original_calls = {m["key"]: _call_ids(m) for m in wired}
    budgets = derive_budgets(dataclasses.replace(cfg, strategy="summary"), params["window"])
    zoo = ZooInput(cfg=cfg, budgets=budgets, summariser=_NoSummary(), estimate=lambda m: m["tokens"])
    history: list[Message] = []
    steps: list[dict] = []
    for index, message in enumerate(wired):
        if message["role"] == "assistant":
            compacted = False
            if sum(m["tokens"] for m in history) >= params["threshold"]:
                before = view(history, original_calls)
                history = list(strategy(history, zoo, {}).messages)
                compacted = view(history, original_calls) != before
            steps.append({"at": index, "compacted": compacted, "view": view(history, original_calls)})
        history.append(message)
    return steps


class _NoSummary:
    """The arm writes no summary; a request for one is a fault."""

    def summarise(self, request):
        raise AssertionError("the jev arm asked for a summary")


def reference(sessions: list[list[Message]], variants: list[dict[str, Any]], source: Path) -> list[list[list[dict]]]:
    """The arm's own code over every recording, for each variant, in one worker run by this interpreter."""
    read_source(source)
    with ZooReference(None, WORKER_AGENT, python=Path(sys.executable)) as worker:
        results = []
        for params in variants:
            wired = [wire(messages, params["preset"]) for messages in sessions]
            pinned = JEV_PINNED_ROWS if _cfg(params["preset"]).strategy == DROP_TOOL_CALLS else JEV_TAIL40_PINNED_ROWS
            results.append(worker.replay(wired, {"source": str(source), "threshold": params["threshold"],
                                                 "pinned": pinned}))
        return results


def variants(windows: tuple[int, ...] = (8_000, 16_000, 32_000, 64_000)) -> list[dict[str, Any]]:
    """Each jev preset at each window, with the trigger hermeslab derives for it there."""
    return [{"preset": preset, "window": window, "threshold": threshold_tokens(preset, window)}
            for preset in ("hermes-eval-jev", "hermes-eval-jev-tail40") for window in windows]
