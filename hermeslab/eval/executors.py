"""Where the cells of an A/B run execute: this process, local worker processes, or a Dask cluster.

Every executor runs the same top-level function ``fn(shared, chunk)`` over a
list of chunks and yields ``ChunkDone`` records as chunks finish, in whatever
order they finish (the runner restores a fixed order). ``shared`` — the cell
function and the configs — reaches each worker once: through the pool's
initializer for local processes, scattered to every worker for Dask. Each
chunk carries its own recordings, so a recording crosses a process boundary
at most once, never once per config (forked workers inherit them and need no
copy at all). A chunk whose task fails as a whole (a worker
died, a result could not be pickled) is reported with its error instead of
ending the run.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

EXECUTOR_NAMES = ("serial", "processes", "dask")
#: Chunks per worker the runner aims for: enough to balance uneven sessions, few enough to keep overhead small.
CHUNKS_PER_WORKER = 8


@dataclass(frozen=True)
class ChunkDone:
    """One finished chunk: its position in the submitted list and its result, or why it has none."""

    index: int
    result: Any = None
    error: str | None = None


class Executor(Protocol):
    name: str
    workers: int

    def run(self, fn: Callable[[Any, Any], Any], shared: Any, chunks: Sequence[Any]) -> Iterator[ChunkDone]:
        """Run ``fn(shared, chunk)`` for every chunk, yielding each result as it finishes."""
        ...


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _check_workers(workers: int | None) -> int:
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    return workers


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class SerialExecutor:
    """Runs every chunk in this process, in order: for debugging and for cells that cannot be pickled."""

    name = "serial"
    workers = 1

    def run(self, fn: Callable[[Any, Any], Any], shared: Any, chunks: Sequence[Any]) -> Iterator[ChunkDone]:
        for index, chunk in enumerate(chunks):
            yield ChunkDone(index, fn(shared, chunk))


# ---------------------------------------------------------------- local processes

_installed: tuple[Callable[[Any, Any], Any], Any, Sequence[Any] | None] | None = None


def _install(fn: Callable[[Any, Any], Any], shared: Any, chunks: Sequence[Any] | None) -> None:
    """Pool initializer: keep the work function, its shared input and (forked workers) every chunk.

    A forked worker also freezes what it inherited (the recordings are millions of
    objects): the collector's full passes then skip them, which was measured at
    6–8% of a replay sweep's CPU, and leave their pages shared with the parent.
    """
    global _installed
    _installed = (fn, shared, chunks)
    if chunks is not None:
        gc.freeze()


def _run_sent(chunk: Any) -> Any:
    assert _installed is not None, "worker started without its shared input"
    fn, shared, _ = _installed
    return fn(shared, chunk)


def _run_inherited(index: int) -> Any:
    assert _installed is not None and _installed[2] is not None, "worker started without its chunks"
    fn, shared, chunks = _installed
    return fn(shared, chunks[index])


class ProcessExecutor:
    """A pool of local worker processes (``concurrent.futures``), one started per ``run``.

    Workers are forked where the platform allows it: they start in
    milliseconds, and they inherit the chunks from this process's memory, so
    a task carries only a chunk's index and nothing is pickled on the way in.
    With another start method (``start_method="spawn"``: a clean interpreter
    per worker) each chunk is pickled and sent with its task.
    """

    name = "processes"

    def __init__(self, workers: int | None = None, *, start_method: str | None = None):
        self.workers = _check_workers(workers)
        methods = multiprocessing.get_all_start_methods()
        if start_method is None:
            start_method = "fork" if "fork" in methods else methods[0]
        if start_method not in methods:
            raise ValueError(f"start method {start_method!r} is not available here; choose from {methods}")
        self.start_method = start_method

    def run(self, fn: Callable[[Any, Any], Any], shared: Any, chunks: Sequence[Any]) -> Iterator[ChunkDone]:
        if not chunks:
            return
        try:
            pickle.dumps((fn, shared))
        except Exception as exc:
            raise ValueError("the cell function and configs must be picklable to run on worker processes "
                             "(a top-level function, or an instance of a top-level class); use "
                             f"executor='serial' otherwise ({_describe(exc)})") from None
        forked = self.start_method == "fork"
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(chunks)),
                                   mp_context=multiprocessing.get_context(self.start_method),
                                   initializer=_install, initargs=(fn, shared, chunks if forked else None))
        try:
            pending = {(pool.submit(_run_inherited, index) if forked else pool.submit(_run_sent, chunk)): index
                       for index, chunk in enumerate(chunks)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=pending.__getitem__):
                    index = pending.pop(future)
                    error = future.exception()
                    yield ChunkDone(index, error=_describe(error)) if error else ChunkDone(index, future.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- Dask


def _run_shared(chunk: Any, *, fn: Callable[[Any, Any], Any], shared: Any) -> Any:
    return fn(shared, chunk)


class DaskExecutor:
    """Runs chunks on a ``dask.distributed`` cluster: the given client's, or a local one made per run.

    The shared input is scattered to every worker once and the chunks are
    scattered before their tasks are submitted, so no task graph carries
    recordings. A cluster made here has ``workers`` single-threaded worker
    processes and is closed when the run ends; a given client is left open,
    and its worker threads size the chunking unless ``workers`` is given.
    """

    name = "dask"

    def __init__(self, client: Any = None, *, workers: int | None = None):
        self.client = client
        if client is not None and workers is None:
            workers = max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
        self.workers = _check_workers(workers)

    def run(self, fn: Callable[[Any, Any], Any], shared: Any, chunks: Sequence[Any]) -> Iterator[ChunkDone]:
        if not chunks:
            return
        distributed = _import_distributed()
        client, cluster = self.client, None
        if client is None:
            cluster = distributed.LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None)
            client = distributed.Client(cluster)
        try:
            [shared_future] = client.scatter([shared], broadcast=True, hash=False)
            chunk_futures = client.scatter(list(chunks), hash=False)
            tasks = client.map(_run_shared, chunk_futures, fn=fn, shared=shared_future, pure=False)
            position = {task.key: index for index, task in enumerate(tasks)}
            for task in distributed.as_completed(tasks):
                index = position[task.key]
                if task.status == "finished":
                    yield ChunkDone(index, task.result())
                elif task.status == "error":
                    yield ChunkDone(index, error=_describe(task.exception()))
                else:
                    yield ChunkDone(index, error=f"the Dask task ended as {task.status!r}")
                task.release()
        finally:
            if cluster is not None:
                client.close()
                cluster.close()


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ImportError("the Dask executor needs dask.distributed: pip install 'hermeslab[eval]'") from None
    return distributed


def endpoint_slots(configs: Iterable[Any], *, exam: bool = False) -> int | None:
    """The fewest requests at once that the endpoints the configs' cells call can serve (None: no limit known).

    A cell calls its config's endpoint for LLM summaries (``compression.summariser: llm``) and, with ``exam``,
    for the recall exam; llama-server reports its slots (``GET /props``), other servers say nothing.
    """
    from ..providers.openai_compat import server_root
    from ..providers.server_props import read_props

    asked: dict[str, int | None] = {}
    for config in configs:
        url = config.model.base_url
        if not url or not (exam or config.compression.summariser == "llm") or url in asked:
            continue
        props = read_props(server_root(url), config.model.api_key)
        asked[url] = props.slots if props is not None else None
    known = [slots for slots in asked.values() if slots is not None]
    return min(known) if known else None


def make_executor(executor: str | Executor | Any = "processes", workers: int | None = None, *,
                  slots: int | None = None) -> Executor:
    """An executor from its name (``serial``, ``processes``, ``dask``), a Dask ``Client``, or itself.

    ``slots``: the most requests at once the model endpoint serves. A pool made here has no more
    workers than that (a cell's own calls go one at a time), so no request waits in the server's queue
    long enough for its timeout to run out; a given client or executor with more workers is refused.
    """
    if slots is not None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be a positive integer, got {slots!r}")
        if isinstance(executor, str):
            workers = min(_check_workers(workers), slots)
    chosen = _make(executor, workers)
    if slots is not None and chosen.workers > slots:
        raise ValueError(f"the endpoint serves {slots} request(s) at once, but the {chosen.name} executor runs "
                         f"{chosen.workers} workers; give it at most {slots}")
    return chosen


def _make(executor: str | Executor | Any, workers: int | None) -> Executor:
    if isinstance(executor, str):
        if executor == "serial":
            return SerialExecutor()
        if executor == "processes":
            return ProcessExecutor(workers)
        if executor == "dask":
            return DaskExecutor(workers=workers)
        raise ValueError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTOR_NAMES)}, "
                         "or pass a dask.distributed.Client")
    if type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed"):
        return DaskExecutor(executor, workers=workers)
    if callable(getattr(executor, "run", None)) and hasattr(executor, "name"):
        return executor
    raise TypeError(f"executor must be a name ({', '.join(EXECUTOR_NAMES)}), a dask.distributed.Client or an "
                    f"Executor, got {type(executor).__name__}")


def plan_chunks(weights: Sequence[int], target_chunks: int) -> list[list[int]]:
    """Split items (given as weights, in order) into contiguous runs of similar total weight.

    A run closes as soon as it reaches the average weight per chunk, so there
    are at most ``target_chunks + 1`` runs and never an empty one; one heavy
    item may make a run of its own. Empty input gives no chunks.
    """
    if target_chunks < 1:
        raise ValueError(f"target_chunks must be at least 1, got {target_chunks}")
    if not weights:
        return []
    budget = max(sum(weights) / target_chunks, 1)
    chunks: list[list[int]] = []
    current: list[int] = []
    load = 0.0
    for index, weight in enumerate(weights):
        current.append(index)
        load += weight
        if load >= budget:
            chunks.append(current)
            current, load = [], 0.0
    if current:
        chunks.append(current)
    return chunks
