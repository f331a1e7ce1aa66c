"""The arms of Hermes Agent's compaction eval against its source: NousResearch/hermes-agent @ 2416cfce.

Paths are under ``evals/compaction/``. ``policies.py``, ``jev_arm.py`` and ``runner.py`` are cited
by line, counted in the stored text of each at that commit. The jev scorecard is
``results/SCORECARD-2026-09-19-jev.md`` @ cd3f2c2a, the lean one ``results/SCORECARD-2026-08-15.md`` @
e03d7158; ``agent/context_compressor.py`` was read @ e03d7158 and is cited by name and line. The
region-scoping test is Hermes's own ``evals/compaction/test_region_scoping.py``
(named in ``evals/compaction/README.md``), read in the fork luthfisy/hermes-agent @ 4f6e7806 since no
copy of it is stored for NousResearch/hermes-agent.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from hermeslab.context.compactor import Compactor
from hermeslab.context.zoo_common import ZooInput
from hermeslab.context.lean_summary import RECOVERY_HEADING
from hermeslab.context.lean_tail import STUB_MARK
from hermeslab.context.types import SummaryOutcome
from hermeslab.policies.hermes_lean import LEAN
from hermeslab.policies.loading import load_config
from hermeslab.policies.running import budgets_of, make_compactor
from hermeslab.core.messages import validate_messages
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.policies.hermes_scorecard import (CODEX_STYLE_LAST_N, CODEX_STYLE_TAIL, DROP_TOOL_CALLS,
                                                 DROP_TOOL_CALLS_TAIL40, JEV_PINNED_ROWS, JEV_TAIL40_PINNED_ROWS,
                                                 POLICY, TAIL_10K, TAIL_25K, droppable_calls, drop_tool_calls,
                                                 drop_tool_calls_tail40, pinned_row, without_calls)

from test_context_conversations import conversations

PRESETS = {preset.name: preset for preset in POLICY.presets}


def _zoo(window: int = 1_000_000) -> ZooInput:
    config = load_config("seed", {"model.context_length": window})
    compactor = Compactor(config, FixedSummariser("THE SUMMARY"))
    return ZooInput(cfg=config.compression, budgets=compactor.budgets, summariser=compactor.summariser,
                    estimate=compactor._estimate_message)


def _call(call_id: str, text: str | None = None) -> dict:
    return {"role": "assistant", "content": text,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]}


def _result(call_id: str, text: str = "output " * 40) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _rounds(count: int) -> list[dict]:
    """A system prompt, a request, then ``count`` rounds of call, result and a short reply."""
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "fix the build"}]
    for number in range(count):
        messages += [_call(f"c{number}"), _result(f"c{number}"), {"role": "assistant", "content": f"step {number}"}]
    return messages


# ---------------------------------------------------------------- which rows are pinned


def test_the_first_row_and_the_newest_six_rows_are_pinned():
    """jev_arm.py 111 (``preserve_recent_messages: int = 6``), 126-127 (``index == 0 or index >= total - preserve``)."""
    assert JEV_PINNED_ROWS == 6
    total = 20
    assert pinned_row(0, total, JEV_PINNED_ROWS)
    assert [i for i in range(total) if pinned_row(i, total, JEV_PINNED_ROWS)] == [0, 14, 15, 16, 17, 18, 19]


def test_the_tail40_arm_pins_forty_rows():
    """policies.py 57-60 (``jev_tail40``: ``preserve_recent_messages: 40``)."""
    assert JEV_TAIL40_PINNED_ROWS == 40
    messages = _rounds(20)  # 62 rows: the rounds from row 22 on are pinned
    dropped = droppable_calls(messages, JEV_TAIL40_PINNED_ROWS)
    assert dropped == {f"c{n}" for n in range(7)}  # c6's call is row 20, its result row 21: both unpinned
    assert "c7" not in dropped  # its result, row 24, is within the newest 40 (from row 22)


def test_a_call_is_pinned_when_its_call_or_its_result_row_is():
    """jev_arm.py 164 (``pinned=is_pinned(idx, ...) or is_pinned(ridx, ...)``)."""
    messages = [{"role": "user", "content": "go"}, _call("a"), {"role": "user", "content": "later"}] + [
        {"role": "assistant", "content": f"note {n}"} for n in range(4)] + [_result("a")]
    assert droppable_calls(messages, JEV_PINNED_ROWS) == set()  # the result is the newest row


def test_a_call_without_a_result_is_no_candidate():
    """jev_arm.py 150-151 (a call whose id has no result row is skipped)."""
    messages = _rounds(5) + [_call("open")]
    messages.insert(2, _call("unanswered", "checking"))
    assert "unanswered" not in droppable_calls(messages, JEV_PINNED_ROWS)
    out, _ = without_calls(messages, droppable_calls(messages, JEV_PINNED_ROWS))
    assert messages[2] in out


# ---------------------------------------------------------------- what the arm removes


def test_every_unpinned_call_goes_with_its_result_and_the_text_stays():
    """SCORECARD-2026-09-19-jev.md, Findings 2: every unpinned candidate dropped (kept=0, result-truncated=0),
    "delete every old tool call + result, keep every user/assistant row verbatim"; jev_arm.py
    ``decide_call`` 359-367 (both scores under the 0.5 threshold: ``drop_call``) and ``apply_decisions``
    378-414."""
    messages = _rounds(6)  # 20 rows; the newest 6 are rows 14-19
    out = drop_tool_calls(messages, _zoo(), {})
    kept_ids = {m.get("tool_call_id") for m in out.messages if m["role"] == "tool"}
    assert kept_ids == {"c4", "c5"}  # c4's call is row 14
    texts = [m for m in messages if m["role"] != "tool" and not m.get("tool_calls")]
    assert [m for m in out.messages if m["role"] != "tool" and not m.get("tool_calls")] == texts
    assert out.record["outcome"] == "dropped" and out.record["calls_dropped"] == 4
    assert out.condensed == 8 and out.summary_text is None
    validate_messages(out.messages)


def test_an_assistant_row_keeps_its_text_and_loses_its_calls():
    """jev_arm.py ``apply_decisions`` 378-414: a row left with no calls and no text goes; with text,
    ``tool_calls`` is removed and the row stays."""
    messages = [{"role": "user", "content": "go"}, _call("a", "I will look first."), _result("a"), _call("b"),
                _result("b")] + [{"role": "assistant", "content": f"note {n}"} for n in range(6)]
    out, touched = without_calls(messages, {"a", "b"})
    assert out[1] == {"role": "assistant", "content": "I will look first."}
    assert len(out) == len(messages) - 3 and touched == 4


def test_a_row_with_a_kept_and_a_dropped_call_keeps_the_kept_one():
    """jev_arm.py ``apply_decisions`` 378-414 (``remaining`` calls stay on the row)."""
    two = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "terminal", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]}
    out, _ = without_calls([{"role": "user", "content": "go"}, two, _result("a"), _result("b")], {"a"})
    assert [call["id"] for call in out[1]["tool_calls"]] == ["b"]
    assert [m.get("tool_call_id") for m in out[2:]] == ["b"]


def test_nothing_to_drop_hands_the_conversation_back():
    messages = _rounds(1)
    out = drop_tool_calls_tail40(messages, _zoo(), {})
    assert out.messages == messages and out.condensed == 0 and out.record["outcome"] == "nothing_to_drop"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_the_arm_keeps_the_conversation_valid_and_a_second_pass_drops_nothing(messages):
    """The pinned rows are the newest ones, so none of them is removed and they stay the newest: the
    second pass finds the same rows pinned and nothing left to drop."""
    zoo = _zoo()
    first = drop_tool_calls(messages, zoo, {})
    validate_messages(first.messages)
    assert all(m in messages or m.get("role") == "assistant" for m in first.messages)
    assert first.messages[-JEV_PINNED_ROWS:] == messages[-JEV_PINNED_ROWS:]
    assert drop_tool_calls(first.messages, zoo, {}).condensed == 0


# ---------------------------------------------------------------- the presets


def test_the_jev_presets_run_the_arm_and_name_the_eval_commit():
    """policies.py 51-54 (``jev``, plugin defaults), 57-60 (``jev_tail40``)."""
    assert "2416cfce" in POLICY.source and POLICY.fidelity == "reading"
    strategies = {preset.overrides["compression.strategy"] for preset in POLICY.presets
                  if "compression.strategy" in preset.overrides}
    assert {DROP_TOOL_CALLS, DROP_TOOL_CALLS_TAIL40} <= strategies
    assert POLICY.strategies[DROP_TOOL_CALLS] is drop_tool_calls
    assert POLICY.strategies[DROP_TOOL_CALLS_TAIL40] is drop_tool_calls_tail40


def test_every_arm_is_a_preset_laid_over_the_lean_one():
    """policies.py 20-24 ('current': shipping behaviour untouched); the shipping default is lean mode
    (context_compressor.py ``ContextCompressor.__init__`` 2897-2906, ``tail_mode="lean"`` at 2904)."""
    lean = load_config(LEAN).compression
    for name in PRESETS:
        cfg = load_config(name).compression
        assert cfg.tail_mode == "lean" and cfg.lean_summary_sections == lean.lean_summary_sections
        assert cfg.threshold == lean.threshold and cfg.max_threshold_tokens == lean.max_threshold_tokens


def test_the_tail_arms_set_the_numbers_the_eval_sets():
    """policies.py 28-31 (tail25k), 33-36 (tail10k), 37-41 (codex_style: protect_last_n 3, tail 2,000)."""
    assert (TAIL_25K, TAIL_10K, CODEX_STYLE_TAIL, CODEX_STYLE_LAST_N) == (25_000, 10_000, 2_000, 3)
    assert load_config("hermes-eval-tail25k").compression.fixed_tail_tokens == 25_000
    assert load_config("hermes-eval-tail10k").compression.fixed_tail_tokens == 10_000
    codex = load_config("hermes-eval-codex-style").compression
    assert (codex.fixed_tail_tokens, codex.protect_last_n) == (2_000, 3)
    assert load_config("hermes-eval-current").compression.fixed_tail_tokens is None


def test_only_the_lean_arm_knows_its_session():
    """policies.py 42-47 ('lean' sets ``_session_id``); context_compressor.py ``_build_recovery_footer``
    (1016-1017) and ``_lean_recovery_stub`` (962) write nothing of the session without an id, which 'current'
    never gets."""
    assert load_config("hermes-eval-lean").compression.history_pointers
    assert not any(load_config(name).compression.history_pointers for name in PRESETS if name != "hermes-eval-lean")


def test_a_tail_set_outright_is_used_as_set_at_every_window():
    """context_compressor.py ``tail_token_budget``: the setter (2341-2343) stores the value, so neither the
    lean formula nor the 20% window cap applies; ``_tail_soft_ceiling`` (3299-3307): max(min(1.5 x budget,
    20% of the window), budget)."""
    for window, soft in ((1_000_000, 37_500), (200_000, 37_500), (100_000, 25_000), (8_000, 25_000)):
        budgets = budgets_of(load_config("hermes-eval-tail25k").compression, window)
        assert (budgets.tail_token_budget, budgets.soft_tail_tokens) == (25_000, soft)
    codex = budgets_of(load_config("hermes-eval-codex-style").compression, 8_000)
    assert (codex.tail_token_budget, codex.soft_tail_tokens) == (2_000, 2_000)


def test_current_keeps_the_lean_tail():
    """context_compressor.py ``tail_token_budget`` (derived, 2328-2339): max(10,000, min(25,000, 2.5% of the
    window)), then at most 20% of the window. At the eval's 1,000,000-token window 'current' and 'tail25k'
    keep the same tail."""
    current = load_config("hermes-eval-current").compression
    assert budgets_of(current, 1_000_000).tail_token_budget == 25_000
    assert budgets_of(current, 100_000).tail_token_budget == 10_000
    assert budgets_of(current, 8_000).tail_token_budget == 1_600


# ---------------------------------------------------------------- derived from Hermes's region-scoping test

HEAD, MIDDLE, TAIL = "HEADSENTINEL_zq81", "MIDSENTINEL_kv93", "TAILSENTINEL_pw27"
REGION_IDS = {"head": ("#99001", "tests/head_guard.py"), "middle": ("#99002", "tests/mid_guard.py"),
              "tail": ("#99003", "tests/tail_guard.py")}


class Capturing:
    """Answers every summary request with a fixed body and keeps the requests."""

    def __init__(self):
        self.requests = []

    def summarise(self, request):
        self.requests.append(request)
        return SummaryOutcome(body="## Historical Task Snapshot\nsummarised")


def _scoping_transcript() -> list[dict]:
    """Sentinels in the head, the middle and the tail, as Hermes's test plants them (its sizes)."""
    head_pr, head_file = REGION_IDS["head"]
    mid_pr, mid_file = REGION_IDS["middle"]
    tail_pr, tail_file = REGION_IDS["tail"]
    messages = [{"role": "system", "content": "system prompt"},
                {"role": "user", "content": f"first user message {HEAD} {head_pr} {head_file}"},
                {"role": "assistant", "content": "ack HeadError: boom head"}]
    for i in range(40):
        marker = f" {MIDDLE}-{i}" if i % 5 == 0 else ""
        if i % 10 == 0 and i > 0:
            messages.append({"role": "user", "content": f"middle user instruction {MIDDLE}-user-{i} {mid_pr} "
                                                        f"file={mid_file}"})
        messages.append({"role": "assistant", "content": f"mid step {i}{marker}",
                         "tool_calls": [{"id": f"m{i}", "type": "function",
                                         "function": {"name": "terminal", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"m{i}", "content": f"mid tool output {i} " * 300 + marker})
    for i in range(6):
        messages.append({"role": "assistant", "content": f"tail step {i} {TAIL}-{i} {tail_pr} {tail_file}",
                         "tool_calls": [{"id": f"t{i}", "type": "function",
                                         "function": {"name": "terminal", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"t{i}", "content": f"tail output {i} {TAIL}-{i}"})
    messages.append({"role": "user", "content": f"latest user question {TAIL}-u"})
    messages.append({"role": "assistant", "content": "final answer in tail"})
    return messages


def _scoped_compaction(preset: str):
    """Hermes's test: a 1,000,000-token model, ``tail_token_budget = 3_000`` set outright, one forced compaction."""
    config = load_config(preset, {"model.context_length": 1_000_000, "compression.fixed_tail_tokens": 3_000})
    summariser = Capturing()
    compaction = make_compactor(config, summariser).run(_scoping_transcript(), trigger="manual")
    return compaction, summariser.requests


def _text(messages) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


def test_the_summariser_sees_only_the_middle_region():
    """test_region_scoping.py ``run_mode``: the middle reaches the summariser, the head and the tail never do; the
    latest user message and the head survive verbatim; lean mode makes exactly one summary call."""
    compaction, requests = _scoped_compaction("hermes-eval-current")
    assert len(requests) == 1
    span = _text(requests[0].span)
    assert MIDDLE in span and HEAD not in span and TAIL not in span
    out = _text(compaction.messages)
    assert f"{TAIL}-u" in out and HEAD in out


def test_the_lean_sections_carry_only_middle_identifiers():
    """test_region_scoping.py: the anchor index and the verbatim user messages hold the middle's identifiers
    and none of the head's or the tail's."""
    compaction, _ = _scoped_compaction("hermes-eval-current")
    summary = _text(m for m in compaction.messages if m.get("_compressed_summary"))
    assert f"{MIDDLE}-user-10" in summary
    assert all(identifier in summary for identifier in REGION_IDS["middle"])
    assert not any(identifier in summary for region in ("head", "tail") for identifier in REGION_IDS[region])


def test_current_points_nowhere_and_lean_points_back_to_the_history():
    """policies.py 42-47 with context_compressor.py ``_augment_summary_lean`` (3774-3785) /
    ``_build_recovery_footer`` (1012-1026) and ``_demote_stale_tail_tools`` (3746-3772) / ``_lean_recovery_stub``
    (960-966): the footer and the stubs' hint need the session id."""
    current, _ = _scoped_compaction("hermes-eval-current")
    lean, _ = _scoped_compaction("hermes-eval-lean")
    assert current.result.record["tail_demoted_indices"] and lean.result.record["tail_demoted_indices"]
    assert RECOVERY_HEADING not in _text(current.messages) and "session_search" not in _text(current.messages)
    assert RECOVERY_HEADING in _text(lean.messages)
    stubs = [m["content"] for m in lean.messages if m.get("role") == "tool" and STUB_MARK in str(m.get("content"))]
    assert stubs and all("session_search" in stub for stub in stubs)
