"""Paired differences between two configs' probe scores, with intervals from a session-level bootstrap.

A pair is one probe asked under both configs: the same recording, window and
probe id, compacted arm, scored under both. (A probe asked after several of
one config's compactions counts once, with its mean score there.) The
difference B − A is averaged over the pairs, each probe counting once.

Probes of one session are not independent: they come from the same
conversation, the same compactions and often the same span. Resampling probes
would treat them as if they were and give intervals far too narrow. The
bootstrap therefore resamples whole sessions (recordings) with replacement —
a cluster bootstrap — and recomputes the probe-weighted mean difference of
each resample; the interval is the percentile interval of those means. With
fewer than two sessions there is nothing to resample and the interval is NaN;
when every difference is the same the interval is that value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .scores import OVERALL, PROBE_TYPES, check_frame

PAIRED_COLUMNS = ("n_pairs", "n_sessions", "only_a", "only_b", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high",
                  "ci_method")


def cluster_bootstrap_ci(values: np.ndarray, clusters: np.ndarray, *, confidence: float = 0.95,
                         n_resamples: int = 2_000, seed: int = 0) -> tuple[float, float, float, str]:
    """``(mean, low, high, method)``: the mean of ``values`` and its interval resampling whole ``clusters``.

    Each resample draws as many clusters as there are, with replacement; its
    statistic is the mean over every value of the drawn clusters (a cluster
    drawn twice counts twice). Seeded: the same input gives the same interval.
    """
    _check_resampling(confidence, n_resamples)
    values = np.asarray(values, dtype="float64")
    if len(values) != len(clusters):
        raise ValueError(f"values and clusters differ in length ({len(values)} and {len(clusters)})")
    if len(values) == 0:
        return math.nan, math.nan, math.nan, "none"
    mean = float(values.mean())
    codes, _ = pd.factorize(pd.Series(clusters, dtype="object"))
    n = int(codes.max()) + 1
    if np.all(values == values[0]):
        return mean, mean, mean, "constant"
    if n < 2:
        return mean, math.nan, math.nan, "none"
    sums = np.bincount(codes, weights=values, minlength=n)
    counts = np.bincount(codes, minlength=n).astype("float64")
    draws = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype("float64")
    means = (draws @ sums) / (draws @ counts)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return mean, float(low), float(high), "cluster percentile"


def probe_scores(frame: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Every probe scored under A or B (``recording_id``, ``window``, ``probe_id``, ``probe_type``) with its
    score under each (columns ``a`` and ``b``; NaN where that config did not score it)."""
    check_frame(frame)
    if a == b:
        raise ValueError(f"a paired comparison needs two configs; both sides are {a!r}")
    configs = list(frame["config"].dropna().unique())
    for name in (a, b):
        if name not in configs:
            raise ValueError(f"no config named {name!r} in the exam frame; it holds {configs}")
    keys = ["recording_id", "window", "probe_id", "probe_type"]
    scored = frame[(frame["arm"] == "compacted") & frame["score"].notna()]
    sides = {side: scored[scored["config"] == name].groupby(keys, dropna=False)["score"].mean()
             for side, name in (("a", a), ("b", b))}
    return pd.concat(sides, axis=1, join="outer").reset_index()


def paired_scores(frame: pd.DataFrame, a: str, b: str, *, confidence: float = 0.95, n_resamples: int = 2_000,
                  seed: int = 0, by: Sequence[str] = ("window",)) -> pd.DataFrame:
    """Per ``by`` group and probe type (and ``overall``): mean scores of A and B on their shared probes, the
    mean difference B − A and its session-bootstrap interval (see the module docstring).

    ``only_a`` / ``only_b`` count the probes scored under one config alone
    (left out: they have no partner). Every group's resampling starts from
    ``seed``, so a group's interval does not depend on which others are asked for.
    """
    _check_resampling(confidence, n_resamples)
    by = list(by)
    probes = probe_scores(frame, a, b)
    rows = {}
    groups = probes.groupby(by, sort=True, dropna=False) if by else [((), probes)]
    for group, members in groups:
        group = group if isinstance(group, tuple) else (group,)
        kinds = dict(iter(members.groupby("probe_type", sort=False)))
        for kind in [*[kind for kind in PROBE_TYPES if kind in kinds], OVERALL]:
            chosen = members if kind == OVERALL else kinds[kind]
            pairs = chosen.dropna(subset=["a", "b"])
            diff = (pairs["b"] - pairs["a"]).to_numpy()
            mean, low, high, method = cluster_bootstrap_ci(diff, pairs["recording_id"].to_numpy(),
                                                           confidence=confidence, n_resamples=n_resamples, seed=seed)
            rows[(*group, kind)] = {"n_pairs": len(pairs), "n_sessions": pairs["recording_id"].nunique(),
                                    "only_a": int(chosen["b"].isna().sum()), "only_b": int(chosen["a"].isna().sum()),
                                    "mean_a": float(pairs["a"].mean()) if len(pairs) else math.nan,
                                    "mean_b": float(pairs["b"].mean()) if len(pairs) else math.nan,
                                    "mean_diff": mean, "ci_low": low, "ci_high": high, "ci_method": method}
    names = [*by, "probe_type"]
    index = pd.MultiIndex.from_tuples(list(rows), names=names) if rows else pd.MultiIndex.from_tuples([], names=names)
    table = pd.DataFrame(list(rows.values()), index=index, columns=list(PAIRED_COLUMNS))
    table.attrs.update(a=a, b=b, confidence=confidence, n_resamples=n_resamples, seed=seed,
                       pair="the same probe (recording, window, probe id), compacted arm, scored under both configs",
                       resampled="sessions (recordings), with replacement")
    return table


def _check_resampling(confidence: float, n_resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
