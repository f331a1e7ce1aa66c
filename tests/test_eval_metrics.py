"""Metrics of a replay on hand-made runs whose right answers are known, and the price table."""

from __future__ import annotations

import json
import math

import pytest

from hermeslab.context import SUMMARY_PREFIX
from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config
from hermeslab.core.tokens import TokenCounter
from hermeslab.eval import metrics
from hermeslab.eval.metrics import (
    cached_prompt_tokens,
    facts_in,
    measure,
    message_text,
    orphan_tool_messages,
    reply_words,
    retention,
    role_order_problems,
    text_words,
    word_set,
)
from hermeslab.eval.prices import DEFAULT_PRICES, Price, model_key, price_for
from hermeslab.recordings import Recording
from hermeslab.eval.replay import CompressionRecord, ReplayRun, SummaryRecord, replay
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.providers.replay import ServedCall


class TenPerMessage(TokenCounter):
    """Every message costs 10 tokens, so expected numbers can be worked out by hand."""

    def count_message(self, message: dict) -> int:
        return 10


SYSTEM = {"role": "system", "content": "You help with orders."}
ASK = {"role": "user", "content": "Why is my parcel late?"}


def assistant(text: str, call_id: str | None = None) -> dict:
    message = {"role": "assistant", "content": text}
    if call_id:
        message["tool_calls"] = [{"id": call_id, "type": "function",
                                  "function": {"name": "lookup", "arguments": json.dumps({"q": text})}}]
    return message


def tool(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def summary(text: str) -> dict:
    return {"role": "user", "content": f"{SUMMARY_PREFIX}\n{text}"}


def run_of(calls: list[ServedCall], replies: list[dict], compressions=(), **fields) -> ReplayRun:
    values = {"recording_id": "r", "run_id": "run", "config_hash": "abc", "model": "gpt-4.1", "context_length": 8_000,
              "counter": TenPerMessage(), "tool_tokens": 30, "replies": replies, "calls": calls,
              "compressions": list(compressions)}
    values.update(fields)
    return ReplayRun(**values)


# ---------------------------------------------------------------- usage and cost


def cached_scenario() -> ReplayRun:
    a0, t0, a1 = assistant("looking", "c1"), tool("c1", "parcel P-1 is in Leeds"), assistant("still looking", "c2")
    t1 = tool("c2", "no update")
    before = [SYSTEM, ASK, a0, t0, a1, t1]
    after = [SYSTEM, summary("parcel P-1 is in Leeds"), a1, t1]
    calls = [ServedCall(0, [SYSTEM, ASK], 100, 5),
             ServedCall(1, [SYSTEM, ASK, a0, t0], 150, 7),
             ServedCall(2, before, 200, 9),
             ServedCall(3, after, 120, 11)]
    record = CompressionRecord("pressure", 3, before, after, True, False, ASK["content"])
    return run_of(calls, [a0, a1, assistant("x"), assistant("Parcel P-1 is in Leeds.")], [record],
                  summaries=[SummaryRecord(input_tokens=40, output_tokens=12)])


def test_usage_sums_the_calls_and_keeps_the_largest_prompt():
    row = measure(cached_scenario())
    assert (row["api_calls"], row["recorded_calls"]) == (4, 4)
    assert (row["prompt_tokens"], row["peak_prompt_tokens"], row["completion_tokens"]) == (570, 200, 32)
    assert (row["summary_calls"], row["summary_input_tokens"], row["summary_tokens"]) == (1, 40, 12)


def test_failed_turns_are_the_turns_that_ended_without_an_answer():
    statuses = ["completed", "failed", "interrupted", "max_iterations", "completed", "failed"]
    assert measure(run_of([], [], statuses=statuses))["failed_turns"] == 3
    assert measure(run_of([], [], statuses=["completed", "interrupted"]))["failed_turns"] == 0


def test_the_cached_part_of_a_call_is_the_prefix_it_shares_with_the_previous_call():
    # call 1 and 2 extend the previous prompt (all of it is a cache hit); after the compression only the
    # system message is shared, worth the tool schemas plus one 10-token message.
    assert cached_prompt_tokens(cached_scenario()) == 100 + 150 + (30 + 10)


def test_cost_with_and_without_caching_at_the_models_prices():
    prices = {"default": Price(1.0, 0.1, 2.0), "gpt-4.1": Price(10.0, 1.0, 20.0)}
    row = measure(cached_scenario(), prices)
    prompt, cached, output = 570 + 40, 290, 32 + 12
    assert row["cost_usd"] == pytest.approx((prompt * 10.0 + output * 20.0) / 1e6)
    assert row["cost_cached_usd"] == pytest.approx(((prompt - cached) * 10.0 + cached * 1.0 + output * 20.0) / 1e6)
    assert row["price_is_default"] == 0


def test_an_unknown_model_is_priced_with_the_default_and_flagged():
    row = measure(run_of([ServedCall(0, [SYSTEM, ASK], 1_000_000, 0)], [assistant("hi")], model="mystery-7b"))
    assert row["price_is_default"] == 1
    assert row["cost_usd"] == pytest.approx(DEFAULT_PRICES["default"].input)


# ---------------------------------------------------------------- compressions and invariants


def test_compressions_are_counted_by_trigger_and_verdict():
    records = [CompressionRecord(trigger, 0, [SYSTEM, ASK], [SYSTEM, ASK], False, ineffective, None)
               for trigger, ineffective in (("preflight", False), ("turn", True), ("turn", False), ("overflow", True))]
    row = measure(run_of([], [], records))
    assert (row["compressions"], row["ineffective_compressions"]) == (4, 2)
    assert [row[f"compressions_{t}"] for t in ("preflight", "turn", "pressure", "overflow", "manual")] == [1, 2, 0, 1, 0]


def test_an_output_that_loses_the_ask_breaks_pairs_and_order_counts_each_violation():
    a0, t0 = assistant("", "c1"), tool("c1", "ok")
    before = [SYSTEM, ASK, a0, t0, assistant("done")]
    broken = [SYSTEM, summary("earlier work"), {"role": "user", "content": "more"}, t0]
    record = CompressionRecord("turn", 1, before, broken, True, False, ASK["content"])
    row = measure(run_of([], [], [record]))
    assert row["orphan_tool_pairs"] == 1
    assert row["role_order_violations"] == 2  # two user messages in a row, a result after no call
    assert row["latest_user_missing"] == 1
    assert row["invariant_violations"] == 4
    assert (row["task_kept"], row["task_judged"], row["task_survival"]) == (0, 1, 0.0)


def test_task_survival_counts_only_compressions_that_changed_something():
    kept = CompressionRecord("turn", 1, [SYSTEM, ASK, assistant("a")], [SYSTEM, summary("s"), ASK], True, False,
                             ASK["content"])
    unchanged = CompressionRecord("turn", 1, [SYSTEM, ASK], [SYSTEM], False, True, ASK["content"])
    row = measure(run_of([], [], [kept, unchanged]))
    assert (row["task_kept"], row["task_judged"], row["task_survival"]) == (1, 1, 1.0)
    assert math.isnan(measure(run_of([], []))["task_survival"])


def test_orphans_and_order_on_their_own():
    call = assistant("", "c1")
    assert orphan_tool_messages([SYSTEM, ASK, call, tool("c1", "x")]) == 0
    assert orphan_tool_messages([SYSTEM, ASK, call]) == 1
    assert orphan_tool_messages([SYSTEM, tool("c9", "x")]) == 1
    assert role_order_problems([SYSTEM, ASK, call, tool("c1", "x"), assistant("ok")]) == 0
    assert role_order_problems([ASK, SYSTEM, assistant("a"), assistant("b")]) == 2


# ---------------------------------------------------------------- retention


def retention_scenario(summary_text: str, later: str = "Parcel P-4711 left /hubs/leeds.csv at 10:40.") -> ReplayRun:
    a0, t0 = assistant("", "c1"), tool("c1", "Parcel P-4711 scanned; route file /hubs/leeds.csv; the weather is fine")
    before = [SYSTEM, ASK, a0, t0]
    after = [SYSTEM, summary(summary_text), ASK]
    replies = [a0, assistant(later), assistant("Also P-4711 again, and /hubs/leeds.csv.")]
    calls = [ServedCall(0, [SYSTEM, ASK], 50, 5), ServedCall(1, after, 40, 5), ServedCall(2, after + [replies[1]], 45, 5)]
    return run_of(calls, replies, [CompressionRecord("pressure", 1, before, after, True, False, ASK["content"])])


def test_a_fact_summarised_away_and_used_later_counts_as_lost():
    retained, at_risk = retention(retention_scenario("Looked the parcel up."))
    assert (retained, at_risk) == (0, 2)  # P-4711 and /hubs/leeds.csv, each judged at its first later use only
    row = measure(retention_scenario("Looked the parcel up."))
    assert (row["facts_retained"], row["facts_at_risk"], row["retention"]) == (0, 2, 0.0)


def test_a_fact_the_summary_kept_counts_as_retained():
    assert retention(retention_scenario("Parcel P-4711, route /hubs/leeds.csv.")) == (2, 2)
    assert retention(retention_scenario("Parcel P-4711 only.")) == (1, 2)


def test_facts_never_used_again_or_not_key_facts_are_not_counted():
    run = retention_scenario("nothing kept", later="The weather is fine, it is on its way.")
    run.replies[2] = assistant("Done.")
    assert retention(run) == (0, 0)
    assert math.isnan(measure(run)["retention"])


def test_candidate_facts_of_recorded_texts_are_remembered_per_text_and_per_reply():
    reply = {"role": "assistant", "content": "Check P-4711.",
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"id": "P-4711"}'}}]}
    words = reply_words(reply)
    assert word_set(message_text(reply)) == {"Check", "P-4711", "id"}
    assert words == {"P-4711"}  # the plain words are never facts
    assert reply_words({**reply}) is words  # another reply carrying the same recorded content and calls
    assert reply_words({**reply, "tool_calls": [dict(reply["tool_calls"][0])]}) is not words
    assert text_words("see /hubs/leeds.csv.") == {"/hubs/leeds.csv"}
    assert text_words("see " + "/hubs/leeds.csv.") is text_words("see /hubs/leeds.csv.")


def test_retention_is_the_same_when_every_word_is_a_candidate(monkeypatch):
    """Dropping the plain words (never facts) before the sets are compared changes no count."""
    config = apply_preset(Config(), "seed").with_overrides({"model.context_length": 3_000})
    runs = [replay(parcel_recording(), config, summariser=FixedSummariser(text))
            for text in ("Looked things up.", "Parcel P-4711 is held at depot D-0815.")]
    runs += [retention_scenario("nothing kept"), retention_scenario("P-4711 was at the hub")]
    candidates = [retention(run) for run in runs]
    assert any(at_risk for _, at_risk in candidates)
    monkeypatch.setattr(metrics, "candidate_words", lambda text: frozenset(metrics._words(text)))
    monkeypatch.setattr(metrics, "_TEXT_WORDS", {})
    monkeypatch.setattr(metrics, "_REPLY_WORDS", {})
    assert [retention(run) for run in runs] == candidates


def test_words_become_facts_only_when_the_entity_extractor_recognises_them():
    found = facts_in('See "src/app.py", order_4711, then 1,250 items (v2.3.1): the end.')
    assert set(found) == {"src/app.py", "order_4711", "1,250", "v2.3.1"}


# ---------------------------------------------------------------- end to end


def parcel_recording() -> Recording:
    call = {"id": "c0", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": "parcel"})}}
    messages = [SYSTEM, ASK, {"role": "assistant", "content": "", "tool_calls": [call]},
                tool("c0", "Looking the parcel up.")]
    for i in range(1, 9):
        step = {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": i})}}
        found = "Parcel P-4711 is held at depot D-0815. " if i == 1 else ""
        messages += [{"role": "assistant", "content": f"Checking source {i}.", "tool_calls": [step]},
                     tool(f"c{i}", f"source {i}: {found}" + "nothing new " * 150)]
    messages.append({"role": "assistant", "content": "Parcel P-4711 is held at depot D-0815."})
    return Recording(id="parcel", messages=messages, model="gpt-4.1")


def test_a_replay_that_summarises_a_fact_away_loses_it_and_one_that_keeps_it_does_not():
    config = apply_preset(Config(), "seed").with_overrides({"model.context_length": 3_000})
    lost = measure(replay(parcel_recording(), config, summariser=FixedSummariser("Looked things up.")))
    kept = measure(replay(parcel_recording(), config,
                          summariser=FixedSummariser("Parcel P-4711 is held at depot D-0815.")))
    assert lost["compressions"] > 0 and lost["deviations"] == 0
    assert lost["facts_at_risk"] >= 2 and lost["retention"] < 1
    assert kept["facts_at_risk"] >= 2 and kept["retention"] == 1.0


def test_measure_needs_a_replay_run():
    with pytest.raises(TypeError, match="ReplayRun"):
        measure({"calls": []})


# ---------------------------------------------------------------- prices


@pytest.mark.parametrize("model, key", [
    ("gpt-4o", "gpt-4o"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("google/gemini-3-pro-preview", "gemini-3-pro-preview"),
    ("ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm", "ft:gpt-4.1"),
    ("GPT-4.1-Mini", "gpt-4.1-mini"),
])
def test_model_names_are_normalised_to_table_keys(model, key):
    assert model_key(model) == key
    assert price_for(model) == (DEFAULT_PRICES[key], False)


def test_the_recorded_models_of_the_shared_files_all_have_prices():
    for model in ("gpt-4o", "gpt-4.1", "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm",
                  "google/gemini-3-pro-preview"):
        assert price_for(model)[1] is False
    assert price_for(None) == (DEFAULT_PRICES["default"], True)


def test_a_price_table_needs_a_default_and_prices():
    with pytest.raises(ValueError, match="'default' entry"):
        price_for("gpt-4o", {"gpt-4o": Price(1, 1, 1)})
    with pytest.raises(TypeError, match="must be a Price"):
        price_for("gpt-4o", {"default": Price(1, 1, 1), "gpt-4o": 2.5})
    with pytest.raises(ValueError, match="Price.output"):
        Price(1.0, 0.5, -3)
