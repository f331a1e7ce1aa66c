"""The context driver: when the loop compresses, and what it does when the provider refuses a prompt."""

from __future__ import annotations

from hermeslab.context.compactor import Compactor
from hermeslab.context.driver import ContextDriver
from hermeslab.policies.loading import load_config
from hermeslab.core.provider import context_overflow

from test_context_conversations import FixedSummariser


def driver(preset: str = "seed", window: int = 8_000, **overrides) -> ContextDriver:
    config = load_config(f"{preset},model.context_length={window}", overrides)
    return ContextDriver(Compactor(config, FixedSummariser()), context_length=window)


def history(turns: int, words: int = 120, first: int = 0) -> list[dict]:
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Audit the code."}]
    for i in range(first, first + turns):
        messages += [{"role": "assistant", "content": f"Reading part {i}.",
                      "tool_calls": [{"id": f"c{i}", "type": "function",
                                      "function": {"name": "read_file", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"part {i} " * words}]
    return messages


def test_the_pressure_check_waits_for_a_reading_after_any_compression():
    context = driver()
    messages = history(30)
    context.begin_turn("Audit the code.")
    context.observe(10, context.measure(messages, None))  # a reading over the threshold
    turn = context.after_tools(messages, None)
    assert turn is not None and turn.changed
    grown = turn.messages + history(30, first=100)[2:]  # still over the threshold by our count
    assert context.measure(grown, None) >= context.compactor.budgets.threshold_tokens
    assert context.before_call(grown, None) is None  # no second compression on an estimate
    context.observe(10, context.measure(grown, None))
    assert context.before_call(grown, None) is not None


def test_the_pressure_check_needs_more_than_one_message():
    context = driver(window=1_100)
    lone = [{"role": "system", "content": "rule " * 2_000}]
    assert context.measure(lone, None) > context.compactor.budgets.threshold_tokens
    assert context.before_call(lone, None) is None


def test_preflight_runs_at_most_three_passes_and_stops_when_a_pass_changes_nothing():
    context = driver()
    messages = history(60)
    context.begin_turn("Audit the code.")
    passes = 0
    while (compaction := context.preflight(messages, None)) is not None:
        passes += 1
        messages = compaction.messages if compaction.changed else messages
    assert 1 <= passes <= 3
    assert context.preflight(messages, None) is None


def test_an_overflow_lowers_the_window_to_the_stated_limit():
    context = driver(window=32_000)
    messages = history(40)
    context.begin_turn("Audit the code.")
    step = context.overflow(messages, None, context_overflow(16_000, 20_000).message, payload_too_large=False,
                            images_stripped=False)
    assert step.lowered_window == 16_000 and context.window == 16_000
    assert step.action == "compress" and step.compactions[-1].changed


def test_without_compression_an_overflow_gives_up_saying_why():
    context = ContextDriver(None, context_length=8_000)
    step = context.overflow(history(3), None, "too long", payload_too_large=False, images_stripped=False)
    assert step.action == "give_up" and "compression is disabled" in step.reason


def test_a_prompt_over_the_window_is_made_to_fit_before_it_is_sent_under_seed_only():
    huge = history(1, words=12_000)
    seed = driver()
    fitted = seed.before_send(huge, None)
    assert fitted is not None and fitted.strategy == "fit_window" and fitted.changed
    assert seed.measure(fitted.messages, None) <= seed.compactor.budgets.threshold_tokens
    assert driver("hermes-0.19").before_send(huge, None) is None


def test_the_overflow_allowance_is_per_call_under_seed_and_per_turn_under_hermes():
    for preset, expected in (("seed", 0), ("hermes-0.19", 1)):
        context = driver(preset, window=32_000)
        context.begin_turn("Audit the code.")
        context.overflow(history(40), None, "maximum context length exceeded", payload_too_large=False,
                         images_stripped=False)
        context.observe(100, 1_000)  # the retried call was answered
        assert context.compactor.policy.overflow_attempts == expected, preset


def test_an_overflow_compression_that_changed_nothing_is_not_run_again_on_the_same_history_under_hermes():
    # Too few messages to summarise, and by our count the prompt fits: the refusal was about something else.
    messages = history(1, words=600)
    for preset, action in (("seed", "retry"), ("hermes-0.19", "give_up")):
        context = driver(preset, window=16_000, **{"compression.fit_on_overflow": False})
        context.begin_turn("Audit the code.")
        assert context.measure(messages, None) < context.window
        step = context.overflow(messages, None, "the input is too long for this model", payload_too_large=False,
                                images_stripped=False)
        assert step.action == action, preset
        assert not any(compaction.changed for compaction in step.compactions)
        if action == "give_up":
            assert step.reason == "the conversation cannot be compressed further"


def test_a_stated_smaller_window_is_still_retried_under_hermes():
    context = driver("hermes-0.19", window=32_000)
    context.begin_turn("Audit the code.")
    step = context.overflow(history(1, words=600), None, context_overflow(16_000, 20_000).message,
                            payload_too_large=False, images_stripped=False)
    assert step.lowered_window == 16_000 and step.action == "retry"
