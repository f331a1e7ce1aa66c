"""Properties of the whole pipeline on thousands of generated conversations, for both presets."""

from __future__ import annotations

import copy
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermeslab.core.config import Config
from hermeslab.core.messages import MessageValidationError, repair_messages, text_of, validate_messages
from hermeslab.core.tokens import default_counter, list_estimator
from hermeslab.context.assemble import merge_summary, sanitize_tool_pairs, split_summary, summary_text
from hermeslab.context.budget import derive_budgets
from hermeslab.context.fit import fit_to_budget
from hermeslab.context.pipeline import ORIGINAL_TASK_MAX_CHARS, CompressionState, compress, plan_compression
from hermeslab.policies.loading import apply_preset
from hermeslab.context.turns import first_real_user_index, last_real_user_index
from hermeslab.context.types import is_summary_message
from hermeslab.eval.metrics import role_order_problems

from test_context_conversations import FixedSummariser, conversations, conversations_with_orphans, user

PRESETS = ("seed", "hermes-0.19")
WINDOWS = st.sampled_from([8_000, 16_000, 32_000])
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.data_too_large])


def _cfg(preset: str):
    return apply_preset(Config(), preset).compression


def assert_pairs_complete(messages: list[dict]) -> None:
    """Every call is answered right after its assistant message, and every result answers such a call."""
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message["role"] != "tool", f"tool result at {index} follows no call"
        index += 1
        ids = [c["id"] for c in message.get("tool_calls") or ()]
        answered = []
        while index < len(messages) and messages[index]["role"] == "tool":
            answered.append(messages[index]["tool_call_id"])
            index += 1
        assert sorted(answered) == sorted(ids), f"calls {ids} answered by {answered}"


def user_content_present(messages: list[dict], target: dict) -> bool:
    for message in messages:
        if message["role"] != "user":
            continue
        content = split_summary(message)[1] if is_summary_message(message) else message["content"]
        if content == target["content"]:
            return True
    return False


def _unmerged(message: dict) -> dict:
    """A summary merged ahead of a message stands for that message; any other message for itself."""
    own = split_summary(message)[1] if is_summary_message(message) else None
    if own is None:
        return message
    return {**{k: v for k, v in message.items() if k != "_compressed_summary"}, "content": own}


def user_pairs(messages: list[dict]) -> list[tuple[dict, dict]]:
    """Consecutive user messages, each read as the message it stands for."""
    return [(_unmerged(a), _unmerged(b)) for a, b in itertools.pairwise(messages)
            if a["role"] == b["role"] == "user"]


def opening_task(messages: list[dict]) -> str | None:
    first = first_real_user_index(messages)
    return None if first is None else text_of(messages[first])[:ORIGINAL_TASK_MAX_CHARS]


def check_result(preset: str, original: list[dict], snapshot: list[dict], result, cfg, task: str | None) -> None:
    """All invariants of one compression; ``task`` is the request that opened the conversation."""
    out = result.messages
    assert original == snapshot, "input was modified"
    validate_messages(out)
    assert_pairs_complete(out)
    assert sanitize_tool_pairs(out, missing=cfg.missing_results)[0] == out, "sanitising is not idempotent"
    if original and original[0]["role"] == "system":
        assert out[0]["role"] == "system"
        assert out[0]["content"].startswith(original[0]["content"])
        if preset == "seed":
            assert out[0] == original[0]
    assert all(m["role"] != "system" for m in out[1:])
    latest = last_real_user_index(original)
    if latest is not None and cfg.reinsert_latest_user:
        assert user_content_present(out, original[latest]), "latest real user message lost"
    elif latest is not None:  # Hermes's wrapper rule: some real request always survives
        assert last_real_user_index(out) is not None, "no real user message left"
    estimate = list_estimator(cfg)
    if cfg.refuse_no_gain:
        assert result.tokens_after <= result.tokens_before
        assert estimate(out) <= estimate(original)
    if preset == "seed":
        assert sum(is_summary_message(m) for m in out) <= 1
        already = user_pairs(original)
        assert all(pair in already for pair in user_pairs(out)), "compression put two user messages side by side"
        if task is not None and result.summary_text is not None:
            assert any(task in text_of(m) for m in out), "original task lost"


@pytest.mark.parametrize("preset", PRESETS)
@SETTINGS
@given(messages=conversations(), window=WINDOWS)
def test_compress_invariants(preset, messages, window):
    cfg = _cfg(preset)
    budgets = derive_budgets(cfg, window)
    snapshot = copy.deepcopy(messages)
    result = compress(messages, cfg=cfg, budgets=budgets, state=CompressionState(), summariser=FixedSummariser())
    check_result(preset, messages, snapshot, result, cfg, opening_task(messages))


@pytest.mark.parametrize("preset", PRESETS)
@SETTINGS
@given(messages=conversations(), window=WINDOWS)
def test_plan_is_deterministic_and_pure(preset, messages, window):
    cfg = _cfg(preset)
    budgets = derive_budgets(cfg, window)
    state = CompressionState(compression_count=1, previous_summary="earlier notes")
    snapshot = copy.deepcopy(messages)
    first = plan_compression(messages, cfg=cfg, budgets=budgets, state=state)
    second = plan_compression(messages, cfg=cfg, budgets=budgets, state=state)
    assert messages == snapshot
    assert state == CompressionState(compression_count=1, previous_summary="earlier notes")
    assert (first.boundary, first.decisions, first.pruned, first.span, first.prune_boundary) == (
        second.boundary, second.decisions, second.pruned, second.span, second.prune_boundary)
    if not first.boundary.empty:
        assert 0 <= first.boundary.start < first.boundary.end <= len(messages)
        assert first.pruned[first.boundary.end]["role"] != "tool" if first.boundary.end < len(messages) else True


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rounds=st.lists(conversations(max_turns=3), min_size=2, max_size=3), window=WINDOWS)
def test_repeated_compressions(preset, rounds, window):
    """Compress, let the conversation grow, compress again: the invariants hold every time."""
    cfg = _cfg(preset)
    budgets = derive_budgets(cfg, window)
    state = CompressionState()
    messages = rounds[0]
    task = opening_task(messages)
    for index, more in enumerate(rounds[1:]):
        snapshot = copy.deepcopy(messages)
        result = compress(messages, cfg=cfg, budgets=budgets, state=state, summariser=FixedSummariser())
        check_result(preset, messages, snapshot, result, cfg, task)
        grown = [dict(m, tool_call_id=f"r{index}_{m['tool_call_id']}") if m["role"] == "tool" else m
                 for m in more if m["role"] != "system"]
        for message in grown:
            if message.get("tool_calls"):
                message["tool_calls"] = [dict(c, id=f"r{index}_{c['id']}") for c in message["tool_calls"]]
        messages = result.messages + [user(f"follow-up {index}")] + grown
    snapshot = copy.deepcopy(messages)
    result = compress(messages, cfg=cfg, budgets=budgets, state=state, summariser=FixedSummariser())
    check_result(preset, messages, snapshot, result, cfg, task)


def test_a_pass_that_drops_the_first_request_does_not_let_a_later_summary_name_another_one():
    """Found by ``test_repeated_compressions``: at 8K, a first pass whose summary could not fit dropped the
    oldest messages, the opening request among them, and the next pass's summary quoted the second request as
    the original task. The first request is remembered the first time a pass sees it."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 40}}
    system = {"role": "system", "content": "You are an agent. alpha index patch window error"}

    def call(n: int) -> dict:
        return {"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {
            "name": "terminal", "arguments": '{"command": "alpha", "path": "src/app.py"}'}}]}

    messages = [system, user("Request 0: alpha index patch"),
                {"role": "user", "content": [{"type": "text", "text": "Request 1: build json"}, image]},
                {"role": "assistant", "content": "Done with request 1: build"},
                {"role": "assistant", "content": "One more note: build json query x86 file"},
                user("Request 2: cache kernel"), call(0), {"role": "tool", "tool_call_id": "call_0", "content": "alpha"},
                call(1), {"role": "tool", "tool_call_id": "call_1", "content": "alpha"}]
    later = {"role": "user", "content": [{"type": "text", "text": "Request 0: alpha index"}, image]}
    cfg = _cfg("seed")
    budgets, state = derive_budgets(cfg, 8_000), CompressionState()
    outcomes = []
    for index in range(3):
        snapshot = copy.deepcopy(messages)
        result = compress(messages, cfg=cfg, budgets=budgets, state=state, summariser=FixedSummariser())
        check_result("seed", messages, snapshot, result, cfg, "Request 0: alpha index patch")
        outcomes.append(result.record["outcome"])
        messages = result.messages + [user(f"follow-up {index}"), copy.deepcopy(later)]
    assert "dropped_oldest" in outcomes and "compressed" in outcomes, outcomes
    assert state.original_task == "Request 0: alpha index patch"


@SETTINGS
@given(messages=conversations(), window=st.sampled_from([4_000, 8_000, 16_000]), iterative=st.booleans())
def test_seed_output_never_has_two_user_messages_in_a_row(messages, window, iterative):
    """With no back-to-back user messages in the input there are none in the output, and the request is verbatim."""
    messages = [m for i, m in enumerate(messages) if not (i and m["role"] == messages[i - 1]["role"] == "user")]
    cfg = _cfg("seed")
    state = CompressionState(compression_count=1, previous_summary="earlier notes") if iterative else CompressionState()
    result = compress(messages, cfg=cfg, budgets=derive_budgets(cfg, window), state=state,
                      summariser=FixedSummariser())
    assert user_pairs(result.messages) == []
    latest = last_real_user_index(messages)
    if latest is not None:
        assert user_content_present(result.messages, messages[latest])


@SETTINGS
@given(messages=conversations_with_orphans())
def test_orphan_results_are_rejected_then_repairable(messages):
    """Malformed input is refused with the offending index; repair_messages makes it acceptable."""
    cfg = _cfg("seed")
    budgets = derive_budgets(cfg, 16_000)
    with pytest.raises(MessageValidationError, match="answers no open tool call"):
        plan_compression(messages, cfg=cfg, budgets=budgets, state=CompressionState())
    repaired, report = repair_messages(messages)
    assert report.removed_orphan_results
    result = compress(repaired, cfg=cfg, budgets=budgets, state=CompressionState(), summariser=FixedSummariser())
    check_result("seed", repaired, copy.deepcopy(repaired), result, cfg, opening_task(repaired))


@SETTINGS
@given(messages=conversations(), share=st.floats(0.2, 0.9), carries_request=st.booleans(), data=st.data())
def test_fitting_after_an_overflow_breaks_no_role_order_and_keeps_the_request(messages, share, carries_request,
                                                                              data):
    """The last resort (drop the oldest units, then cut) leaves no two user or assistant messages side by side
    that were not already, and the request being worked on stays verbatim.

    The shape of a recorded seed run at 8K (``trace-context-types``): the opening request, its tool exchange,
    then a handoff summary carrying the latest request; dropping the exchange put two user messages in a row.
    """
    spots = [i for i in range(1, len(messages) + 1)
             if messages[i - 1]["role"] in ("assistant", "tool") and not messages[i - 1].get("tool_calls")
             and (i == len(messages) or messages[i]["role"] != "tool")]
    if not spots:
        return
    at = data.draw(st.sampled_from(spots))
    summary = {"role": "user", "content": summary_text("Earlier work: searched the repository and read files."),
               "_compressed_summary": True}
    if carries_request:
        summary = merge_summary({"role": "user", "content": "now list the summary helpers"}, summary["content"])
    messages = messages[:at] + [summary] + messages[at:]
    count = default_counter.count_message
    result = fit_to_budget(messages, budget_tokens=int(sum(map(count, messages)) * share), estimate=count)
    assert role_order_problems(result.messages) <= role_order_problems(messages)
    assert_pairs_complete([m for m in result.messages if m["role"] != "system"])
    requests = [m for m in messages if m["role"] == "user" and (not is_summary_message(m) or m is summary)]
    latest = requests[-1] if requests and (requests[-1] is not summary or carries_request) else None
    if latest is not None and not result.record["over_budget"]:
        assert user_content_present(result.messages, _unmerged(latest))
