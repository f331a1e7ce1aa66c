"""Raw and normalised probe scores per config, window and probe type, from an exam's frame.

A probe is asked three times: after the compaction (the *compacted* arm),
with the whole uncompacted context (the *ceiling*, where it fits the
answerer's window) and with the system prompt and the question only (the
*floor*). The raw score of a config is the mean score (points / 2) of its
compacted arm over the probes that were scored. The normalised score places
that raw score between the two controls,

    (compacted − floor) / (ceiling − floor),

taken over the fittable probes whose three arms were all scored, so all three
means are over the same probes. The denominator is what the context itself
adds to the answerer: what it answers with the whole conversation in front
of it beyond what it answers from the question alone. 1 means compaction lost
none of that, 0 means it lost all of it. Where the denominator is not
positive (the answerer does no better with the context than without, or no
probe has all three arms) the normalised score is NaN and ``note`` says why:
a ratio over nothing is not a zero.

``overall`` pools every probe of the group (each probe counts once, so the
types with more probes weigh more); the per-type rows show each type alone.
"""

from __future__ import annotations

import math

import pandas as pd

#: The probe types in the order every table shows them, and the arms of each probe.
PROBE_TYPES = ("recall", "artifact", "continuation", "decision", "constraint", "model_written")
ARMS = ("compacted", "ceiling", "floor")
OVERALL = "overall"
#: Columns every exam frame has (``run_exam``'s contract); the functions here need no others.
FRAME_COLUMNS = ("recording_id", "config", "window", "compaction", "probe_id", "probe_type", "arm", "points",
                 "score", "fittable", "retained_tokens", "removed_tokens", "token_unit", "answerer", "judge")
#: A probe's identity within one config's exam; across configs the same key without ``config`` pairs it.
PROBE_KEY = ("recording_id", "config", "window", "compaction", "probe_id")
SCORE_COLUMNS = ("n_probes", "n_scored", "raw", "n_controlled", "compacted", "ceiling", "floor", "normalised",
                 "note")
DENOMINATOR = ("ceiling − floor: the score the whole uncompacted context adds over the question alone, on the "
               "fittable probes whose three arms were scored")


def check_frame(frame: pd.DataFrame) -> None:
    """Raise a one-line error unless ``frame`` has the exam frame's columns."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"an exam frame must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [column for column in FRAME_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"not an exam frame: it lacks the column(s) {missing}; pass what run_exam returns")
    arms = sorted(set(frame["arm"].dropna().unique()) - set(ARMS))
    if arms:
        raise ValueError(f"unknown arm(s) {arms} in the exam frame; arms are {list(ARMS)}")


def arm_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per probe asked (``PROBE_KEY`` plus ``probe_type``), one score column per arm (NaN: not scored)."""
    check_frame(frame)
    keys = [*PROBE_KEY, "probe_type"]
    grouped = frame.groupby([*keys, "arm"], sort=False, dropna=False)
    wide = grouped["score"].mean().unstack("arm").reindex(columns=list(ARMS))
    fittable = frame["fittable"].eq(True).groupby([frame[key] for key in keys], sort=False, dropna=False).all()
    wide["fittable"] = fittable.reindex(wide.index).fillna(False).astype(bool)
    wide.columns.name = None
    return wide.reset_index()


def normalise(compacted: float, ceiling: float, floor: float) -> tuple[float, str | None]:
    """``(compacted − floor) / (ceiling − floor)``, or NaN and the reason it is undefined."""
    if any(math.isnan(value) for value in (compacted, ceiling, floor)):
        return math.nan, "no probe has all three arms scored"
    if ceiling <= floor:
        return math.nan, (f"the ceiling ({ceiling:.3f}) does not exceed the floor ({floor:.3f}): the context adds "
                          "nothing to normalise by")
    return (compacted - floor) / (ceiling - floor), None


def group_scores(probes: pd.DataFrame) -> dict[str, object]:
    """The ``SCORE_COLUMNS`` of one group of probes (rows of ``arm_table``)."""
    scored = probes["compacted"].dropna()
    controlled = probes[probes["fittable"] & probes[list(ARMS)].notna().all(axis=1)]
    means = {arm: float(controlled[arm].mean()) if len(controlled) else math.nan for arm in ARMS}
    normalised, why = normalise(means["compacted"], means["ceiling"], means["floor"])
    note = why if len(scored) else "no probe of this group was scored"
    return {"n_probes": len(probes), "n_scored": len(scored),
            "raw": float(scored.mean()) if len(scored) else math.nan, "n_controlled": len(controlled),
            **means, "normalised": normalised, "note": note}


def scores(frame: pd.DataFrame, *, by: tuple[str, ...] = ("config", "window")) -> pd.DataFrame:
    """Raw and normalised scores per ``by`` group and probe type, plus ``overall`` (see the module docstring).

    Indexed by ``(*by, probe_type)``; the types are those present, in
    ``PROBE_TYPES`` order, then ``overall``. ``attrs["denominator"]`` states
    what the normalised score divides by.
    """
    probes = arm_table(frame)
    rows = {}
    for group, members in probes.groupby(list(by), sort=False, dropna=False):
        group = group if isinstance(group, tuple) else (group,)
        kinds = dict(iter(members.groupby("probe_type", sort=False)))
        for kind in [kind for kind in PROBE_TYPES if kind in kinds]:
            rows[(*group, kind)] = group_scores(kinds[kind])
        rows[(*group, OVERALL)] = group_scores(members)
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(SCORE_COLUMNS))
    table.index = pd.MultiIndex.from_tuples(list(rows), names=[*by, "probe_type"]) if rows else \
        pd.MultiIndex.from_tuples([], names=[*by, "probe_type"])
    table = table.astype({"n_probes": "int64", "n_scored": "int64", "n_controlled": "int64"})
    table.attrs["denominator"] = DENOMINATOR
    return table
