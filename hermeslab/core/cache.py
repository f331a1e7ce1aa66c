"""The size bound of hermeslab's per-object caches: the exact token counter's, the rough estimate's and the
replay metrics'.

They remember what they measured for the life of the process, so each cache
has a limit; when it is reached the oldest tenth goes at once (dicts keep
insertion order), which keeps an insert cheap on average and keeps the
messages still being measured.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any


def bounded_put(cache: dict, key: Any, value: Any, limit: int) -> None:
    """Insert, dropping the oldest tenth first when the cache is full (a cache shared by threads: under its lock)."""
    if key not in cache and len(cache) >= limit:
        for old in list(itertools.islice(cache, max(1, limit // 10))):
            del cache[old]
    cache[key] = value


def put_bounded(cache: dict, key: Any, value: Any, limit: int, lock: threading.Lock) -> None:
    """Insert; one assignment is atomic, so only dropping the oldest entries takes ``lock``."""
    if len(cache) < limit:
        cache[key] = value
    else:
        with lock:
            bounded_put(cache, key, value, limit)
