"""How long to wait before retrying: the provider's Retry-After, else jittered exponential backoff.

Jitter spreads the retries of many clients that failed together, so they do
not hit a recovering provider in one wave. The random source is injected so
that tests and benchmarks get the same delays on every run (a shared one
serves callers that do not care).
"""

from __future__ import annotations

import random

from ..core.config import RecoveryConfig
from .classify import Classification

#: Past this many doublings every delay is the cap (and ``2**n`` would overflow a float).
_MAX_DOUBLINGS = 63
_SHARED = random.Random()


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None,
                  jitter: float = 0.5) -> float:
    """``min(base * 2**(attempt-1), cap)`` plus a uniform share of up to ``jitter`` of it.

    A base of zero (or less) has no ramp to climb, so the wait is the cap, as in
    Hermes: ``backoff_base: 0`` must not send the retries back to back.
    """
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    exponent = attempt - 1
    delay = cap if base <= 0 or exponent >= _MAX_DOUBLINGS else min(base * 2 ** exponent, cap)
    return delay + (rng or _SHARED).uniform(0.0, jitter * delay)


def retry_delay(fault: Classification, attempt: int, cfg: RecoveryConfig, rng: random.Random) -> float:
    """Seconds to wait before retry number ``attempt``; a stated Retry-After wins, up to ``retry_after_cap``."""
    if fault.retry_after is not None:
        return min(max(fault.retry_after, 0.0), cfg.retry_after_cap)
    return backoff_delay(attempt, base=cfg.backoff_base, cap=cfg.backoff_cap, rng=rng)
