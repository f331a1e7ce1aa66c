"""How long to wait before retrying: the provider's Retry-After, else jittered exponential backoff.

Jitter spreads the retries of many clients that failed together, so they do
not hit a recovering provider in one wave. The random source is injected so
that tests and benchmarks get the same delays on every run.
"""

from __future__ import annotations

import random

from ..core.config import RecoveryConfig
from .classify import Classification


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random) -> float:
    """``min(base * 2**(attempt-1), cap)`` plus a uniform share of up to half of it."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    delay = min(base * 2 ** (attempt - 1), cap)
    return delay + rng.uniform(0.0, 0.5 * delay)


def retry_delay(fault: Classification, attempt: int, cfg: RecoveryConfig, rng: random.Random) -> float:
    """Seconds to wait before retry number ``attempt``; a stated Retry-After wins, up to ``retry_after_cap``."""
    if fault.retry_after is not None:
        return min(max(fault.retry_after, 0.0), cfg.retry_after_cap)
    return backoff_delay(attempt, base=cfg.backoff_base, cap=cfg.backoff_cap, rng=rng)
