"""The trigger policy: threshold, anti-thrash across rotation, cooldowns, overflow limits, preflight."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hermeslab.core.config import Config
from hermeslab.context.budget import derive_budgets
from hermeslab.context.pipeline import CompressionState
from hermeslab.context.error_limits import parse_context_limit
from hermeslab.context.policy import CompressionPolicy, made_progress
from hermeslab.policies.loading import apply_preset


@dataclass
class Outcome:
    """The fields the policy reads from a compression result."""

    messages: list
    tokens_before: int
    tokens_after: int
    aborted: bool = False
    condensed: int = 5


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self):
        return self.now


def policy(state=None, preset="seed", clock=None, **overrides):
    config = apply_preset(Config(), preset).with_overrides({f"compression.{k}": v for k, v in overrides.items()})
    budgets = derive_budgets(config.compression, 64_000)  # threshold 51,200
    return CompressionPolicy(config.compression, budgets, state or CompressionState(), clock=clock or Clock())


def test_threshold_and_enabled_switch():
    p = policy()
    assert not p.should_compress(51_199) and p.should_compress(51_200)
    off = policy(enabled=False)
    assert not off.should_compress(99_999) and off.blocked_reason("manual") == "compression disabled"
    with pytest.raises(ValueError, match="unknown trigger 'sometimes'"):
        p.allows("sometimes")


def test_two_ineffective_compressions_switch_automatic_compression_off_across_a_rotation():
    """The verdict lives in the conversation's state, so a new session cannot reset it."""
    state = CompressionState()
    first = policy(state)
    verdict = first.record(Outcome([], 60_000, 58_000), "preflight")  # saved 3%
    assert verdict["ineffective"] and verdict["streak"] == 1 and not state.auto_disabled
    rotated = policy(state)  # the child session builds a new policy on the same state
    verdict = rotated.record(Outcome([], 60_000, 60_000, condensed=0), "pressure")
    assert verdict["reasons"] == ["removed no message"] and state.auto_disabled
    assert not rotated.should_compress(90_000)
    assert rotated.should_compress(90_000, "manual") and rotated.should_compress(0, "overflow")
    rotated.reset_manual()
    assert rotated.should_compress(90_000) and state.ineffective_streak == 0


def test_the_next_real_prompt_reading_judges_an_effective_compression():
    state = CompressionState()
    p = policy(state)
    p.record(Outcome([], 80_000, 40_000), "preflight")
    assert state.awaiting_usage
    p.observe_prompt_tokens(60_000)  # still over the 51,200 threshold
    assert state.ineffective_streak == 1 and not state.awaiting_usage
    p.observe_prompt_tokens(70_000)  # no compression pending: not a strike
    assert state.ineffective_streak == 1
    p.observe_prompt_tokens(30_000)
    assert state.ineffective_streak == 0 and p.last_prompt_tokens == 30_000
    p.record(Outcome([], 80_000, 40_000), "turn")
    p.observe_prompt_tokens(None)  # a response without usage clears the pending verdict
    assert not state.awaiting_usage and state.ineffective_streak == 0


def test_hermes_preset_judges_only_by_the_real_reading():
    p = policy(preset="hermes-0.19")
    assert not p.record(Outcome([], 60_000, 59_900), "preflight")["ineffective"]


def test_an_abort_starts_a_cooldown_that_only_automatic_triggers_respect():
    clock = Clock()
    state = CompressionState()
    p = policy(state, clock=clock)
    verdict = p.record(Outcome([], 60_000, 60_000, aborted=True, condensed=0), "preflight")
    assert verdict["reasons"] == ["aborted"] and not verdict["ineffective"] and state.ineffective_streak == 0
    assert not p.should_compress(90_000)
    assert p.blocked_reason() == "cooling down after a compression without a summary"
    assert p.should_compress(0, "overflow") and p.should_compress(90_000, "manual")
    clock.now += 60
    assert p.should_compress(90_000)


def test_at_most_three_overflow_compressions_per_turn():
    state = CompressionState(auto_disabled=True)  # the breaker never blocks a hard overflow
    p = policy(state)
    for _ in range(3):
        assert p.should_compress(0, "overflow")
        p.record(Outcome([], 60_000, 50_000), "overflow")
    assert not p.should_compress(0, "overflow")
    assert p.blocked_reason("overflow") == "3 overflow compressions already this turn"
    p.begin_turn()
    assert p.should_compress(0, "overflow")


@pytest.mark.parametrize("text, limit", [
    ("This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
     "Please reduce the length of the messages.", 128_000),
    ("prompt is too long: 208310 tokens > 200000 maximum", 200_000),
    ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, "
     "1000 in the completion).", 4_096),
    ("The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that "
     "`max_model_len` is no smaller than the number of text tokens.", 8_192),
    ("Input is too long: max_model_len 32768 exceeded", 32_768),
    ("the request exceeds the available context size (16384 tokens), try increasing it", 16_384),
    ('{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it",'
     '"type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}', 8_192),
    ("Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length", 32_768),
    ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 1_048_576),
    ("Input tokens exceed the configured limit of 272,000 tokens.", 272_000),
    ("Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000", 4_096),
    ("This endpoint's maximum context length is 200000 tokens. However, you requested about 250000 tokens", 200_000),
    ("requested input exceeds the 128k context window", 128_000),
])
def test_context_limits_parsed_from_real_provider_wordings(text, limit):
    assert parse_context_limit(text) == limit


@pytest.mark.parametrize("text", [
    "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, "
    "Requested 2000.",
    "This request would exceed the rate limit of 30000 tokens per minute",
    "This request would exceed your organization's rate limit of 40,000 input tokens per minute",
    "maximum context length is 512 tokens",            # implausibly small
    "maximum context length is 99999999999 tokens",    # implausibly large
    "context length exceeded",                          # no number
    "",
])
def test_no_context_limit_is_read_from_other_errors(text):
    assert parse_context_limit(text) is None


def test_overflow_limit_only_lowers_the_window():
    p = policy()
    assert p.overflow_limit("maximum context length is 32000 tokens", 64_000) == 32_000
    assert p.overflow_limit("maximum context length is 128000 tokens", 64_000) is None
    assert p.overflow_limit("rate limit of 30000 tokens per minute", 64_000) is None


def test_made_progress():
    assert made_progress(10, 1000, 9, 1000)
    assert made_progress(10, 1000, 10, 949)
    assert not made_progress(10, 1000, 10, 950)


def test_preflight_stops_when_under_threshold_or_without_progress():
    p = policy()
    sizes = {"big": 90_000, "smaller": 60_000, "small": 30_000}

    def estimate(messages):
        return sizes[messages[0]]

    steps = iter(["smaller", "small"])

    def compress(messages):
        nxt = next(steps)
        return Outcome([nxt], estimate(messages), sizes[nxt])

    final, passes = p.preflight(["big"], estimate_fn=estimate, compress_fn=compress)
    assert final == ["small"] and len(passes) == 2 and all(x.progressed for x in passes)

    stuck = policy()
    calls = []

    def no_progress(messages):
        calls.append(1)
        return Outcome(list(messages), 90_000, 89_000)

    final, passes = stuck.preflight(["big"], estimate_fn=lambda m: 90_000, compress_fn=no_progress)
    assert len(calls) == 1 and not passes[0].progressed and final == ["big"]


def test_preflight_runs_at_most_three_passes():
    def estimate(messages):
        return 50_000 + 5_000 * len(messages)

    def compress(messages):
        return Outcome(messages[:-1], estimate(messages), estimate(messages[:-1]))

    final, passes = policy(min_saving=0.0).preflight(list(range(10)), estimate_fn=estimate, compress_fn=compress)
    assert len(passes) == 3 and len(final) == 7
    # With the seed's 10% rule each 5% pass is a strike: the breaker stops the loop after two.
    final, passes = policy().preflight(list(range(10)), estimate_fn=estimate, compress_fn=compress)
    assert len(passes) == 2 and len(final) == 8
