"""The arms of Hermes Agent's own compaction eval (``evals/compaction``), so its scorecard rows can be replayed here.

Hermes's eval runs one long transcript through ``ContextCompressor.compress(force=True)`` once per named
policy and publishes recall and retained tokens per policy in its scorecards. A policy there is the
shipping compressor with a few attributes set after it is built (``policies.py``), or, for the ``jev``
arms, a port of a plugin that writes no summary and removes old tool calls with their results
(``jev_arm.py``). The shipping compressor's default is lean mode, so every arm here is laid over the
lean preset (``hermes_lean``) with the eval's attributes on top: a tail fixed in tokens, a message-count
floor, and whether the compressor knows its session id (without one, Hermes writes no pointer back to the
session's history, and the eval's ``current`` arm has none).

The ``jev`` arms ask a decision model (TypeSafe's Jev, over a paid API) whether each old call must stay.
The published scorecard found it never does at the plugin's threshold: every unpinned call was dropped
("kept=0, result-truncated=0" over 851 candidates), so the arm behaves as "drop every tool call and result
outside the pinned rows, keep every user and assistant text". That measured behaviour is what the
strategy here reproduces; the model itself is not asked. Arms whose outcome depends on the model's
scores (``jev_t15``, ``jev_top60k``) cannot be reproduced and are not presets; nor is ``recent_top60k``,
whose selection code is in no stored version of ``jev_arm.py`` at a known commit.
"""

from __future__ import annotations

from typing import Any

from hermeslab.context.baselines import BaselineResult
from hermeslab.context.zoo_common import Message, ZooInput, result, unchanged
from hermeslab.core.messages import text_of, tool_calls_of

from .base import Citation, Policy, Preset
from .hermes_lean import HERMES_COMMIT, LEAN, LEAN_OVERRIDES, LEGACY

#: The commit whose ``evals/compaction/{policies,runner,jev_arm}.py`` were read.
EVAL_COMMIT = "2416cfceb0db4a7590776c93f8546906388a3744"
#: The commit whose scorecard publishes the ``jev`` rows (``results/SCORECARD-2026-09-19-jev.md``).
JEV_SCORECARD_COMMIT = "cd3f2c2a169786de71da27d40f59902c93c38b6a"
#: The commit whose scorecard publishes the ``current`` and ``lean`` rows (``results/SCORECARD-2026-08-15.md``).
LEAN_SCORECARD_COMMIT = "e03d71588629549baa9990c311b5d9f24479ff49"
#: The commit whose ``agent/context_compressor.py`` was read for what the eval's attributes do.
COMPRESSOR_COMMIT = "e03d71588629549baa9990c311b5d9f24479ff49"
SOURCE = (f"NousResearch/hermes-agent @ {EVAL_COMMIT[:8]} (evals/compaction/policies.py, runner.py, jev_arm.py), "
          f"agent/context_compressor.py @ {COMPRESSOR_COMMIT[:8]}; laid over {LEAN} (@ {HERMES_COMMIT[:8]})")

#: Tail budgets the eval sets on the compressor after construction, in tokens.
TAIL_25K = 25_000
TAIL_10K = 10_000
CODEX_STYLE_TAIL = 2_000
#: The message-count floor of the tail in the Codex-like arm.
CODEX_STYLE_LAST_N = 3
#: Rows the plugin never touches, counted from the end (its ``preserve_recent_messages`` default)…
JEV_PINNED_ROWS = 6
#: …and as widened in the ``jev_tail40`` arm.
JEV_TAIL40_PINNED_ROWS = 40

DROP_TOOL_CALLS = "hermes_eval_drop_tool_calls"
DROP_TOOL_CALLS_TAIL40 = "hermes_eval_drop_tool_calls_tail40"


# ---------------------------------------------------------------- the summary-free arm


def pinned_row(index: int, total: int, pinned_rows: int) -> bool:
    """The first row and the newest ``pinned_rows`` rows are never candidates for removal."""
    return index == 0 or index >= total - pinned_rows


def droppable_calls(messages: list[Message], pinned_rows: int) -> set[str]:
    """Ids of the answered tool calls whose call row and result row both lie outside the pinned rows.

    A call without a result row is no candidate. An id seen on a pinned and an unpinned row goes,
    since the plugin's decisions are keyed by id.
    """
    results: dict[Any, int] = {}
    for index, message in enumerate(messages):
        if message.get("role") == "tool" and message.get("tool_call_id"):
            results[message["tool_call_id"]] = index
    total = len(messages)
    dropped: set[str] = set()
    for index, message in enumerate(messages):
        for call in tool_calls_of(message):
            call_id = call.get("id")
            if call_id not in results:
                continue
            if not (pinned_row(index, total, pinned_rows) or pinned_row(results[call_id], total, pinned_rows)):
                dropped.add(call_id)
    return dropped


def without_calls(messages: list[Message], dropped: set[str]) -> tuple[list[Message], int]:
    """(``messages`` with those calls and their results removed, rows removed or rewritten).

    An assistant message that loses every call and has no text goes too; one with text keeps it.
    Every other row is kept as it was.
    """
    out: list[Message] = []
    touched = 0
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") in dropped:
                touched += 1
            else:
                out.append(message)
            continue
        calls = tool_calls_of(message)
        remaining = [call for call in calls if call.get("id") not in dropped]
        if len(remaining) == len(calls):
            out.append(message)
            continue
        touched += 1
        if not remaining and not text_of(message).strip():
            continue
        rewritten = dict(message)
        if remaining:
            rewritten["tool_calls"] = remaining
        else:
            rewritten.pop("tool_calls", None)
        out.append(rewritten)
    return out, touched


def _drop_tool_calls(messages: list[Message], zoo: ZooInput, *, strategy: str, pinned_rows: int) -> BaselineResult:
    dropped = droppable_calls(messages, pinned_rows)
    record: dict[str, Any] = {"strategy": strategy, "pinned_rows": pinned_rows, "calls_dropped": len(dropped)}
    if not dropped:
        return unchanged(messages, zoo, {**record, "outcome": "nothing_to_drop"})
    out, touched = without_calls(messages, dropped)
    return result(messages, out, condensed=touched, zoo=zoo, record={**record, "outcome": "dropped"})


def drop_tool_calls(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The ``jev`` arm as measured: every tool call and result outside the newest 6 rows (and the first) goes."""
    return _drop_tool_calls(messages, zoo, strategy=DROP_TOOL_CALLS, pinned_rows=JEV_PINNED_ROWS)


def drop_tool_calls_tail40(messages: list[Message], zoo: ZooInput, memory: dict[str, Any]) -> BaselineResult:
    """The ``jev_tail40`` arm as measured: the same with the newest 40 rows pinned."""
    return _drop_tool_calls(messages, zoo, strategy=DROP_TOOL_CALLS_TAIL40, pinned_rows=JEV_TAIL40_PINNED_ROWS)


# ---------------------------------------------------------------- the policy

#: The shipping compressor as the eval builds it: lean, and no session id, so no pointer back to the history.
CURRENT_OVERRIDES: dict[str, Any] = {**LEAN_OVERRIDES, "compression.history_pointers": False}

_EVAL = f"evals/compaction/policies.py @ {EVAL_COMMIT[:8]}"
_RUNNER = f"evals/compaction/runner.py @ {EVAL_COMMIT[:8]}"
_JEV = f"evals/compaction/jev_arm.py @ {EVAL_COMMIT[:8]}"
_COMPRESSOR = f"agent/context_compressor.py @ {COMPRESSOR_COMMIT[:8]}"
_JEV_CARD = f"evals/compaction/results/SCORECARD-2026-09-19-jev.md @ {JEV_SCORECARD_COMMIT[:8]}"
_LEAN_CARD = f"evals/compaction/results/SCORECARD-2026-08-15.md @ {LEAN_SCORECARD_COMMIT[:8]}"

POLICY = Policy(
    agent="Hermes Agent (its compaction eval)",
    source=SOURCE,
    presets=(
        Preset("hermes-eval-current", CURRENT_OVERRIDES,
               "the eval's 'current': Hermes's lean default, built without a session id, so no pointer back "
               "to the session's history."),
        Preset("hermes-eval-lean", {**LEAN_OVERRIDES, "compression.history_pointers": True},
               "the eval's 'lean': lean mode with its session id, the summary and tail stubs pointing back to "
               "the session's history."),
        Preset("hermes-eval-tail25k", {**CURRENT_OVERRIDES, "compression.fixed_tail_tokens": TAIL_25K},
               "the eval's 'tail25k': 'current' with the verbatim tail fixed at 25,000 tokens."),
        Preset("hermes-eval-tail10k", {**CURRENT_OVERRIDES, "compression.fixed_tail_tokens": TAIL_10K},
               "the eval's 'tail10k': 'current' with the verbatim tail fixed at 10,000 tokens."),
        Preset("hermes-eval-codex-style",
               {**CURRENT_OVERRIDES, "compression.fixed_tail_tokens": CODEX_STYLE_TAIL,
                "compression.protect_last_n": CODEX_STYLE_LAST_N},
               "the eval's 'codex_style': 'current' with a 2,000-token tail and a 3-message floor."),
        Preset("hermes-eval-jev", {**CURRENT_OVERRIDES, "compression.strategy": DROP_TOOL_CALLS},
               "the eval's 'jev' as measured: no summary; every tool call and result outside the newest 6 rows "
               "goes, all text stays."),
        Preset("hermes-eval-jev-tail40", {**CURRENT_OVERRIDES, "compression.strategy": DROP_TOOL_CALLS_TAIL40},
               "the eval's 'jev_tail40' as measured: the same with the newest 40 rows pinned."),
    ),
    fidelity="reading",
    strategies={DROP_TOOL_CALLS: drop_tool_calls, DROP_TOOL_CALLS_TAIL40: drop_tool_calls_tail40},
    citations=(
        Citation("'current' is the shipping compressor, untouched", "CURRENT_OVERRIDES = lean preset",
                 f"{_EVAL} 20-24; {_RUNNER} _compress_with_policy 296-327"),
        Citation("the shipping default is lean mode", "laid over LEAN_OVERRIDES",
                 f"{_COMPRESSOR} ContextCompressor.__init__ 2897-2906 (tail_mode='lean' at 2904, 2909)"),
        Citation("no session id in 'current': no recovery footer, no session_search hint in tail stubs",
                 "compression.history_pointers: false",
                 f"{_COMPRESSOR} _build_recovery_footer 1012-1026 (no session id: 1016-1017), _lean_recovery_stub "
                 "960-966 (hint at 962), _augment_summary_lean 3774-3785"),
        Citation("'lean' sets the session id 'eval-session'", "compression.history_pointers: true",
                 f"{_EVAL} 42-47"),
        Citation("attributes (and ctor keys) are set after the compressor is built",
                 "presets are overrides of the lean preset",
                 f"{_EVAL} 71-74; {_RUNNER} _compress_with_policy 322-324"),
        Citation("'tail25k' sets tail_token_budget 25,000", "TAIL_25K, compression.fixed_tail_tokens",
                 f"{_EVAL} 28-31"),
        Citation("'tail10k' sets tail_token_budget 10,000", "TAIL_10K", f"{_EVAL} 33-36"),
        Citation("'codex_style' sets protect_last_n 3 and tail_token_budget 2,000",
                 "CODEX_STYLE_LAST_N, CODEX_STYLE_TAIL", f"{_EVAL} 37-41"),
        Citation("a tail_token_budget set outright is used as set: no lean formula, no 20% window cap",
                 "fixed_tail_tokens bypasses tail_mode and tail_max_context_share",
                 f"{_COMPRESSOR} ContextCompressor.tail_token_budget property 2328-2339, setter 2341-2343"),
        Citation("the walk may overshoot by half, capped at 20% of the window, never below the budget",
                 "soft_tail_tokens = max(min(1.5 x tail, share x window), tail)",
                 f"{_COMPRESSOR} _tail_soft_ceiling 3299-3307"),
        Citation("the window the eval's numbers were chosen for: 1,000,000 tokens", "docs/presets.md",
                 f"{_EVAL} 16-17"),
        Citation("'jev' runs the plugin at its defaults; 'jev_tail40' pins 40 rows",
                 "DROP_TOOL_CALLS, DROP_TOOL_CALLS_TAIL40", f"{_EVAL} 48-60"),
        Citation("6 rows pinned by default", "JEV_PINNED_ROWS", f"{_JEV} 111"),
        Citation("a row is pinned when it is the first or among the newest N", "pinned_row", f"{_JEV} 126-127"),
        Citation("candidates: calls with a result row; pinned when the call or the result row is",
                 "droppable_calls", f"{_JEV} 140-166"),
        Citation("under the threshold on both questions a call is dropped with its result", "without_calls",
                 f"{_JEV} decide_call 359-367, apply_decisions 378-414"),
        Citation("a row left with no calls and no text goes; one with text keeps it", "without_calls",
                 f"{_JEV} apply_decisions 378-414"),
        Citation("at the 0.5 threshold every unpinned candidate was dropped (kept=0, result-truncated=0)",
                 "no decision model asked", f"{_JEV_CARD}, Findings 2, 41-47"),
        Citation("'current' at 2026-08-15 was measured under the legacy default",
                 f"its counterpart is {LEGACY}", f"{_LEAN_CARD}, Recommendation, 89-93"),
    ),
)
