"""The recovery chain's decisions and the backoff, without any provider or sleep."""

from __future__ import annotations

import random

import pytest

from hermeslab.core.config import Config, ConfigError, RecoveryConfig
from hermeslab.core.provider import ProviderError
from hermeslab.recovery import CallState, ProviderSlot, RecoveryChain, backoff_delay, classify, retry_delay


class Named:
    def __init__(self, name: str):
        self.name = name


def slot(name: str) -> ProviderSlot:
    return ProviderSlot(Named(name), f"{name}-model")  # type: ignore[arg-type]


def chain(*fallbacks: str, refresh=None, retries: int = 3, **cfg) -> RecoveryChain:
    return RecoveryChain(RecoveryConfig(**cfg), slot("primary"), [slot(f) for f in fallbacks], max_retries=retries,
                         refresh=refresh, rng=random.Random(1))


def fault(status: int | None, message: str = "failure", **kwargs):
    return classify(ProviderError(message, status=status, **kwargs))


def test_backoff_doubles_up_to_the_cap_and_adds_at_most_half_as_jitter():
    rng = random.Random(3)
    for attempt, floor in [(1, 2.0), (2, 4.0), (3, 8.0), (6, 60.0), (12, 60.0)]:
        delays = [backoff_delay(attempt, base=2.0, cap=60.0, rng=rng) for _ in range(50)]
        assert all(floor <= d <= 1.5 * floor for d in delays)
        assert len(set(delays)) > 1
    with pytest.raises(ValueError, match="attempt counts from 1"):
        backoff_delay(0, base=2.0, cap=60.0, rng=rng)


def test_a_zero_base_waits_the_cap_instead_of_retrying_back_to_back():
    rng = random.Random(4)
    for attempt in (1, 2, 5):
        assert all(60.0 <= backoff_delay(attempt, base=0.0, cap=60.0, rng=rng) <= 90.0 for _ in range(20))
    assert backoff_delay(1, base=0.0, cap=60.0, jitter=0.0) == 60.0
    assert backoff_delay(1, base=-1.0, cap=5.0, jitter=0.0) == 5.0
    assert backoff_delay(10_000, base=2.0, cap=60.0, jitter=0.0) == 60.0  # no float overflow far out


def test_retry_after_is_honoured_up_to_its_cap():
    cfg = RecoveryConfig()
    rng = random.Random(0)
    assert retry_delay(fault(429, retry_after=12.0), 1, cfg, rng) == 12.0
    assert retry_delay(fault(429, retry_after=3600.0), 1, cfg, rng) == 600.0
    assert 2.0 <= retry_delay(fault(429), 1, cfg, rng) <= 3.0


def test_transient_faults_retry_with_growing_pauses_then_give_up_with_advice():
    recovery = chain(retries=3)
    call = CallState()
    decisions = [recovery.after_failure(fault(500), call) for _ in range(4)]
    assert [d.action for d in decisions] == ["retry", "retry", "retry", "give_up"]
    assert decisions[0].delay < decisions[1].delay < decisions[2].delay
    assert "server errors" in decisions[3].reason and "after 4 attempts" in decisions[3].reason


def test_overloaded_prefers_the_fallback_after_two_failures():
    recovery = chain("backup")
    call = CallState()
    assert recovery.after_failure(fault(529), call).action == "retry"
    decision = recovery.after_failure(fault(529), call)
    assert decision.action == "fallback" and "primary/primary-model to backup/backup-model" in decision.reason
    assert recovery.active.model == "backup-model" and call.failures == 0
    recovery.begin_turn()
    assert recovery.active.model == "primary-model"


def test_server_errors_fall_back_only_when_retries_are_spent():
    recovery = chain("backup", retries=2)
    call = CallState()
    assert [recovery.after_failure(fault(502), call).action for _ in range(3)] == ["retry", "retry", "fallback"]


@pytest.mark.parametrize("status, message", [(401, "bad key"), (403, "spending limit reached, see billing"),
                                             (404, "The model `x` does not exist")])
def test_permanent_faults_give_up_at_once_without_fallback_and_switch_with_one(status, message):
    assert chain().after_failure(fault(status, message), CallState()).action == "give_up"
    recovery = chain("backup")
    assert recovery.after_failure(fault(status, message), CallState()).action == "fallback"
    assert recovery.active.model == "backup-model"


def test_credentials_are_refreshed_once_per_turn():
    calls = []

    def refresh(provider):
        calls.append(provider.name)
        return Named("primary-renewed")

    recovery = chain(refresh=refresh)
    call = CallState()
    decision = recovery.after_failure(fault(401, "bad key"), call)
    assert decision.action == "refresh" and recovery.primary.provider.name == "primary-renewed"
    assert recovery.after_failure(fault(401, "bad key"), call).action == "give_up"
    recovery.begin_turn()
    assert recovery.after_failure(fault(401, "bad key"), CallState()).action == "refresh"
    assert calls == ["primary", "primary-renewed"]


def test_a_refresh_that_finds_no_credential_moves_on_down_the_chain():
    recovery = chain("backup", refresh=lambda provider: None)
    assert recovery.after_failure(fault(401, "bad key"), CallState()).action == "fallback"


def test_a_rate_limit_earns_the_refresh_only_when_it_repeats():
    recovery = chain(refresh=lambda provider: Named("other-key"))
    call = CallState()
    assert recovery.after_failure(fault(429), call).action == "retry"
    assert recovery.after_failure(fault(429), call).action == "refresh"


def test_a_rate_limit_switches_to_the_fallback_at_once_when_no_refresh_can_help():
    recovery = chain("backup")
    decision = recovery.after_failure(fault(429, "Rate limit reached"), CallState())
    assert decision.action == "fallback" and recovery.active.model == "backup-model"
    assert chain().after_failure(fault(429, "Rate limit reached"), CallState()).action == "retry"


def test_a_rate_limit_tries_the_refresh_before_the_fallback():
    recovery = chain("backup", refresh=lambda provider: Named("other-key"))
    call = CallState()
    assert [recovery.after_failure(fault(429), call).action for _ in range(3)] == ["retry", "refresh", "fallback"]


def test_an_output_cap_is_lowered_once_and_an_unstated_budget_ends_the_turn_with_advice():
    stated = fault(400, "max_tokens: 9000 > context_window: 10000 - input_tokens: 2000 = available_tokens: 8000")
    recovery, call = chain("backup"), CallState()
    first = recovery.after_failure(stated, call)
    assert (first.action, first.repair) == ("repair", "lower_output_cap")
    second = recovery.after_failure(stated, call)
    assert second.action == "give_up" and "lower model.max_tokens" in second.reason
    unstated = recovery.after_failure(fault(400, "max_tokens exceeds the model's maximum output length"), CallState())
    assert unstated.action == "give_up" and recovery.active.model == "primary-model"


def test_repairs_are_tried_once_per_call_and_then_the_chain_gives_up():
    recovery = chain()
    call = CallState()
    images = fault(400, "Image URLs are only allowed for messages with role 'user'")
    first = recovery.after_failure(images, call)
    assert (first.action, first.repair) == ("repair", "strip_images")
    assert recovery.after_failure(images, call).action == "give_up"
    codec = classify(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"))
    assert recovery.after_failure(codec, CallState()).repair == "repair_encoding"


def test_overflows_ask_for_compression():
    decision = chain("backup").after_failure(fault(413, "Request Entity Too Large"), CallState())
    assert decision.action == "compress"


def test_negative_retries_are_refused():
    with pytest.raises(ValueError, match="max_retries"):
        chain(retries=-1)


def test_recovery_settings_load_from_yaml_keys_and_bad_ones_name_the_key():
    config = Config.from_dict({"recovery": {"backoff_base": 1, "fallback_providers": [
        {"model": "gpt-4o-mini", "base_url": "https://example.test/v1", "api_key": "k"}]}})
    assert config.recovery.backoff_base == 1.0
    assert config.recovery.fallback_providers == [
        {"model": "gpt-4o-mini", "base_url": "https://example.test/v1", "api_key": "k"}]
    assert config.with_overrides({"recovery.max_continuations": 1}).recovery.fallback_providers[0]["api_key"] == "k"
    rekeyed = Config.from_dict({"recovery": {"fallback_providers": [
        {"model": "gpt-4o-mini", "base_url": "https://example.test/v1", "api_key": "other"}]}})
    assert rekeyed.digest() == config.with_overrides({"recovery.backoff_base": 2.0}).digest() != Config().digest()
    with pytest.raises(ConfigError, match=r"recovery.fallback_providers\[0\]: unknown key 'url'"):
        Config.from_dict({"recovery": {"fallback_providers": [{"model": "m", "url": "x"}]}})
    with pytest.raises(ConfigError, match=r"recovery.fallback_providers\[0\].model: a model name is required"):
        Config.from_dict({"recovery": {"fallback_providers": [{"base_url": "x"}]}})
    with pytest.raises(ConfigError, match="recovery.backoff_cap: must be zero or positive"):
        Config.from_dict({"recovery": {"backoff_cap": -1}})
    with pytest.raises(ConfigError, match="unknown config key 'recovery.retries'"):
        Config.from_dict({"recovery": {"retries": 3}})
