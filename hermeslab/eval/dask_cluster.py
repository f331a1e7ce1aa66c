"""A Dask cluster someone already started (``dask scheduler``, ``dask worker``), checked before cells are sent to it.

The cells reach the workers as pickles that name hermeslab's functions, so a
worker started from another environment fails only at its first task, with an
unpickling error that does not say why. ``connect`` therefore asks first: the
scheduler answers within a timeout, it has workers, every worker imports
the A/B runner at this process's hermeslab version, and, when a config writes
Hermes's texts, every worker writes the same wording as this process (which
the run's report names). The workers' CPU time is
read before and after a run (``worker_cpu_seconds``), since the cells' work
happens in their processes, not in this one.
"""

from __future__ import annotations

import pkgutil
import time
from collections.abc import Mapping
from typing import Any

from hermeslab import __version__
from hermeslab.context.hermes_texts import HERMES_WORDING, HERMESLAB_WORDING, installed_texts

from .executors import _import_distributed

#: Seconds to wait for the scheduler to answer, and then for its first worker, unless told otherwise.
CONNECT_SECONDS = 10.0
#: What each worker imports to show it can run cells: the runner's module, answering with hermeslab's version.
RUNNER_VERSION = "hermeslab.eval.ab:__version__"


class ClusterError(Exception):
    """The cluster cannot run the cells; the message says why in one line."""


def connect(address: str, *, timeout: float | None = None, hermes_texts: bool = False) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address`` whose workers can all run cells.

    Raises ClusterError when the scheduler does not answer, has no worker, or
    has a worker that cannot import hermeslab or runs another version of it,
    or (``hermes_texts``: a config writes Hermes's texts) writes another
    wording than this process. ``timeout``: seconds, default ``CONNECT_SECONDS``.
    """
    timeout = CONNECT_SECONDS if timeout is None else timeout
    if not timeout > 0:
        raise ValueError(f"the timeout must be a positive number of seconds, got {timeout!r}")
    distributed = _import_distributed()
    try:
        client = distributed.Client(address, timeout=timeout)
    except Exception as exc:  # refused, timed out, a malformed address, something else listening there
        raise ClusterError(f"cannot reach a Dask scheduler at {address}: {_reason(exc)}") from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise ClusterError(f"the Dask scheduler at {address} has no worker (waited {timeout:g} s); "
                               f"start some with: dask worker {address}") from None
        problem = worker_problem(client.run(pkgutil.resolve_name, RUNNER_VERSION, on_error="return"))
        if problem is None and hermes_texts:
            problem = wording_problem(client.run(hermes_wording), hermes_wording())
        if problem is not None:
            raise ClusterError(f"the Dask scheduler at {address}: {problem}")
    except BaseException:
        client.close()
        raise
    return client


def worker_problem(answers: Mapping[str, Any]) -> str | None:
    """Why the workers cannot run cells, from each one's answer to importing the runner (None: they all can)."""
    failed = {worker: answer for worker, answer in answers.items() if isinstance(answer, BaseException)}
    if failed:
        worker, error = next(iter(failed.items()))
        return (f"{len(failed)} of {len(answers)} worker(s) cannot import hermeslab, e.g. {worker}: "
                f"{_reason(error)}; start the workers from the environment hermeslab is installed in")
    other = {worker: answer for worker, answer in answers.items() if answer != __version__}
    if other:
        worker, version = next(iter(other.items()))
        return (f"{len(other)} of {len(answers)} worker(s) run another hermeslab than this process's "
                f"{__version__}, e.g. {worker}: {version}; start the workers from this environment")
    return None


def hermes_wording() -> str:
    """The wording a config with ``compression.hermes_texts`` writes in this process.

    It depends on the process's surroundings (an installed Hermes reference,
    ``HERMESLAB_HERMES_TEXTS``), so the workers are asked for theirs.
    """
    return HERMES_WORDING if installed_texts() is not None else HERMESLAB_WORDING


def wording_problem(answers: Mapping[str, str], here: str) -> str | None:
    """Why the workers' rows would not be in the wording the run reports (``here``, this process's), or None."""
    other = {worker: answer for worker, answer in answers.items() if answer != here}
    if not other:
        return None
    worker, wording = next(iter(other.items()))
    return (f"{len(other)} of {len(answers)} worker(s) write {wording} where this process writes {here} for "
            f"configs with compression.hermes_texts, e.g. {worker}; give the workers the same "
            "HERMESLAB_HERMES_TEXTS setting and Hermes reference install as this process")


def worker_cpu_seconds(client: Any) -> dict[str, float]:
    """CPU seconds each worker's process has used so far, by worker address; a worker that does not answer (or a
    scheduler that is gone) is left out, which ``cpu_used`` reads as a cluster that changed."""
    try:
        answers = client.run(time.process_time, on_error="return")
    except Exception:  # the scheduler went away after the run: the rows are in, only this figure is unknown
        return {}
    return {worker: seconds for worker, seconds in answers.items() if not isinstance(seconds, BaseException)}


def cpu_used(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """CPU seconds the workers used between two readings, or None when a worker left or restarted in between."""
    if set(before) != set(after) or any(after[worker] < before[worker] for worker in before):
        return None
    return sum(after[worker] - before[worker] for worker in before)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
