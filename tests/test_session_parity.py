"""Whole-session parity of hermes-0.19 with Hermes 0.19.0's own agent triggers, and the switches behind it.

The unit tests pin what each switch does on small hand-made conversations;
the slow tests replay shared recordings through the real Hermes in its venv
(``HermesReference.agent_replay_many``) and through hermeslab, and compare the
sessions (``hermeslab.eval.session_parity``). They are skipped without the
venv or the data, and fail then under ``CI=true`` (``tests/shared_data.py``).
"""

from __future__ import annotations

import json

import pytest

from hermeslab.context.compactor import Compactor
from hermeslab.context.driver import ContextDriver
from hermeslab.context.pipeline import NO_USER_PLACEHOLDER, ensure_real_user_turn
from hermeslab.policies.loading import load_config
from hermeslab.policies.loading import preset_values
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.reference.worker.message_digest import compared, view

NEW_SWITCHES = ("system_in_pipeline", "reinsert_latest_user", "refuse_no_gain", "defer_to_real_usage",
                "pressure_every_call", "pressure_counts_against_overflow", "preflight_gate",
                "preflight_system_as_text", "overflow_obeys_breaker", "breaker_rearms", "long_summary_frame",
                "ground_task_snapshot", "apply_any_change", "judge_by_estimate", "merged_summary_last",
                "usage_gap_settles_verdict")


def test_each_new_switch_keeps_seed_and_takes_hermes_value_in_hermes_preset():
    seed, hermes = preset_values("seed"), preset_values("hermes-0.19")
    seed_values = {"system_in_pipeline": True, "reinsert_latest_user": True, "refuse_no_gain": True,
                   "judge_by_estimate": True}
    for name in NEW_SWITCHES:
        expected_seed = seed_values.get(name, False)
        assert seed[f"compression.{name}"] is expected_seed, name
        assert hermes[f"compression.{name}"] is (not expected_seed), name
        assert getattr(load_config("seed").compression, name) is expected_seed, name


def _conversation(turns: int, size: int = 900) -> list[dict]:
    messages = [{"role": "system", "content": "You are a test agent."}, {"role": "user", "content": "do the task"}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"n": i})}}
        messages += [{"role": "assistant", "content": f"step {i}", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i} " + "x" * size}]
    return messages


def _compactor(spec: str) -> Compactor:
    return Compactor(load_config(spec), FixedSummariser())


def test_system_message_held_apart_comes_back_unchanged_and_gets_no_note():
    messages = _conversation(30)
    on = _compactor("hermes-0.19,model.context_length=16000,compression.system_in_pipeline=true")
    off = _compactor("hermes-0.19,model.context_length=16000")
    noted = on.run(messages, trigger="pressure").messages
    apart = off.run(messages, trigger="pressure").messages
    assert noted[0]["content"] != messages[0]["content"]  # the system note of the head
    assert apart[0] is messages[0]
    assert sum(m.get("role") == "system" for m in apart) == 1


def test_ensure_real_user_turn_follows_hermes_wrapper():
    original = [{"role": "user", "content": "the request"}, {"role": "assistant", "content": "ok"}]
    summary_then_reply = [{"role": "user", "content": "[CONTEXT SUMMARY]: s", "_compressed_summary": True},
                          {"role": "assistant", "content": "a"}, {"role": "tool", "tool_call_id": "x", "content": "r"}]
    kept, added = ensure_real_user_turn(original, [{"role": "user", "content": "the request"}])
    assert not added and kept == [{"role": "user", "content": "the request"}]
    out, added = ensure_real_user_turn(original, [{"role": "assistant", "content": "a"}])
    assert added and out[0] == {"role": "user", "content": "the request"}
    out, added = ensure_real_user_turn(original, summary_then_reply[:1])
    assert added and out[-1]["content"] == "the request"  # appended after a trailing summary
    out, added = ensure_real_user_turn([], [{"role": "assistant", "content": "a"}])
    assert out[0]["content"] == NO_USER_PLACEHOLDER or out[-1]["content"] == NO_USER_PLACEHOLDER


def test_reinsert_latest_user_off_adds_nothing_when_an_older_request_survives():
    messages = _conversation(30)
    messages[-2:-2] = [{"role": "user", "content": "a later request"}]
    messages.insert(-2, {"role": "assistant", "content": "noted"})
    compactor = _compactor("hermes-0.19,model.context_length=16000")
    out = compactor.run(messages, trigger="pressure").messages
    assert compactor.cfg.reinsert_latest_user is False
    assert sum(m.get("content") == "a later request" for m in out) <= 1


def test_refuse_no_gain_off_applies_the_result():
    cfg = load_config("hermes-0.19").compression
    assert cfg.refuse_no_gain is False and load_config("seed").compression.refuse_no_gain is True


def _driver(spec: str) -> ContextDriver:
    config = load_config(spec)
    return ContextDriver(Compactor(config, FixedSummariser()), context_length=config.model.context_length)


def test_defer_to_real_usage_defers_while_a_reading_is_awaited_and_after_a_fitting_one():
    driver = _driver("hermes-0.19,model.context_length=16000")
    threshold = driver.compactor.budgets.threshold_tokens
    driver.awaiting_reading = True
    assert driver._defer(threshold) is True
    driver.awaiting_reading = False
    driver._rough_after_compression = threshold - 1000
    driver.observe(threshold - 500, threshold - 500)  # a reading that fit
    assert driver._defer(threshold + 100) is True  # grew by less than max(4096, 5%)
    assert driver._defer(threshold + 5000) is False
    driver.observe(threshold + 10, threshold + 10)  # a reading over the threshold: never defer
    assert driver._defer(threshold + 100) is False


def test_pressure_every_call_and_shared_counter():
    history = _conversation(40, size=2000)
    seed_like = _driver("hermes-0.19,model.context_length=16000,compression.pressure_every_call=false")
    assert seed_like.before_call(history, None, first=True) is None
    driver = _driver("hermes-0.19,model.context_length=16000")
    assert driver.before_call(history, None, first=True) is not None
    assert driver.compactor.policy.overflow_attempts == 1
    driver.compactor.policy.overflow_attempts = driver.compactor.cfg.max_overflow_attempts
    driver.awaiting_reading = False
    assert driver.before_call(history, None) is None  # the turn's allowance is spent


def test_preflight_gate_skips_short_histories_and_system_as_text_counts_chars():
    short = [{"role": "system", "content": "s" * 400_000}, {"role": "user", "content": "hi"}]
    gated = _driver("hermes-0.19,model.context_length=16000")
    ungated = _driver("hermes-0.19,model.context_length=16000,compression.preflight_gate=false")
    gated.begin_turn("hi")
    ungated.begin_turn("hi")
    assert gated.preflight(short, None) is None
    assert ungated.request_rough(short, None) == 100_000 + ungated.request_rough(short[1:], None)
    assert ungated.preflight(short, None) is not None  # over the threshold, nothing gates it


def test_long_summary_frame_has_hermes_sizes_and_reads_back():
    from hermeslab.context.assemble import assemble, split_summary
    from hermeslab.context.types import (LONG_SUMMARY_END_MARKER, LONG_SUMMARY_PREFIX, SUMMARY_END_MARKER,
                                         SUMMARY_PREFIX, is_summary_message)
    from hermeslab.core.tokens import text_counter

    # Hermes 0.19.0's prefix and marker are 1,632 and 84 characters (what its chars/4 decisions see); in
    # tokens 344 and 17 (cl100k_base), 345 and 18 (o200k_base). Ours, in our own words, match the
    # characters and the cl100k_base tokens exactly; o200k_base still counts the prefix 5 short.
    assert (len(LONG_SUMMARY_PREFIX), len(LONG_SUMMARY_END_MARKER)) == (1_632, 84)
    for encoding, (prefix, marker), slack in (("cl100k_base", (344, 17), 0), ("o200k_base", (345, 18), 5)):
        count = text_counter(encoding)[0]
        assert abs(count(LONG_SUMMARY_PREFIX) - prefix) <= slack and count(LONG_SUMMARY_END_MARKER) == marker
    head = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "on it"}]
    tail = [{"role": "assistant", "content": "next"}]
    for spec, prefix, marker in (("hermes-0.19", LONG_SUMMARY_PREFIX, LONG_SUMMARY_END_MARKER),
                                 ("seed", SUMMARY_PREFIX, SUMMARY_END_MARKER)):
        out, _ = assemble(head, "## Goal\nbody", tail, cfg=load_config(spec).compression)
        summary = next(m for m in out if m.get("_compressed_summary"))
        assert summary["content"] == f"{prefix}\n## Goal\nbody\n\n{marker}", spec
        assert is_summary_message({"role": "user", "content": summary["content"]})
        assert split_summary(summary) == ("## Goal\nbody", None)


def test_ground_task_snapshot_quotes_the_newest_real_request():
    from hermeslab.context.summary import SNAPSHOT_CUT_MARK, SNAPSHOT_MAX_CHARS, ground_task_snapshot

    body = "## Historical Task Snapshot\nwhatever the model wrote\n\n## Goal\ng"
    span = [{"role": "user", "content": "old ask"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "new   ask\nplease"}, {"role": "assistant", "content": "done"}]
    grounded = ground_task_snapshot(body, span)
    assert "whatever the model wrote" not in grounded and "'new ask please'" in grounded
    assert grounded.endswith("\n\n## Goal\ng") and grounded.startswith("## Historical Task Snapshot\n")
    assert ground_task_snapshot("## Goal\ng", span).startswith("## Historical Task Snapshot\n")
    assert ground_task_snapshot(body, [{"role": "assistant", "content": "x"}]) == body
    long = ground_task_snapshot(body, [{"role": "user", "content": "y" * 5_000}])
    assert repr("y" * (SNAPSHOT_MAX_CHARS - len(SNAPSHOT_CUT_MARK)) + SNAPSHOT_CUT_MARK) in long
    # Through the pipeline: only hermes-0.19 grounds the summary.
    messages = _conversation(30, size=2000)
    messages.insert(6, {"role": "user", "content": "second ask"})  # after a tool result, inside the span
    messages.insert(51, {"role": "user", "content": "third ask"})  # the latest request anchors the tail
    for spec, grounded in (("hermes-0.19", True), ("seed", False)):
        out = _compactor(f"{spec},model.context_length=16000").run(messages, trigger="pressure").messages
        summary = next(m for m in out if m.get("_compressed_summary"))
        assert ("'second ask'" in summary["content"]) is grounded, spec


def test_overflow_obeys_breaker_and_breaker_rearms():
    for spec, hermes in (("hermes-0.19", True), ("seed", False)):
        policy = _compactor(f"{spec},model.context_length=16000").policy
        threshold = policy.budgets.threshold_tokens
        for _ in range(policy.cfg.ineffective_limit):
            policy.state.awaiting_usage = True
            policy.observe_prompt_tokens(threshold + 1)  # a compression that did not clear the threshold
        assert not policy.allows("pressure")
        assert policy.allows("overflow") is (not hermes), spec
        policy.observe_prompt_tokens(threshold - 1)  # a reading that fits
        assert policy.allows("pressure") is hermes, spec


def _fixed_strategy(compactor: Compactor, messages: list[dict], outcome: str, condensed: int) -> None:
    """Make ``compactor`` return ``messages`` as its strategy's result, with that outcome."""
    from types import SimpleNamespace

    result = SimpleNamespace(messages=messages, tokens_before=10_000, tokens_after=10_400, aborted=False,
                             condensed=condensed, record={"outcome": outcome, "latest_user": {"reinserted": False}})
    compactor._strategy = lambda *_args: result


def test_apply_any_change_applies_what_differs_and_judges_nothing_to_summarise_at_once():
    messages = _conversation(3)
    pruned = [*messages[:3], {**messages[3], "content": "[one line]"}, *messages[4:]]
    for spec, applied in (("hermes-0.19", True), ("hermes-0.19,compression.apply_any_change=false", False)):
        compactor = _compactor(f"{spec},model.context_length=16000")
        _fixed_strategy(compactor, pruned[1:], "nothing_to_summarise", 0)
        compaction = compactor.run(messages, trigger="turn")
        assert compaction.changed is applied and compaction.messages[1:] == pruned[1:], spec
        assert compaction.verdict["reasons"] == ["removed no message"] and not compactor.state.awaiting_usage
    compactor = _compactor("hermes-0.19,model.context_length=16000")
    _fixed_strategy(compactor, messages[1:], "compressed", 2)  # a summary that came out as the input
    compaction = compactor.run(messages, trigger="turn")
    assert not compaction.changed and not compaction.verdict["ineffective"] and not compactor.state.awaiting_usage


def test_judge_by_estimate_off_leaves_a_grown_compaction_to_the_next_reading():
    for spec, strike in (("hermes-0.19", False), ("hermes-0.19,compression.judge_by_estimate=true", True)):
        compactor = _compactor(f"{spec},model.context_length=16000")
        _fixed_strategy(compactor, _conversation(2)[1:], "compressed", 3)  # 10,000 -> 10,400 tokens
        verdict = compactor.run(_conversation(3), trigger="pressure").verdict
        assert verdict["ineffective"] is strike and compactor.state.awaiting_usage is (not strike), spec
    policy = _compactor("hermes-0.19,model.context_length=16000").policy
    from types import SimpleNamespace
    empty_span = SimpleNamespace(tokens_before=10, tokens_after=12, aborted=False, condensed=0,
                                 record={"outcome": "compressed"})
    assert not policy.record(empty_span, "turn")["ineffective"] and policy.state.awaiting_usage


def test_merged_summary_last_puts_the_own_text_first_under_header_and_reads_back():
    from hermeslab.context.assemble import assemble, split_summary, summary_text
    from hermeslab.context.types import MERGED_OWN_DELIMITER, MERGED_OWN_HEADER, is_summary_message
    from hermeslab.core.tokens import text_counter

    # Hermes 0.19.0's header and delimiter are 55 and 49 characters, 14/15 and 13/13 tokens (cl100k/o200k).
    assert (len(MERGED_OWN_HEADER), len(MERGED_OWN_DELIMITER)) == (55, 49)
    for encoding, sizes in (("cl100k_base", (14, 13)), ("o200k_base", (15, 13))):
        count = text_counter(encoding)[0]
        assert (count(MERGED_OWN_HEADER), count(MERGED_OWN_DELIMITER)) == sizes, encoding
    head = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "on it"}]
    tail = [{"role": "user", "content": "the next ask"}]  # the head forces user, the tail holds user: merged
    for spec, own_first in (("hermes-0.19", True), ("seed", False)):
        cfg = load_config(spec).compression
        out, record = assemble(head, "## Goal\nbody", tail, cfg=cfg)
        merged, text = out[-1], summary_text("## Goal\nbody", long_frame=cfg.long_summary_frame)
        assert record["summary_role"] == "merged" and merged["_compressed_summary"]
        expected = (f"{MERGED_OWN_HEADER}\nthe next ask\n\n{MERGED_OWN_DELIMITER}\n\n{text}" if own_first
                    else f"{text}\n\nthe next ask")
        assert merged["content"] == expected, spec
        assert split_summary(merged) == ("## Goal\nbody", "the next ask")
        assert is_summary_message({"role": "user", "content": merged["content"]})
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    out, _ = assemble(head, "b", [{"role": "user", "content": parts}], cfg=load_config("hermes-0.19").compression)
    assert split_summary(out[-1]) == ("b", parts)
    assert is_summary_message({"role": "user", "content": out[-1]["content"]})
    assert not is_summary_message({"role": "user", "content": f"{MERGED_OWN_HEADER}\nno delimiter follows"})


def test_unnamed_duplicate_reference_costs_what_hermes_marker_costs():
    from hermeslab.context.prune import prune_messages
    from hermeslab.core.tokens import text_counter

    calls = [{"id": f"d{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}} for i in range(2)]
    repeated = "the same file text\n" * 30
    messages = [{"role": "user", "content": "read it twice"}, {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "tool_call_id": "d0", "content": repeated},
                {"role": "tool", "tool_call_id": "d1", "content": repeated}]
    pruned, _ = prune_messages(messages, prune_boundary=len(messages), cfg=load_config("hermes-0.19").compression,
                               head_end=0)
    reference = pruned[2]["content"]
    # Hermes 0.19.0's marker: 60 characters, 13 tokens in cl100k_base and in o200k_base.
    assert reference != repeated and len(reference) == 60
    assert all(text_counter(encoding)[0](reference) == 13 for encoding in ("cl100k_base", "o200k_base"))


def test_usage_gap_settles_the_verdict_and_the_turn_check_estimates():
    history = _conversation(40, size=2000)
    for spec, settles in (("hermes-0.19", True), ("hermes-0.19,compression.usage_gap_settles_verdict=false", False)):
        driver = _driver(f"{spec},model.context_length=16000")
        compaction = driver.run(history, "pressure", None)
        assert compaction.changed and driver.awaiting_reading and driver.compactor.state.awaiting_usage
        driver.observe(5_000, None)  # the compacted prompt's reply carried no usage
        assert driver.compactor.state.awaiting_usage is (not settles), spec
        assert driver.last_prompt_tokens == (0 if settles else None), spec
        # The per-turn check then measures the (uncompressed) history by Hermes's rough estimate.
        assert (driver.after_tools(history, None) is not None) is settles, spec


def test_compare_names_the_first_difference_and_the_compression_applied_on_one_side_only():
    from hermeslab.eval.session_parity import compare

    def run(compressions, total, billed=(330, 330, 340)):
        return {"calls": [{"prompt_tokens": tokens} for tokens in billed], "prompt_tokens_total": total,
                "compressions": [{"call": call, "trigger": trigger, "output_len": size, "changed": changed,
                                  **compared([{"role": "user", "content": f"m{i}"} for i in range(size)])}
                                 for call, trigger, size, changed in compressions]}

    ours = run([(2, "turn", 9, False), (2, "pressure", 9, True)], 990)
    hermes = run([(2, "turn", 9, True), (3, "turn", 11, True)], 1_000)
    verdict = compare(ours, hermes)
    assert not verdict["identical"] and not verdict["content_identical"] and verdict["total_diff_pct"] == -1.0
    assert verdict["first_difference"] == {"index": 1, "hermeslab": (2, "pressure", 9), "hermes": (3, "turn", 11),
                                           "applied_differs_at": 0}
    same = compare(hermes, hermes)
    assert same["identical"] and same["content_identical"] and same["first_difference"] is None
    assert same["first_content_difference"] is None and same["total_diff_pct"] == 0.0


def test_content_parity_compares_every_output_message_and_every_billed_prompt():
    from hermeslab.eval.session_parity import compare

    def run(messages, billed):
        return {"calls": [{"prompt_tokens": tokens} for tokens in billed], "prompt_tokens_total": sum(billed),
                "compressions": [{"call": 1, "trigger": "pressure", "output_len": len(messages), "changed": True,
                                  **compared(messages)}]}

    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path":"."}'}}
    kept = [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt", "_internal": True}]
    hermes = run([{k: v for k, v in m.items() if k != "_internal"} for m in kept], [100, 120])
    assert compare(run(kept, [100, 120]), hermes)["content_identical"]  # in-process keys do not count
    changes = [
        (1, {**kept[1], "tool_calls": [{**call, "function": {"name": "ls", "arguments": '{"path": "."}'}}]}),
        (1, {**kept[1], "tool_calls": [{**call, "id": "c2"}]}),
        (2, {**kept[2], "tool_call_id": "c9"}),
        (0, {**kept[0], "role": "assistant"}),
        (0, {**kept[0], "content": "summary "}),
    ]
    for index, changed in changes:
        ours = run(kept[:index] + [changed] + kept[index + 1:], [100, 120])
        verdict = compare(ours, hermes)
        assert verdict["identical"] and not verdict["content_identical"]
        assert verdict["first_content_difference"]["message"] == index
        assert verdict["first_content_difference"]["hermes"] == view(kept[index])
    billed = compare(run(kept, [100, 121]), hermes)
    assert billed["identical"] and not billed["content_identical"]
    assert billed["first_content_difference"] == {"billed_call": 1, "hermeslab": 121, "hermes": 120}


# ---------------------------------------------------------------- against the real Hermes


@pytest.mark.slow
def test_sessions_match_hermes_on_a_sample(monkeypatch):
    from shared_data import dataset, hermes_venv

    from hermeslab.context.hermes_texts import SWITCH_ENV_VAR, installed_texts

    from hermeslab.eval.session_parity import compare, hermeslab_session, planned_session, session_encoding
    from hermeslab.recordings import Recording
    from hermeslab.reference.client import HermesReference

    venv = hermes_venv()
    monkeypatch.delenv(SWITCH_ENV_VAR)  # Hermes's own texts, from the install the worker runs
    monkeypatch.setenv("HERMESLAB_HERMES_VENV", str(venv))
    installed_texts.cache_clear()
    files = {"tau2_bench_gpt41.jsonl": 16_000, "mini_swe_agent_gemini3pro_swebv.jsonl": 32_000}
    with HermesReference(venv, timeout=600) as worker:
        for name, window in files.items():
            with dataset(name).open(encoding="utf-8") as handle:
                recordings = [Recording.from_dict(json.loads(line)) for line, _ in zip(handle, range(40))]
            config = load_config(f"hermes-0.19,model.context_length={window}")
            theirs = worker.agent_replay_many([planned_session(r) for r in recordings], context_length=window,
                                              encoding=session_encoding(recordings[0]))
            verdicts = [compare(hermeslab_session(r, config), h) for r, h in zip(recordings, theirs)]
            same = sum(v["identical"] for v in verdicts)
            # Message for message and call for call too (with Hermes's own texts, read from the same install).
            assert sum(v["content_identical"] for v in verdicts) >= 0.99 * len(verdicts), (
                name, [v["first_content_difference"] for v in verdicts if not v["content_identical"]][:3])
            # The target of the full benchmark: all but one in a hundred identical (40 of 40 here), and
            # every prompt-token total within a tenth of a percent of Hermes's.
            assert same >= 0.99 * len(verdicts), (name, same, [v["first_difference"] for v in verdicts
                                                               if not v["identical"]][:3])
            assert max(abs(v["total_diff_pct"]) for v in verdicts) <= 0.1, name
            # Sessions that never compress are billed identically on both sides.
            for verdict, run in zip(verdicts, theirs):
                if not run["compressions"] and verdict["identical"]:
                    assert verdict["prompt_tokens_hermeslab"] == verdict["prompt_tokens_hermes"]
