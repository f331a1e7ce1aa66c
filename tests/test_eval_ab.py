"""The A/B runner: configs, cell identity, failures, resuming from a results file, determinism, the CLI."""

from __future__ import annotations

import functools
import gc
import json
import weakref
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config, ConfigError
from hermeslab.eval.ab import (
    FlatSweepWarning,
    NothingCompressedWarning,
    ReplayCell,
    budget_effect,
    cell_identity,
    config_label,
    describe,
    equivalent_configs,
    flat_metrics,
    gather_recordings,
    plan_work,
    run_ab,
    window_to_compress,
)
from hermeslab.policies.loading import load_config
from hermeslab.recordings import Recording
from hermeslab.eval.replay_compression import FixedSummariser
from hermeslab.eval.results import ResultsFile, _plain, column_values, read_results, sql_type
from hermeslab.eval.stats import paired_compare

CONFIGS = {"hermes": "hermes-0.19,model.context_length=8000", "seed": "seed"}
CALLS: list[tuple[str, int]] = []


def sized(recording: Recording, config: Config) -> dict[str, float | int]:
    """A cheap cell that records each invocation; sessions whose id ends in ``!`` fail."""
    CALLS.append((recording.id, config.model.context_length))
    if recording.id.endswith("!"):
        raise RuntimeError(f"cannot measure {recording.id}")
    chars = sum(len(m["content"]) for m in recording.messages)
    return {"messages": len(recording.messages), "fill": chars / config.model.context_length}


STOP_AT: int | None = None


def interruptible(recording: Recording, config: Config) -> dict[str, float | int]:
    """``sized``, but the ``STOP_AT``-th invocation is interrupted as if by Ctrl+C."""
    if STOP_AT is not None and len(CALLS) + 1 == STOP_AT:
        raise KeyboardInterrupt
    return sized(recording, config)


def returns_text(recording: Recording, config: Config) -> dict:
    return {"messages": "many"}


class _Cyclic:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


#: Weak references to the cyclic garbage ``collector_state`` cells leave behind.
LEFT_BEHIND: list[weakref.ref] = []


def collector_state(recording: Recording, config: Config) -> dict[str, int]:
    LEFT_BEHIND.append(weakref.ref(_Cyclic()))
    return {"collector_on": int(gc.isenabled())}


def with_offset(recording: Recording, config: Config, offset: int = 0) -> dict[str, int]:
    return {"messages": len(recording.messages) + offset}


def fractional_later(recording: Recording, config: Config) -> dict[str, float | int]:
    return {"value": 1 if recording.id == "s0" else 0.5}


def gives_up(recording: Recording, config: Config) -> dict[str, int]:
    """Under a 1,000-token window the last two sessions fail a turn and stop early: they look far cheaper."""
    size = len(recording.messages)
    small = config.model.context_length == 1_000
    failed = small and recording.id in ("s3", "s4")
    return {"tokens": size * (1 if failed else 9 if small else 10), "failed_turns": int(failed)}


class Scaled:
    """A callable cell object named by its attributes."""

    def __init__(self, factor: int):
        self.factor = factor

    def __call__(self, recording: Recording, config: Config) -> dict[str, int]:
        return {"scaled": self.factor * len(recording.messages)}


def session(sid: str, turns: int = 1) -> Recording:
    messages = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        messages += [{"role": "user", "content": f"question {turn} " * (turn + 1)},
                     {"role": "assistant", "content": f"answer {turn}"}]
    return Recording(id=sid, messages=messages)


SESSIONS = [session(f"s{i}", i + 1) for i in range(5)]


@pytest.fixture(autouse=True)
def forget_calls():
    CALLS.clear()


def run(recordings=SESSIONS, configs=CONFIGS, **options) -> pd.DataFrame:
    options.setdefault("executor", "serial")
    options.setdefault("cell", sized)
    return run_ab(recordings, configs, progress=False, **options)


# ---------------------------------------------------------------- configs


def test_configs_from_presets_overrides_files_and_objects(tmp_path):
    hermes = load_config("hermes-0.19")
    assert hermes.compression.preset == "hermes-0.19" and hermes.compression.estimator == "rough"
    small = load_config("hermes-0.19, model.context_length=16000,compression.threshold=0.6")
    assert (small.model.context_length, small.compression.threshold) == (16_000, 0.6)
    assert small.compression.estimator == "rough"
    plain = load_config("compression.small_window_limit=null")
    assert plain.compression.preset == "seed" and plain.compression.small_window_limit is None
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump({"compression": {"preset": "hermes-0.19"}, "model": {"context_length": 32000}}))
    for spec in (path, str(path)):
        loaded = load_config(spec)
        assert (loaded.model.context_length, loaded.compression.estimator) == (32_000, "rough")
    assert load_config(f"{path},model.context_length=4000").model.context_length == 4_000
    given = apply_preset(Config(), "seed")
    assert load_config(given) is given


@pytest.mark.parametrize("spec, message", [
    ("no-such-preset", "neither a preset"),
    ("seed,hermes-0.19", "names two bases"),
    ("seed,,model.context_length=1", "empty part"),
    ("seed,model.nope=1", "unknown config key 'model.nope'"),
    ("seed,model.context_length=[1", "cannot read the value"),
    ("", "a config must be"),
    (Path("/no/such/config.yaml"), "does not exist"),
    (3, "a config must be"),
])
def test_bad_configs_are_named(spec, message):
    with pytest.raises(ConfigError, match=message):
        load_config(spec)


def test_config_labels():
    assert config_label("configs/wide.yaml") == "wide"
    assert config_label(Path("x/narrow.yml")) == "narrow"
    assert config_label("hermes-0.19,model.context_length=16000") == "hermes-0.19,model.context_length=16000"


# ---------------------------------------------------------------- cells


def test_cells_are_named_stably():
    assert cell_identity(sized) == f"{__name__}.sized"
    assert cell_identity(functools.partial(with_offset, offset=2)) == (
        f'{__name__}.with_offset{{"args": [], "kwargs": {{"offset": 2}}}}')
    assert cell_identity(Scaled(3)) == f'{__name__}.Scaled({{"factor": 3}})'
    assert ReplayCell().identity == "hermeslab.eval.ab.ReplayCell(summariser=config)"
    fixed = ReplayCell(FixedSummariser("short")).identity
    assert fixed == ('hermeslab.eval.ab.ReplayCell(summariser=hermeslab.eval.replay_compression.'
                     'FixedSummariser({"text": "short"}))')
    assert ReplayCell(FixedSummariser("x" * 500)).identity.count("sha256:") == 1


def test_cells_without_a_stable_name_are_refused():
    with pytest.raises(ValueError, match="no stable name"):
        cell_identity(lambda recording, config: {})
    with pytest.raises(ValueError, match="attributes are not plain data"):
        describe(Scaled(object()))
    with pytest.raises(TypeError, match="cell must be callable"):
        cell_identity(42)


def test_flat_metrics_accepts_numbers_only():
    import numpy as np

    assert flat_metrics({"a": np.int64(3), "b": np.float32(0.5), "c": True, "d": None}) == {
        "a": 3, "b": 0.5, "c": 1, "d": None}
    for row, error, message in (([1], TypeError, "not a mapping"), ({"": 1}, ValueError, "non-empty strings"),
                                ({"status": 1}, ValueError, "reserved"), ({"x": "1"}, TypeError, "is a str")):
        with pytest.raises(error, match=message):
            flat_metrics(row)


# ---------------------------------------------------------------- running


def test_every_cell_runs_once_in_a_fixed_order():
    frame = run()
    assert list(frame["config"]) == ["hermes"] * 5 + ["seed"] * 5
    assert list(frame["session_id"]) == [s.id for s in SESSIONS] * 2
    assert list(frame.columns[:7]) == ["session_id", "config", "config_hash", "run_id", "cell", "status", "error"]
    assert (frame["status"] == "ok").all() and frame["error"].isna().all()
    assert frame["run_id"].nunique() == 1 and frame["run_id"].iloc[0] == frame.attrs["run_id"]
    assert list(frame["messages"]) == [3, 5, 7, 9, 11] * 2
    assert sorted(CALLS) == sorted((s.id, n) for s in SESSIONS for n in (8_000, 65_536))
    assert frame.loc[0, "fill"] == pytest.approx((len("be brief") + len("question 0 ") + len("answer 0")) / 8_000)


def test_a_failing_cell_becomes_an_error_row_and_the_run_goes_on():
    frame = run(SESSIONS[:2] + [session("bad!")] + SESSIONS[2:])
    failed = frame[frame["status"] == "error"]
    assert list(failed["session_id"]) == ["bad!", "bad!"]
    assert failed["error"].str.startswith("RuntimeError: cannot measure bad! (at test_eval_ab.py:").all()
    assert failed["messages"].isna().all()
    assert (frame.loc[frame["session_id"] != "bad!", "status"] == "ok").all()


def test_cells_run_with_the_collector_paused_and_their_cyclic_garbage_is_freed_after_each():
    LEFT_BEHIND.clear()
    assert gc.isenabled()
    frame = run(SESSIONS[:3], {"a": "seed"}, cell=collector_state)
    assert frame["collector_on"].tolist() == [0, 0, 0]
    assert gc.isenabled()
    assert len(LEFT_BEHIND) == 3 and all(ref() is None for ref in LEFT_BEHIND)


def test_a_caller_that_turned_the_collector_off_keeps_it_off():
    gc.disable()
    try:
        frame = run(SESSIONS[:1], {"a": "seed"}, cell=collector_state)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert frame["collector_on"].tolist() == [0]


def test_a_cell_returning_text_fails_with_the_reason():
    frame = run(SESSIONS[:1], {"a": "seed"}, cell=returns_text)
    assert frame.loc[0, "status"] == "error"
    assert "metric 'messages' is a str" in frame.loc[0, "error"]


def test_settings_changed_from_the_preset_are_reported_beside_the_rows():
    frame = run(SESSIONS[:1], {"seed": "seed", "capped": "seed,compression.summary_max_tokens=128",
                               "hermes": "hermes-0.19,model.context_length=8000,compression.threshold=0.6"})
    assert frame.attrs["deviations_from_preset"] == {
        "seed": {}, "capped": {"compression.summary_max_tokens": {"preset": 12_000, "used": 128}},
        "hermes": {"compression.threshold": {"preset": 0.5, "used": 0.6}}}


def test_one_config_under_two_names_runs_once():
    frame = run(SESSIONS[:2], {"a": "seed", "b": Config(), "c": "seed,model.context_length=1000"})
    assert len(CALLS) == 4
    assert list(frame["config"]) == ["a", "a", "b", "b", "c", "c"]
    assert frame.loc[frame["config"] == "a", "fill"].tolist() == frame.loc[frame["config"] == "b", "fill"].tolist()


def test_a_metric_that_becomes_fractional_widens_its_column(tmp_path):
    frame = run(SESSIONS[:3], {"a": "seed"}, cell=fractional_later, out=tmp_path / "ab.duckdb")
    assert list(frame["value"]) == [1.0, 0.5, 0.5]
    assert frame["value"].dtype == "float64"


METRIC_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**62, 2**62), st.floats(), st.integers(-9, 9).map(np.int64),
    st.floats(width=32).map(np.float32), st.sampled_from(["rough chars/4", "cl100k_base"]))


@settings(max_examples=1_000, deadline=None)
@given(st.lists(METRIC_VALUES, min_size=1, max_size=6) | st.lists(st.integers() | st.none(), min_size=1)
       | st.lists(st.floats() | st.integers() | st.none(), min_size=1))
def test_a_columns_values_are_stored_as_each_value_alone_would_be(raw):
    """The one-pass type check of a column stores what converting value by value stores."""
    plain = [_plain(value) for value in raw]
    values, declared = column_values(list(raw))
    assert declared == sql_type(plain)
    if declared == "DOUBLE" and any(isinstance(value, str) for value in plain):
        with pytest.raises(ValueError):  # text among numbers is refused, whichever way it is converted
            np.array(values, dtype=float)
    elif declared == "DOUBLE":
        stored = np.array(values, dtype=float)
        expected = np.array([np.nan if value is None else float(value) for value in plain], dtype=float)
        assert np.array_equal(stored, expected, equal_nan=True)
    else:
        assert values == plain


def test_configs_and_names_are_checked():
    with pytest.raises(ValueError, match="non-empty mapping"):
        run(configs={})
    with pytest.raises(ValueError, match="config names must be non-empty strings"):
        run(configs={"": "seed"})


def test_parsed_dicts_and_duplicate_ids_are_reported_and_skipped():
    good = session("good").to_dict()
    broken = {"id": "broken", "messages": [{"role": "wizard", "content": "hi"}]}
    with pytest.warns(UserWarning, match="skipped recordings, 2 problem\\(s\\)"):
        frame = run([good, broken, session("good")], {"a": "seed"})
    assert list(frame["session_id"]) == ["good"]
    reasons = [str(p) for p in frame.attrs["problems"]]
    assert any("broken" in r and "wizard" in r for r in reasons)
    assert any("'good'" in r and "more than once" in r for r in reasons)


def test_malformed_lines_of_a_file_are_reported_with_file_and_line(tmp_path):
    path = tmp_path / "sessions.jsonl"
    lines = [json.dumps(session("one").to_dict()), "{not json", json.dumps({"id": "two"}),
             json.dumps(session("three", 2).to_dict())]
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="skipped recordings"):
        frame = run([path], {"a": "seed"})
    assert list(frame["session_id"]) == ["one", "three"]
    where = sorted((p.path, p.line) for p in frame.attrs["problems"])
    assert where[0] == (str(path), 2) and {line for _, line in where} == {2, 3}
    assert any("broken JSON" in p.reason for p in frame.attrs["problems"])


def test_limit_takes_the_first_sessions_of_each_file(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(session(f"a{i}").to_dict()) + "\n" for i in range(4)))
    second.write_text("".join(json.dumps(session(f"b{i}").to_dict()) + "\n" for i in range(4)))
    found, problems = gather_recordings([first, second], limit=2)
    assert [r.id for r in found] == ["a0", "a1", "b0", "b1"] and problems == []
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        gather_recordings([first], limit=0)
    with pytest.raises(TypeError, match="Recording objects, dicts or JSONL paths"):
        gather_recordings([3])


def test_work_is_chunked_by_recording_with_every_pending_config():
    chunks = plan_work(SESSIONS, ["h1", "h2"], {("s0", "h1"), ("s1", "h1"), ("s1", "h2")}, 2)
    cells = [cell for chunk in chunks for cell in chunk.cells]
    assert cells == [("s0", "h2")] + [(f"s{i}", h) for i in (2, 3, 4) for h in ("h1", "h2")]
    assert all(len({r.id for r in chunk.recordings}) == len(chunk.recordings) for chunk in chunks)


# ---------------------------------------------------------------- the results file and resuming


def test_a_rerun_on_the_same_file_computes_nothing_and_returns_the_same_rows(tmp_path):
    out = tmp_path / "ab.duckdb"
    first = run(out=out)
    assert len(CALLS) == 10
    CALLS.clear()
    again = run(out=out)
    assert CALLS == []
    pd.testing.assert_frame_equal(first, again)
    runs = ResultsFile(out).runs()
    assert list(runs["computed"]) == [10, 0] and list(runs["reused"]) == [0, 10]
    assert list(runs["status"]) == ["finished", "finished"]


def test_a_resumed_run_computes_only_the_missing_cells(tmp_path):
    out = tmp_path / "ab.duckdb"
    run(SESSIONS[:2], out=out)
    CALLS.clear()
    frame = run(out=out, configs={**CONFIGS, "tiny": "seed,model.context_length=2000"})
    assert sorted(CALLS) == sorted([(s.id, n) for s in SESSIONS[2:] for n in (8_000, 65_536)] +
                                   [(s.id, 2_000) for s in SESSIONS])
    assert len(frame) == 15 and frame["run_id"].nunique() == 2
    fresh = run(configs={**CONFIGS, "tiny": "seed,model.context_length=2000"})
    columns = [c for c in frame.columns if c != "run_id"]
    pd.testing.assert_frame_equal(frame[columns], fresh[columns])


def test_failed_cells_are_retried_and_other_cell_functions_do_not_count(tmp_path):
    out = tmp_path / "ab.duckdb"
    sessions = SESSIONS[:2] + [session("bad!")]
    run(sessions, out=out)
    CALLS.clear()
    frame = run(sessions, out=out)
    assert CALLS == [("bad!", 8_000), ("bad!", 65_536)]
    assert (frame["status"] == "error").sum() == 2
    stored = read_results(out)
    assert len(stored) == 6 and (stored["status"] == "error").sum() == 2
    other = run(sessions[:2], out=out, cell=functools.partial(with_offset, offset=1))
    assert list(other["messages"]) == [4, 6, 4, 6]
    assert "fill" not in other.columns
    assert len(read_results(out)) == 10


def test_a_resumed_row_is_reported_under_todays_config_name(tmp_path):
    out = tmp_path / "ab.duckdb"
    run(SESSIONS[:2], {"old": "seed"}, out=out)
    CALLS.clear()
    frame = run(SESSIONS[:2], {"new": "seed"}, out=out)
    assert CALLS == [] and list(frame["config"]) == ["new", "new"]


def test_the_runs_table_describes_each_run(tmp_path):
    out = tmp_path / "ab.duckdb"
    frame = run(SESSIONS[:2], out=out)
    row = ResultsFile(out).runs().iloc[0]
    assert row["run_id"] == frame.attrs["run_id"] and row["cell"] == f"{__name__}.sized"
    assert row["executor"] == "serial" and row["sessions"] == 2 and row["cells"] == 4 and row["failed"] == 0
    assert row["hermeslab_version"] and row["host"] and row["finished_at"] >= row["started_at"]
    configs = json.loads(row["configs"])
    assert [c["name"] for c in configs] == ["hermes", "seed"]
    assert configs[0]["hash"] == load_config(CONFIGS["hermes"]).digest()
    assert yaml.safe_load(configs[0]["yaml"])["model"]["context_length"] == 8_000
    assert json.loads(row["problems"]) == []


def test_an_interrupted_run_keeps_what_it_finished(tmp_path, monkeypatch):
    out = tmp_path / "ab.duckdb"
    monkeypatch.setattr(__import__(__name__), "STOP_AT", 9)  # in the last session's chunk
    with pytest.raises(KeyboardInterrupt):
        run(out=out, cell=interruptible)
    runs = ResultsFile(out).runs()
    kept = runs["computed"].iloc[0]
    assert list(runs["status"]) == ["interrupted"] and 0 < kept <= 8
    assert len(read_results(out)) == kept
    monkeypatch.setattr(__import__(__name__), "STOP_AT", None)
    CALLS.clear()
    frame = run(out=out, cell=interruptible)
    assert len(CALLS) == 10 - kept and len(frame) == 10 and (frame["status"] == "ok").all()


def test_the_results_file_refuses_a_lab_database(tmp_path):
    path = tmp_path / "lab.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE sessions (id VARCHAR)")
    with pytest.raises(ValueError, match="not an A/B results file"):
        run(out=path)


# ---------------------------------------------------------------- failed turns


GIVES_UP = {"wide": "seed", "small": "seed,model.context_length=1000"}


def test_every_frame_carries_failed_turns_even_when_the_cell_does_not_report_them():
    assert run(SESSIONS[:2])["failed_turns"].isna().all()
    frame = run(configs=GIVES_UP, cell=gives_up)
    assert frame.loc[frame["config"] == "small", "failed_turns"].tolist() == [0, 0, 0, 1, 1]
    assert (frame.loc[frame["config"] == "wide", "failed_turns"] == 0).all()


def test_the_comparison_flags_pairs_with_a_failed_turn_and_can_leave_them_out():
    frame = run(configs=GIVES_UP, cell=gives_up)
    kept = paired_compare(frame, "wide", "small", ["tokens"], n_resamples=99).loc["tokens"]
    assert (kept["n_pairs"], kept["n_failed_pairs"]) == (5, 2)
    assert kept["mean_b"] == pytest.approx((3 * 9 + 5 * 9 + 7 * 9 + 9 + 11) / 5)
    fair = paired_compare(frame, "wide", "small", ["tokens"], n_resamples=99, failed_pairs="exclude").loc["tokens"]
    assert (fair["n_pairs"], fair["n_failed_pairs"]) == (3, 2)
    assert fair["ratio"] == pytest.approx(0.9) and kept["ratio"] < 0.7  # giving up looked 30% cheaper
    with pytest.raises(ValueError, match="failed_pairs must be one of keep, exclude, got 'drop'"):
        paired_compare(frame, "wide", "small", failed_pairs="drop")


def test_a_results_file_from_before_failed_turns_still_loads_and_resumes(tmp_path):
    path = tmp_path / "ab.duckdb"
    run(SESSIONS[:3], GIVES_UP, cell=gives_up, out=path)
    with duckdb.connect(str(path)) as con:  # the schema as written before the column existed
        con.execute("ALTER TABLE results DROP COLUMN failed_turns")
    CALLS.clear()
    frame = run(SESSIONS, GIVES_UP, cell=gives_up, out=path)
    runs = ResultsFile(path).runs()
    assert list(runs["computed"]) == [6, 4] and list(runs["reused"]) == [0, 6]
    small = frame[frame["config"] == "small"]
    assert small["failed_turns"].isna().tolist() == [True, True, True, False, False]  # reused rows: not known
    assert small["failed_turns"].iloc[3:].tolist() == [1, 1]
    assert paired_compare(frame, "wide", "small", ["tokens"], n_resamples=99).loc["tokens", "n_failed_pairs"] == 2


# ---------------------------------------------------------------- sweeps the floors make flat


def test_thresholds_below_the_floor_come_to_the_same_budgets():
    low, high = (load_config(f"seed,model.context_length=8000,compression.threshold={t}") for t in (0.5, 0.7))
    assert budget_effect(low) == budget_effect(high) == {"threshold_tokens": 6_400, "summary_tokens": 2_000}
    floorless = {t: load_config(f"seed,model.context_length=8000,compression.min_threshold_tokens=0,"
                                   f"compression.threshold={t}") for t in (0.5, 0.7)}
    assert [budget_effect(c)["threshold_tokens"] for c in floorless.values()] == [4_000, 5_600]
    wide = load_config("seed,model.context_length=200000,compression.summary_ratio=0.3")
    assert budget_effect(wide) == {"threshold_tokens": 100_000, "summary_ratio": 0.3, "summary_min_tokens": 2_000,
                                   "summary_cap_tokens": 12_000}


def test_a_flat_sweep_is_named_once_with_its_settings_and_effective_values():
    configs = {f"t{t}": f"seed,model.context_length=8000,compression.threshold={t}" for t in (0.5, 0.6, 0.7)}
    configs["ratio"] = "seed,model.context_length=8000,compression.summary_ratio=0.4"
    with pytest.warns(UserWarning) as caught:
        frame = run(SESSIONS[:2], configs)
    flat = [w for w in caught if issubclass(w.category, FlatSweepWarning)]
    assert len(flat) == 1 and len(frame) == 8
    message = str(flat[0].message)
    assert "'t0.5', 't0.6', 't0.7', 'ratio'" in message
    assert "compression.threshold (t0.5: 0.5, t0.6: 0.6, t0.7: 0.7, ratio: 0.5)" in message
    assert "compression.summary_ratio (t0.5: 0.2, t0.6: 0.2, t0.7: 0.2, ratio: 0.4)" in message
    assert "window of 8,000 tokens" in message and "threshold_tokens=6,400, summary_tokens=2,000" in message
    assert "min_threshold_tokens floor of 64,000 reaches the window" in message
    assert "summary_min_tokens 2,000 is not below the summary cap of 800" in message


@pytest.mark.parametrize("configs", [
    {"a": "seed,model.context_length=8000,compression.min_threshold_tokens=0,compression.threshold=0.5",
     "b": "seed,model.context_length=8000,compression.min_threshold_tokens=0,compression.threshold=0.7"},
    {"a": "seed,model.context_length=200000,compression.threshold=0.5",
     "b": "seed,model.context_length=200000,compression.threshold=0.7"},
    {"a": "seed,model.context_length=8000", "b": "seed,model.context_length=8000,compression.protect_last_n=5"},
    {"a": "seed,model.context_length=8000", "b": Config().with_overrides({"model.context_length": 8000})},
])
def test_configs_that_differ_in_effect_raise_no_warning(configs):
    named = {name: load_config(spec) for name, spec in configs.items()}
    assert equivalent_configs(named) == []


def test_two_presets_under_the_same_floors_are_told_apart_by_their_other_settings():
    named = {name: load_config(f"{name},model.context_length=8000,compression.min_trigger_ratio=0.8")
             for name in ("seed", "hermes-0.19")}
    assert budget_effect(named["seed"]) == budget_effect(named["hermes-0.19"])
    assert equivalent_configs(named) == []
    hermes = {f"h{t}": load_config(f"hermes-0.19,model.context_length=8000,compression.threshold={t}")
              for t in (0.5, 0.9)}
    [note] = equivalent_configs(hermes)
    assert note.startswith("configs 'h0.5', 'h0.9' differ only in compression.threshold (h0.5: 0.5, h0.9: 0.9)")


# ---------------------------------------------------------------- the default cell and the command


def test_the_default_cell_replays_real_sessions_identically_on_every_executor(tmp_path):
    from shared_data import dataset

    path = dataset("tau_bench_airline_gpt4o.jsonl")
    configs = {"hermes": "hermes-0.19,model.context_length=5000", "seed": "seed,model.context_length=5000"}
    cell = ReplayCell(FixedSummariser())
    serial = run_ab([path], configs, cell=cell, executor="serial", limit=3, out=tmp_path / "ab.duckdb",
                    progress=False)
    assert (serial["status"] == "ok").all(), serial["error"].dropna().tolist()
    assert serial["compressions"].sum() > 0 and (serial["prompt_tokens"] > 0).all()
    processes = run_ab([path], configs, cell=cell, executor="processes", workers=2, limit=3, progress=False)
    columns = [c for c in serial.columns if c != "run_id"]
    pd.testing.assert_frame_equal(serial[columns], processes[columns])


def write_sessions(path: Path, *sessions: Recording, bad_line: str | None = None) -> Path:
    lines = [json.dumps(s.to_dict()) for s in sessions]
    if bad_line is not None:
        lines.insert(1, bad_line)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_ab_command_prints_the_comparison_and_resumes(tmp_path, capsys):
    from hermeslab.cli import main

    source = write_sessions(tmp_path / "s.jsonl", *(session(f"c{i}", 3 + i) for i in range(3)))
    out = tmp_path / "ab.duckdb"
    argv = ["ab", str(source), "--config", "seed", "--config", "seed,model.context_length=2000",
            "--executor", "serial", "--out", str(out), "--metric", "prompt_tokens", "--metric", "api_calls",
            "--resamples", "199"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "3 sessions x 2 configs, 0 failed cell(s)" in printed
    assert "seed,model.context_length=2000 vs seed" in printed
    table = printed.split("bootstrap CI; token figures in tiktoken cl100k_base):\n", 1)[1].split("\n\n")[0].splitlines()
    assert table[0].split()[:4] == ["n_pairs", "n_failed_pairs", "mean_a", "mean_b"]
    assert [line.split()[0] for line in table[2:]] == ["prompt_tokens", "api_calls"]
    assert main(argv) == 0
    runs = ResultsFile(out).runs()
    assert list(runs["computed"]) == [6, 0] and list(runs["reused"]) == [0, 6]


def test_the_ab_command_lists_skipped_lines_and_exits_1(tmp_path, capsys):
    from hermeslab.cli import main

    source = write_sessions(tmp_path / "s.jsonl", session("c0", 2), session("c1", 2), bad_line='{"id": 5}')
    assert main(["ab", str(source), "--config", "seed", "--config", "hermes-0.19", "--executor", "serial",
                 "--metric", "api_calls", "--resamples", "99"]) == 1
    captured = capsys.readouterr()
    assert f"skipped {source}:2: " in captured.err
    assert "2 sessions x 2 configs" in captured.out


def test_the_ab_command_shows_a_flat_sweep_on_stderr(tmp_path, capsys):
    from hermeslab.cli import main

    source = write_sessions(tmp_path / "s.jsonl", session("c0", 2))
    assert main(["ab", str(source), "--config", "seed,model.context_length=8000,compression.threshold=0.5",
                 "--config", "seed,model.context_length=8000,compression.threshold=0.7", "--executor", "serial",
                 "--metric", "api_calls", "--resamples", "99"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: configs ") == 1 and "differ only in compression.threshold" in err


@pytest.mark.parametrize("configs, message", [
    (["seed"], "at least two --config"),
    (["seed", "seed"], "same name"),
    (["seed", "no-such-preset"], "neither a preset"),
])
def test_the_ab_command_names_bad_configs(tmp_path, configs, message):
    from hermeslab.cli import main

    source = write_sessions(tmp_path / "s.jsonl", session("c0"))
    argv = ["ab", str(source), "--executor", "serial"]
    for spec in configs:
        argv += ["--config", spec]
    with pytest.raises(SystemExit, match=message):
        main(argv)


OFFLINE = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"


def test_a_config_that_compressed_nothing_is_named_with_its_peak_threshold_and_a_window_that_would():
    configs = {"hermes": "hermes-0.19", "seed": "seed", "small": "seed,model.context_length=8000"}
    with pytest.warns(NothingCompressedWarning) as caught:
        frame = run_ab([OFFLINE], configs, executor="serial", progress=False, limit=6)
    lines = frame.attrs["nothing_compressed"]
    assert [str(w.message) for w in caught] == lines and len(lines) == 2  # "small" compressed
    seed = frame[frame["config"] == "seed"]
    assert lines[1].startswith(f"seed compressed none of 6 session(s): peak prompt "
                               f"{seed['peak_prompt_tokens'].max():,} tokens (tiktoken cl100k_base), threshold "
                               "52,428 tokens (tiktoken cl100k_base) at its 65,536-token window; try "
                               "model.context_length=")
    for name, line in zip(("hermes", "seed"), lines):
        window = int(line.split("model.context_length=")[1].split()[0])
        resized = run_ab([OFFLINE], {name: f"{configs[name]},model.context_length={window}"}, executor="serial",
                         progress=False, limit=6)
        assert (resized["compressions"] > 0).mean() >= 0.5, (line, resized["compressions"].tolist())
        assert resized.attrs["nothing_compressed"] == []


def test_the_suggested_window_follows_the_config_s_rule_and_is_none_when_no_window_lowers_it():
    seed = load_config("seed")  # 0.8 of windows under 80,000
    assert window_to_compress(seed, 8_000) == 9_000 and window_to_compress(seed, 8_001) == 10_000
    absolute = load_config("anthropic-clear-tool-uses-20250919,model.context_length=200000")
    assert window_to_compress(absolute, 50_000) is None  # its trigger is 100,000 tokens at any window


def test_the_ab_command_says_nothing_was_compressed_and_hides_what_no_config_changed(tmp_path, capsys):
    from hermeslab.cli import main

    argv = ["ab", str(OFFLINE), "--config", "hermes-0.19", "--config", "seed", "--executor", "serial",
            "--limit", "4", "--resamples", "99"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("compressed none of 4 session(s)") == 2
    assert "metric(s) hidden: no config changed them in any session (--all-metrics shows them)" in out
    assert "\ncompressions " not in out and "\nsummary_calls " not in out
    assert main([*argv, "--all-metrics"]) == 0
    shown = capsys.readouterr().out
    assert "\ncompressions " in shown and "\ntask_kept " in shown and "hidden" not in shown
    assert main(["ab", str(OFFLINE), "--config", "hermes-0.19,model.context_length=8000", "--config",
                 "seed,model.context_length=8000", "--executor", "serial", "--limit", "4", "--resamples", "99"]) == 0
    compared = capsys.readouterr().out
    assert "compressed none" not in compared and "\ncompressions " in compared and "B/A" in compared
    assert "\ntask_kept " not in compared and "\nfacts_at_risk " not in compared and "task_survival = " in compared


@pytest.mark.parametrize("text, reason", [
    ("", r"sessions\.jsonl: no recording to replay \(empty, or only blank lines\)"),
    ("\n{not json\n" + json.dumps({"id": "two"}) + "\n",
     r"sessions\.jsonl: no usable recording, 2 malformed line\(s\) or recording\(s\) skipped; "
     r"the first: .*sessions\.jsonl:2: broken JSON"),
])
def test_a_file_with_no_usable_recording_says_so_and_why(tmp_path, text, reason):
    path = tmp_path / "sessions.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match=reason):
        run([path], {"a": "seed", "b": "hermes-0.19"})


def test_the_ab_command_says_when_no_metric_is_left_to_compare(capsys):
    from hermeslab.cli import main

    assert main(["ab", str(OFFLINE), "--config", "seed", "--config", "seed,compression.threshold=0.6",
                 "--executor", "serial", "--limit", "2", "--resamples", "99"]) == 0
    out = capsys.readouterr().out
    assert "nothing to compare: no config changed any other metric in any session" in out and " vs seed" not in out
