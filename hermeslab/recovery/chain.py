"""The recovery chain: after each failed attempt, the next thing to try.

For one model call, in this order: compress (the prompt is too long), a
one-off repair of the request, a credential refresh, a retry after a pause,
the next fallback provider, and finally giving up with advice. Retries are
bounded per call (``agent.api_max_retries``); the refresh happens at most once
per turn; fallbacks are turn-scoped, so the primary is tried again when the
next turn starts.

When a fallback is configured, some faults switch to it before the retries
run out: a rate limit at the first failure once no credential refresh is left
to try (a rate-limited key does not recover within the retry window, which is
what Hermes does too), and an overloaded, timing-out or unreachable provider
after ``recovery.fallback_after`` failures.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..core.config import RecoveryConfig
from ..core.provider import Provider, ProviderError
from .backoff import retry_delay
from .classify import Classification, FaultClass

#: Builds a provider with fresh credentials from the one that was refused, or None when it cannot.
CredentialRefresh = Callable[[Provider], Provider | None]


@dataclass
class ProviderSlot:
    """A provider and the model to ask it for, plus what it taught us about its requests."""

    provider: Provider
    model: str
    #: Outgoing repairs this provider needs (``strip_images``, ``drop_reasoning``), learned from its errors.
    repairs: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return f"{self.provider.name}/{self.model}"


@dataclass(frozen=True)
class Decision:
    #: ``retry``, ``repair``, ``refresh``, ``fallback``, ``compress`` or ``give_up``.
    action: str
    delay: float = 0.0
    repair: str | None = None
    #: For people: what was done or why the chain gave up.
    reason: str = ""


@dataclass
class CallState:
    """Attempts of one model call at the active provider."""

    failures: int = 0
    repairs: set[str] = field(default_factory=set)
    consecutive_rate_limits: int = 0


class RecoveryChain:
    def __init__(self, cfg: RecoveryConfig, primary: ProviderSlot, fallbacks: Sequence[ProviderSlot] = (), *,
                 max_retries: int = 3, refresh: CredentialRefresh | None = None,
                 rng: random.Random | None = None):
        if max_retries < 0:
            raise ValueError(f"max_retries must be zero or positive, got {max_retries}")
        self.cfg = cfg
        self.slots = [primary, *fallbacks]
        self.max_retries = max_retries
        self._refresh = refresh
        self._rng = rng or random.Random()
        self._active = 0
        self.refreshed = False

    @property
    def active(self) -> ProviderSlot:
        return self.slots[self._active]

    @property
    def primary(self) -> ProviderSlot:
        return self.slots[0]

    @property
    def has_fallback(self) -> bool:
        return self._active + 1 < len(self.slots)

    def begin_turn(self) -> None:
        """Each turn starts at the primary, with its one credential refresh available again."""
        self._active = 0
        self.refreshed = False

    def fall_back(self, call: CallState | None = None) -> ProviderSlot | None:
        """Switch to the next provider (the call's attempts start again there); None when there is none."""
        if not self.has_fallback:
            return None
        self._active += 1
        if call is not None:
            call.failures, call.consecutive_rate_limits = 0, 0
            call.repairs.clear()
        return self.active

    def after_failure(self, fault: Classification, call: CallState) -> Decision:
        """Count the failed attempt and choose the next step (switching provider or credential as needed)."""
        kind = fault.fault
        call.failures += 1
        call.consecutive_rate_limits = call.consecutive_rate_limits + 1 if kind.name == "rate_limit" else 0
        if kind.compress:
            return Decision("compress", reason="the prompt is too large for the provider")
        repair = _repair_for(fault, call)
        if repair is not None:
            call.repairs.add(repair)
            return Decision("repair", repair=repair, reason=repair.replace("_", " "))
        if kind.rotate_credential and self._may_refresh(kind.name, call):
            self.refreshed = True
            fresh = self._refresh(self.active.provider)
            if fresh is not None:
                self.active.provider = fresh
                return Decision("refresh", reason=f"new credentials for {self.active.label}")
        retries, pause = kind.quick_retries or (self.max_retries, None)
        retries = min(retries, self.max_retries)
        if kind.retryable and call.failures <= retries:
            if self.has_fallback and self._switch_early(kind, call):
                return self._fall_back(call, f"{call.failures} failed attempts ({kind.name})")
            delay = pause if pause is not None else retry_delay(fault, call.failures, self.cfg, self._rng)
            return Decision("retry", delay=delay, reason=f"retry {call.failures} of {retries}")
        if kind.fall_back and self.has_fallback:
            return self._fall_back(call, f"{kind.name} at {self.active.label}")
        if kind.retryable:
            return Decision("give_up", reason=f"{fault.describe()}; gave up after {call.failures} attempts")
        return Decision("give_up", reason=fault.describe())

    def _switch_early(self, kind: FaultClass, call: CallState) -> bool:
        """Fall back before the retries run out: see the module docstring."""
        if kind.fall_back_first and (self._refresh is None or self.refreshed):
            return True
        return kind.eager_fallback and call.failures >= self.cfg.fallback_after

    def _may_refresh(self, fault_name: str, call: CallState) -> bool:
        """One refresh per turn; a rate limit earns it only when it repeats (the first one may just pass)."""
        if self._refresh is None or self.refreshed:
            return False
        return fault_name != "rate_limit" or call.consecutive_rate_limits >= 2

    def _fall_back(self, call: CallState, why: str) -> Decision:
        previous = self.active.label
        self.fall_back(call)
        return Decision("fallback", reason=f"{why}: switched from {previous} to {self.active.label}")


def _repair_for(fault: Classification, call: CallState) -> str | None:
    """The class's one-off repair, unless this call tried it already or it needs a budget the error does not state."""
    repair = fault.fault.repair
    if repair is None or repair in call.repairs:
        return None
    if repair == "lower_output_cap" and fault.output_budget is None:
        return None
    return repair


class RecoveryFailed(ProviderError):
    """Recovery gave up on the turn; the message says what failed and what a person can do."""

    def __init__(self, fault: str, message: str, *, status: int | None = None, final_text: str | None = None):
        super().__init__(message, status=status, error_type=fault)
        #: The visible result of the turn, when it is more than the failure message.
        self.final_text = final_text

    def __str__(self) -> str:
        return self.message
