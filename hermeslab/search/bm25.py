"""The BM25 ranking function, split the way the index stores it.

``score(d, q) = Σ_t idf(t) · f(tf_{t,d}, |d|)`` over the query's distinct terms, with

* ``idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))`` — the always-positive variant,
  so a term in most messages still counts a little (the classic form goes
  negative there and SQLite FTS5 clamps it to almost nothing);
* ``f(tf, |d|) = tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl))``, the
  saturating term-frequency factor, with k1 = 1.2 and b = 0.75.

N, df and avgdl are the live collection statistics. Postings keep the raw term
frequency, and document lengths live beside them, so every score is exact for
the collection as it is now; ``factor_bound`` is what lets a block of postings
ordered under an older avgdl still give a safe upper bound (see ``postings``).
"""

from __future__ import annotations

import math

import numpy as np

K1 = 1.2
B = 0.75


def idf(n_docs: int, df: int) -> float:
    if n_docs < 0 or df < 0:
        raise ValueError(f"document counts must not be negative, got N={n_docs}, df={df}")
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def factor(tf: float, length: float, avgdl: float) -> float:
    """The term-frequency factor of one posting."""
    return tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / avgdl))


def factors(tf: np.ndarray, length: np.ndarray, avgdl: float) -> np.ndarray:
    """``factor`` for arrays of postings (float64)."""
    tf = tf.astype(np.float64)
    return tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length.astype(np.float64) / avgdl))


def factor_bound(bound: float, bound_avgdl: float, avgdl: float) -> float:
    """An upper bound on a posting's factor under ``avgdl``, given its bound under ``bound_avgdl``.

    A larger avgdl shrinks the length penalty, and it can shrink the
    denominator by at most the ratio of the two averages; a smaller avgdl only
    lowers the factor. Hence ``bound · max(1, avgdl / bound_avgdl)``.
    """
    return bound * max(1.0, avgdl / bound_avgdl)
