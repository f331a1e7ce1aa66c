"""Executors: serial, local processes and Dask run the same chunks to the same answers.

The Dask test starts a real ``LocalCluster`` of two worker processes and runs
a whole A/B comparison on it, which must equal the serial run number for number.
"""

from __future__ import annotations

import os
import pickle
from typing import ClassVar

import pytest

from hermeslab.eval.ab import run_ab
from hermeslab.eval.executors import (
    ChunkDone,
    DaskExecutor,
    ProcessExecutor,
    SerialExecutor,
    make_executor,
    plan_chunks,
)
from hermeslab.recordings import Recording

CONFIGS = {"small": "hermes-0.19,model.context_length=8000", "large": "seed,model.context_length=32000"}


def square_all(offset: int, chunk: list[int]) -> list[int]:
    return [offset + n * n for n in chunk]


def die_on_seven(offset: int, chunk: list[int]) -> list[int]:
    if 7 in chunk:
        os._exit(3)
    return chunk


def shape_cell(recording: Recording, config) -> dict[str, float | int]:
    """A cheap cell whose numbers depend on both the recording and the config."""
    chars = sum(len(m.get("content") or "") for m in recording.messages)
    return {"messages": len(recording.messages), "fill": chars / config.model.context_length,
            "rough": config.compression.estimator == "rough"}


class CountedRecording(Recording):
    """Counts how often each recording is pickled (the runner's process does all the pickling)."""

    pickled: ClassVar[dict[str, int]] = {}

    def __getstate__(self):
        CountedRecording.pickled[self.id] = CountedRecording.pickled.get(self.id, 0) + 1
        return self.__dict__


def recordings(n: int = 12, kind: type[Recording] = Recording) -> list[Recording]:
    return [kind(id=f"s{i:02d}", messages=[{"role": "user", "content": "x" * (50 * i + 1)},
                                           {"role": "assistant", "content": "ok " * i}]) for i in range(n)]


def frozen_objects(offset: int, chunk: list[int]) -> list[int]:
    import gc

    return [gc.get_freeze_count()]


def collect(executor, fn, shared, chunks) -> dict[int, ChunkDone]:
    return {done.index: done for done in executor.run(fn, shared, chunks)}


# ---------------------------------------------------------------- chunk planning


def test_plan_chunks_keeps_order_and_balances_weight():
    chunks = plan_chunks([1] * 10, 3)
    assert [i for chunk in chunks for i in chunk] == list(range(10))
    assert len(chunks) <= 4 and all(chunks)


def test_a_heavy_item_gets_a_chunk_of_its_own():
    assert plan_chunks([1, 1, 100, 1, 1], 2) == [[0, 1, 2], [3, 4]]
    assert plan_chunks([100, 1, 1, 1], 4) == [[0], [1, 2, 3]]


def test_plan_chunks_edges():
    assert plan_chunks([], 4) == []
    assert plan_chunks([5, 5], 10) == [[0], [1]]
    with pytest.raises(ValueError, match="target_chunks must be at least 1"):
        plan_chunks([1], 0)


# ---------------------------------------------------------------- executors


def test_serial_and_process_executors_return_the_same_results():
    chunks = [[1, 2], [3], [4, 5, 6], [7]]
    serial = collect(SerialExecutor(), square_all, 10, chunks)
    processes = collect(ProcessExecutor(2), square_all, 10, chunks)
    assert serial == processes == {i: ChunkDone(i, [10 + n * n for n in c]) for i, c in enumerate(chunks)}


def test_a_dead_worker_fails_its_chunks_without_raising():
    results = collect(ProcessExecutor(2), die_on_seven, 0, [[1], [7], [2]])
    assert sorted(results) == [0, 1, 2]
    assert "BrokenProcessPool" in results[1].error
    assert all(done.error or done.result for done in results.values())


def test_process_executor_refuses_what_cannot_be_pickled():
    with pytest.raises(ValueError, match="must be picklable"):
        list(ProcessExecutor(2).run(lambda shared, chunk: chunk, None, [[1]]))


def test_no_chunks_start_no_workers():
    assert list(ProcessExecutor(2).run(square_all, 0, [])) == []
    assert list(DaskExecutor(workers=2).run(square_all, 0, [])) == []


@pytest.mark.parametrize("spec, kind", [("serial", SerialExecutor), ("processes", ProcessExecutor),
                                        ("dask", DaskExecutor)])
def test_executors_by_name(spec, kind):
    chosen = make_executor(spec, workers=3)
    assert isinstance(chosen, kind) and chosen.name == spec
    if spec != "serial":
        assert chosen.workers == 3


@pytest.mark.parametrize("spec, error, message", [
    ("threads", ValueError, "unknown executor 'threads'"),
    (42, TypeError, "executor must be a name"),
])
def test_bad_executors_are_named(spec, error, message):
    with pytest.raises(error, match=message):
        make_executor(spec)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_worker_counts_are_named(workers):
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        ProcessExecutor(workers)


def test_unknown_start_method_is_named():
    with pytest.raises(ValueError, match="start method 'teleport'"):
        ProcessExecutor(2, start_method="teleport")


@pytest.mark.parametrize("start_method, copies", [("fork", 0), pytest.param("spawn", 1, marks=pytest.mark.slow)])
def test_a_recording_crosses_to_the_workers_at_most_once_whatever_the_config_count(start_method, copies):
    CountedRecording.pickled.clear()
    sessions = recordings(10, CountedRecording)
    configs = {**CONFIGS, "third": "seed,model.context_length=4000"}
    frame = run_ab(sessions, configs, cell=shape_cell, executor=ProcessExecutor(2, start_method=start_method),
                   progress=False)
    assert (frame["status"] == "ok").all() and len(frame) == 30
    assert CountedRecording.pickled == ({r.id: copies for r in sessions} if copies else {})


def test_a_forked_worker_keeps_what_it_inherited_out_of_the_collectors_passes():
    [done] = collect(ProcessExecutor(1, start_method="fork"), frozen_objects, 0, [[1]]).values()
    assert done.result[0] > 10_000  # the modules and data the worker inherited, frozen
    before = frozen_objects(0, [])
    [done] = collect(SerialExecutor(), frozen_objects, 0, [[1]]).values()
    assert done.result == before == frozen_objects(0, [])  # the caller's own process is left as it was


def test_a_run_on_processes_equals_the_serial_run():
    sessions = recordings()
    serial = run_ab(sessions, CONFIGS, cell=shape_cell, executor="serial", progress=False)
    processes = run_ab(sessions, CONFIGS, cell=shape_cell, executor="processes", workers=2, progress=False)
    columns = [c for c in serial.columns if c != "run_id"]
    assert serial[columns].equals(processes[columns])


@pytest.mark.slow
def test_a_run_on_a_dask_local_cluster_equals_the_serial_run():
    distributed = pytest.importorskip("distributed")
    sessions = recordings()
    serial = run_ab(sessions, CONFIGS, cell=shape_cell, executor="serial", progress=False)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = run_ab(sessions, CONFIGS, cell=shape_cell, executor=client, progress=False)
        assert len(client.scheduler_info()["workers"]) == 2
        assert make_executor(client).workers == 2
    columns = [c for c in serial.columns if c != "run_id"]
    assert serial[columns].equals(on_dask[columns])
    assert pickle.loads(pickle.dumps(on_dask)).equals(on_dask)
