"""The probe exam's scorecard: one table per exam, the same for the command line, the notebook and the benchmark.

Per window, config and probe type (and ``overall``): the probes asked and
scored, the raw score of the compacted arm, the normalised score between the
floor and ceiling controls (``scores``), the mean retained tokens per
compaction, and for every config but the baseline the paired difference to
the baseline with its session-bootstrap interval (``paired``). ``caption``
names what every figure is measured with: the token unit, the answerer, the
judge and the controls.

An exam that scored no probe at all has nothing to report: ``problem`` says
so in a sentence, every score is NaN, and callers exit nonzero on it. A
config or type that scored nothing shows NaN with its ``note``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from .paired import paired_scores
from .scores import DENOMINATOR, OVERALL, check_frame, scores

CONTROLS = "ceiling = the whole uncompacted context (fittable probes only); floor = the system prompt and question only"
SCORE = "score = points / 2 of the compacted arm (2 right, 1 partly, 0 wrong or unknown)"
SCORECARD_COLUMNS = ("n_probes", "n_scored", "raw", "normalised", "retained_tokens", "diff", "ci_low", "ci_high",
                     "n_pairs", "note")


def labels(frame: pd.DataFrame) -> dict[str, str]:
    """What the exam's figures are measured with: ``token_unit``, ``answerer``, ``judge``, ``controls``, ``score``."""
    check_frame(frame)

    def named(key: str) -> str:
        given = frame.attrs.get(key)
        if given:
            return str(given)
        values = sorted({str(value) for value in frame[key].dropna().unique()})
        return ", ".join(values) if values else "unknown"

    return {"token_unit": named("token_unit"), "answerer": named("answerer"), "judge": named("judge"),
            "controls": CONTROLS, "score": SCORE}


def caption(frame: pd.DataFrame) -> str:
    """One line naming the unit, answerer, judge and controls of every figure of ``frame``."""
    said = labels(frame)
    return (f"answerer {said['answerer']}; judge {said['judge']}; tokens in {said['token_unit']}; {said['score']}; "
            f"controls: {said['controls']}")


def problem(frame: pd.DataFrame) -> str | None:
    """A sentence when the exam scored no probe (its scores say nothing), else None."""
    check_frame(frame)
    if frame.empty:
        return "the exam asked no probe: no compaction of these recordings removed anything a probe could ask about"
    if frame["points"].notna().any():
        return None
    errors = frame["error"].dropna() if "error" in frame.columns else pd.Series([], dtype=object)
    first = f"; first error: {errors.iloc[0]}" if len(errors) else ""
    return f"the exam scored none of its {len(frame):,} question(s){first}"


def scorecard(frame: pd.DataFrame, baseline: str | None = None, *, confidence: float = 0.95,
              n_resamples: int = 2_000, seed: int = 0) -> pd.DataFrame:
    """The scorecard (``SCORECARD_COLUMNS``), indexed by (``window``, ``config``, ``probe_type``).

    ``baseline`` (default: the frame's first config) is what every other
    config is paired with; its own rows have no difference, and none has one
    when the baseline asked no probe (no compaction of it removed anything). ``attrs`` carry
    ``labels(frame)``, the baseline, the interval's confidence and what the
    normalised score divides by.
    """
    check_frame(frame)
    configs = list(frame["config"].dropna().unique())
    baseline = configs[0] if baseline is None and configs else baseline
    units = sorted({str(unit) for unit in frame["token_unit"].dropna().unique()})
    if len(units) > 1:
        raise ValueError(f"the exam's tokens are counted in more than one unit ({', '.join(units)}); run it with "
                         "one counter (run_exam(counter=...))")
    table = scores(frame, by=("window", "config"))
    compacted = frame[frame["arm"] == "compacted"].drop_duplicates(["recording_id", "config", "window",
                                                                    "compaction"])
    retained = compacted.groupby(["window", "config"], sort=False)["retained_tokens"].mean()
    table["retained_tokens"] = [retained.get((window, config), math.nan) for window, config, _ in table.index]
    paired = {other: paired_scores(frame, baseline, other, confidence=confidence, n_resamples=n_resamples, seed=seed)
              for other in configs if other != baseline and baseline in configs}
    differences = pd.concat({other: part for other, part in paired.items()}, names=["config"]) if paired else None
    for column, source in (("diff", "mean_diff"), ("ci_low", "ci_low"), ("ci_high", "ci_high"),
                           ("n_pairs", "n_pairs")):
        values = {} if differences is None else {(window, config, kind): value for (config, window, kind), value
                                                 in differences[source].items()}
        table[column] = [values.get(key, math.nan) for key in table.index]
    table["n_pairs"] = pd.array([None if math.isnan(v) else int(v) for v in table["n_pairs"]], dtype="Int64")
    order = [name for name in [baseline, *configs] if name in configs]
    order = list(dict.fromkeys(order))
    keys = sorted(table.index, key=lambda key: (key[0], order.index(key[1])))
    table = table.loc[keys, list(SCORECARD_COLUMNS)] if keys else table[list(SCORECARD_COLUMNS)]
    table.attrs.update(labels(frame), baseline=baseline, confidence=confidence, n_resamples=n_resamples,
                       denominator=DENOMINATOR, problem=problem(frame))
    return table


def readable(table: pd.DataFrame, types: Sequence[str] | None = None) -> pd.DataFrame:
    """The scorecard as a reader sees it: scores to three decimals, tokens whole, the difference written
    ``+d [low, high]``, NaN as blank; ``types`` keeps only those probe types (``overall`` included if named)."""
    shown = table if types is None else table[table.index.get_level_values("probe_type").isin(list(types))]

    def interval(row: pd.Series) -> str:
        if math.isnan(row["diff"]):
            return ""
        return f"{row['diff']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"

    out = pd.DataFrame(index=shown.index)
    out["probes"] = shown["n_probes"]
    out["scored"] = shown["n_scored"]
    out["pairs"] = shown["n_pairs"].map(lambda v: "" if pd.isna(v) else f"{v:,}")
    out["raw"] = shown["raw"].map(lambda v: "" if math.isnan(v) else f"{v:.3f}")
    out["normalised"] = shown["normalised"].map(lambda v: "" if math.isnan(v) else f"{v:.3f}")
    out[f"retained ({table.attrs.get('token_unit', 'tokens')})"] = shown["retained_tokens"].map(
        lambda v: "" if math.isnan(v) else f"{v:,.0f}")
    baseline = table.attrs.get("baseline")
    out[f"vs {baseline} [{table.attrs.get('confidence', 0.95):.0%} CI]"] = shown.apply(interval, axis=1)
    out["note"] = shown["note"].fillna("")
    return out


def overall_of(table: pd.DataFrame) -> pd.DataFrame:
    """The scorecard's ``overall`` rows only, indexed by (``window``, ``config``)."""
    return table.xs(OVERALL, level="probe_type")
