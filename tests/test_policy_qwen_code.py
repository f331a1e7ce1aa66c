"""Qwen Code's chat compression against its source (QwenLM/qwen-code, packages/core/src/services/):
chatCompressionService.ts @ 00b481a3, postCompactAttachments.ts @ 15234f76."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.context.pipeline import CompressionState
from hermeslab.context.policy import CompressionPolicy
from hermeslab.context.types import is_summary_message
from hermeslab.context.zoo_common import ZooInput
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.policies.loading import load_config
from hermeslab.policies.qwen_code import (ACK, FILES_NAMED, NAME, POLICY, RESUME, STRATEGY, qwen_compress,
                                          qwen_trigger, recent_file_paths, restored_files)
from hermeslab.policies.running import budgets_of
from policy_checks import Failing, Recording, checked_pass, checked_trigger, loaded_zoo_input
from test_context_conversations import conversations


def _zoo(window: int = 1_000_000, summariser=None) -> ZooInput:
    return loaded_zoo_input(NAME, window, summariser)


def _trigger(window: int, share: float | None = None) -> int:
    overrides = {} if share is None else {"compression.threshold": share}
    return checked_trigger(qwen_trigger, NAME, window, overrides)


def _call(call_id: str, name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _session() -> list[dict]:
    return [{"role": "system", "content": "You are Qwen Code."},
            {"role": "user", "content": "fix the parser"},
            _call("g1", "grep", pattern="parse"), _result("g1", "src/parser.ts: parse(...)\n" * 400),
            _call("r1", "read_file", file_path="src/parser.ts"), _result("r1", "old parser"),
            _call("w1", "write_file", file_path="src/parser.ts", content="new parser"), _result("w1", "ok"),
            _call("r2", "read_file", path="README.md"), _result("r2", "readme text"),
            {"role": "assistant", "content": "Fixed."}]


# ---------------------------------------------------------------- when it fires


def test_large_windows_compact_at_85_percent():
    """chatCompressionService.ts 58 (``DEFAULT_PCT = 0.85``), 176-181: min(0.85 × window, window − 33,000)."""
    assert _trigger(1_000_000) == 850_000
    assert _trigger(220_000) == 187_000  # both terms equal here


def test_mid_windows_compact_33k_below_the_window():
    """chatCompressionService.ts 50, 65 (20,000 reserved for the summary) and 73 (13,000 buffer)."""
    assert _trigger(200_000) == 167_000
    assert _trigger(128_000) == 95_000
    assert _trigger(40_000) == 7_000


def test_windows_of_33k_or_less_compact_at_85_percent():
    """chatCompressionService.ts 169, 177-181: a ceiling that is not positive gives way to the share."""
    assert _trigger(33_000) == 28_050
    assert _trigger(8_000) == 6_800
    assert _trigger(33_001) == 1  # the ceiling is 1 token just past 33,000


def test_the_output_cap_plays_no_part():
    cfg = load_config(NAME, {"model.context_length": 200_000}).compression
    assert qwen_trigger(cfg, 200_000, 64_000) == qwen_trigger(cfg, 200_000, None)


@settings(max_examples=200, deadline=None)
@given(small=st.integers(1, 4_000_000), grow=st.integers(0, 1_000_000),
       share=st.sampled_from([0.5, 0.85, 1.0]))
def test_the_trigger_grows_with_the_window_on_each_side_of_33k(small, grow, share):
    """Monotonic within windows up to 33,000 and within windows above it; crossing 33,000 it drops (above)."""
    large = small + grow
    if small <= 33_000 < large:
        return
    assert _trigger(small, share) <= _trigger(large, share)


# ---------------------------------------------------------------- three failures


def test_three_failures_in_a_row_stop_automatic_compaction():
    """chatCompressionService.ts 91 (``MAX_CONSECUTIVE_FAILURES = 3``) and the first gate of compress():
    ``consecutiveFailures >= 3 && !force`` → no compaction; a forced one (overflow) still runs."""
    config = load_config(NAME, {"model.context_length": 100_000})
    policy = CompressionPolicy(config.compression, budgets_of(config.compression, 100_000), CompressionState(),
                               clock=lambda: 0.0)
    failed = qwen_compress(_session(), _zoo(summariser=Failing()), {})
    assert failed.aborted
    for _ in range(2):
        policy.record(failed, "pressure")
        assert policy.allows("pressure")
    policy.record(failed, "pressure")
    assert not policy.allows("pressure") and policy.allows("overflow")


def test_a_larger_result_is_a_failure():
    """compress(): ``newTokenCount > originalTokenCount`` → COMPRESSION_FAILED_INFLATED_TOKEN_COUNT."""
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    result = qwen_compress(messages, _zoo(summariser=FixedSummariser("long " * 500)), {})
    assert result.aborted and result.record["outcome"] == "inflated" and result.messages == messages


def test_fewer_than_two_messages_is_nothing_to_do():
    """compress(): ``curatedHistory.length < 2`` → NOOP (the request being sent is not yet history)."""
    messages = [{"role": "system", "content": "s"}, {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "go"}]
    result = qwen_compress(messages, _zoo(), {})
    assert result.messages == messages and result.record["outcome"] == "nothing_to_summarise"


# ---------------------------------------------------------------- what comes back


def test_recent_files_newest_call_first_each_once():
    """postCompactAttachments.ts 24 (five files), 60-65 (read_file, write_file, edit, replace) and
    extractRecentFilePaths (newest turn first, the last call of a turn first, a path once)."""
    history = _session()[1:]
    assert recent_file_paths(history) == ["README.md", "src/parser.ts"]
    many = [_call(f"c{n}", "edit", file_path=f"f{n}.py") for n in range(7)]
    assert recent_file_paths(many) == ["f6.py", "f5.py", "f4.py", "f3.py", "f2.py"]


def test_small_files_are_embedded_large_or_unknown_ones_named():
    """postCompactAttachments.ts 55 (5,000 tokens a file, 4 characters a token) and buildFileRestorationBlocks
    (named files in one block first, then each embedded file)."""
    history = [_call("a", "read_file", file_path="big.txt"), _result("a", "x" * 20_001),
               _call("b", "edit", file_path="edited.py"), _result("b", "ok"),
               _call("c", "write_file", file_path="small.py", content="print(1)"), _result("c", "ok")]
    parts = restored_files(history)
    assert parts[0] == f"{FILES_NAMED}\n\n- edited.py\n- big.txt"
    assert len(parts) == 2 and "## small.py" in parts[1] and "print(1)" in parts[1]


def test_embedded_files_share_50k_tokens():
    """postCompactAttachments.ts 56: past 50,000 tokens (200,000 characters) a file is named instead; five files
    of at most 5,000 tokens never reach it, more files (a setting) can."""
    history = []
    for n in range(11):
        history += [_call(f"r{n}", "read_file", file_path=f"f{n}.txt"), _result(f"r{n}", "y" * 19_000)]
    assert len(restored_files(history)) == 5
    parts = restored_files(history, limit=11)
    assert parts[0] == f"{FILES_NAMED}\n\n- f0.txt"  # the oldest, the eleventh, no longer fits
    assert len(parts) == 11


def test_after_a_compaction_summary_ack_files_then_the_request_being_sent():
    """composePostCompactHistory: summary (user) with the resume line, the acknowledgement, then one user
    message holding every restored file; the request being sent follows."""
    messages = _session() + [{"role": "user", "content": "now add tests"}]
    summariser = Recording()
    result = qwen_compress(messages, _zoo(summariser=summariser), {})
    out = result.messages
    assert out[0] == messages[0]
    assert is_summary_message(out[1]) and out[1]["content"] == f"THE SUMMARY\n\n{RESUME}"
    assert out[2] == {"role": "assistant", "content": ACK}
    texts = [part["text"] for part in out[3]["content"]]
    assert "## README.md" in texts[0] and "readme text" in texts[0]
    assert "## src/parser.ts" in texts[1] and "new parser" in texts[1]
    assert len(texts) == 2 and out[4] == messages[-1] and len(out) == 5
    assert summariser.spans[0][-1]["content"] == "Fixed."  # the request being sent is not summarised


def test_a_call_waiting_for_its_results_stays_after_the_files_or_in_the_acknowledgement():
    """composePostCompactHistory with trailingFunctionCallContent: with attachments the call follows them;
    without, its calls join the acknowledgement."""
    messages = _session()[:-1]
    out = qwen_compress(messages, _zoo(), {}).messages
    assert out[3]["role"] == "user" and out[4] == messages[-2] and out[5] == messages[-1]
    bare = [{"role": "user", "content": "run it"}, _call("s0", "shell", command="make"), _result("s0", "ok " * 900),
            _call("s1", "shell", command="ls"), _result("s1", "a b")]
    out = qwen_compress(bare, _zoo(), {}).messages
    assert out[1] == {**bare[3], "content": ACK} and out[2] == bare[4] and len(out) == 3


def test_without_a_summary_nothing_changes():
    messages = _session()
    result = qwen_compress(messages, _zoo(summariser=Failing()), {})
    assert result.messages == messages and result.aborted and result.summary_error == "no model"


# ---------------------------------------------------------------- any conversation


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), window=st.sampled_from([1_000, 8_000, 40_000, 1_000_000]), fails=st.booleans())
def test_a_qwen_compaction_leaves_a_valid_conversation_and_its_input_alone(messages, window, fails):
    """Whatever the conversation: the input is not mutated, tool calls keep their results, the system prompt
    stays first, no role-order problem is added (restored files and the request being sent are consecutive user
    turns), and a pass that changed nothing says so."""
    checked_pass(messages, lambda m: qwen_compress(m, _zoo(window, Failing() if fails else None), {}),
                 join_users=True)


def test_the_policy_names_its_strategy_and_cites_its_numbers():
    assert set(POLICY.strategies) == set(POLICY.triggers) == {STRATEGY}
    assert POLICY.fidelity == "reading" and all(c.where for c in POLICY.citations)
