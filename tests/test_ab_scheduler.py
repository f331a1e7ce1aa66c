"""``hermeslab ab --scheduler``: a run on a Dask cluster started beforehand, as a user starts one.

The cluster is real: a ``dask scheduler`` process and two ``dask worker``
processes from this environment, started as the README starts them (on a free
port here) and torn down however the tests end. The run must store the same
rows as a serial run in this process, number for number.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas
import pytest

from hermeslab.cli import main
from hermeslab.context.hermes_texts import HERMES_WORDING, HERMESLAB_WORDING, SWITCH_ENV_VAR
from hermeslab.eval.dask_cluster import cpu_used, wording_problem, worker_problem
from hermeslab.eval.results import ResultsFile, read_results

distributed = pytest.importorskip("distributed")

OFFLINE = Path(__file__).resolve().parents[1] / "datasets" / "hermeslab_offline_sessions.jsonl"
#: Two configs at a small window, so both compress and the rows differ between them.
CONFIGS = ["--config", "seed,model.context_length=8000,compression.min_threshold_tokens=0",
           "--config", "hermes-0.19,model.context_length=8000"]
ARGS = ["ab", str(OFFLINE), *CONFIGS, "--limit", "2", "--resamples", "99"]
START_SECONDS = 60
#: A worker preload that makes hermeslab unimportable, as in an environment without it.
BLOCKER = '''
import sys

class NoHermeslab:
    def find_spec(self, name, path=None, target=None):
        if name == "hermeslab" or name.startswith("hermeslab."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoHermeslab())
'''


def _start(module: str, *args: str, log: Path) -> subprocess.Popen:
    """A ``dask`` command of this environment in a process group of its own (a worker's nanny has a child).

    It writes hermeslab's wording, as the tests' own process does (``conftest.py``).
    """
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", f"distributed.cli.{module}", *args], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, SWITCH_ENV_VAR: "off"})


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def start_scheduler(folder: Path, processes: list[subprocess.Popen]) -> str:
    """Start a scheduler on a free port (added to ``processes``, which the caller stops) and return its address."""
    address_file = folder / "scheduler.json"
    processes.append(_start("dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                            "--scheduler-file", str(address_file), log=folder / "scheduler.log"))
    deadline = time.monotonic() + START_SECONDS
    while not address_file.exists() or not address_file.read_text().strip():
        assert processes[-1].poll() is None, (folder / "scheduler.log").read_text()
        assert time.monotonic() < deadline, "the scheduler wrote no address"
        time.sleep(0.1)
    return json.loads(address_file.read_text())["address"]


def start_workers(address: str, count: int, folder: Path, processes: list[subprocess.Popen],
                  *worker_args: str) -> None:
    """Start ``count`` single-threaded workers (added to ``processes``) and wait until the scheduler has them."""
    for n in range(count):
        processes.append(_start("dask_worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                                *worker_args, log=folder / f"worker{n}.log"))
    with distributed.Client(address, timeout=START_SECONDS) as client:
        client.wait_for_workers(count, timeout=START_SECONDS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    folder, processes = tmp_path_factory.mktemp("cluster"), []
    try:
        address = start_scheduler(folder, processes)
        start_workers(address, 2, folder, processes)
        yield address
    finally:
        _stop(processes)


@pytest.mark.slow
def test_a_run_on_a_running_cluster_stores_the_rows_a_serial_run_stores(cluster, tmp_path, capsys):
    assert main([*ARGS, "--executor", "serial", "--out", str(tmp_path / "serial.duckdb")]) == 0
    capsys.readouterr()
    assert main([*ARGS, "--scheduler", cluster, "--out", str(tmp_path / "dask.duckdb")]) == 0
    out = capsys.readouterr().out
    used = re.search(rf"ran on the Dask cluster at {re.escape(cluster)}: 2 worker\(s\), 2 thread\(s\); their "
                     r"processes used ([0-9.]+) CPU seconds\n", out)
    assert used and float(used.group(1)) > 0
    serial, on_cluster = (read_results(tmp_path / f"{name}.duckdb").drop(columns="run_id")
                          for name in ("serial", "dask"))
    assert len(serial) == 4 and (serial["status"] == "ok").all()
    assert (serial.groupby("config")["compressions"].sum() > 0).all()
    pandas.testing.assert_frame_equal(serial, on_cluster)
    with ResultsFile(tmp_path / "dask.duckdb") as store:
        [run] = store.runs().to_dict("records")
    assert (run["executor"], run["workers"], run["computed"]) == ("dask", 2, 4)
    with distributed.Client(cluster) as client:  # the command closed its client and left the cluster running
        assert len(client.nthreads()) == 2
        clients = client.run_on_scheduler(lambda dask_scheduler: set(dask_scheduler.clients))
        assert clients - {"fire-and-forget"} == {client.id}


@pytest.mark.parametrize("extra, says", [
    (["--executor", "serial"], "--scheduler runs the cells on that Dask cluster; it cannot be combined with "
                               "--executor serial"),
    (["--executor", "processes"], "it cannot be combined with --executor processes"),
    (["--scheduler-timeout", "0"], "--scheduler-timeout must be a positive number of seconds, got 0"),
])
def test_options_that_do_not_go_with_a_scheduler_are_a_usage_error(tmp_path, capsys, extra, says):
    out = tmp_path / "ab.duckdb"
    assert main([*ARGS, "--scheduler", "tcp://127.0.0.1:8786", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and not out.exists()


def test_a_timeout_without_a_scheduler_is_a_usage_error(capsys):
    assert main([*ARGS, "--scheduler-timeout", "5"]) == 2
    assert capsys.readouterr().err == "hermeslab ab: --scheduler-timeout needs --scheduler\n"


def test_an_address_nothing_answers_at_is_one_line_naming_it_and_nothing_is_written(tmp_path, capsys):
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    out = tmp_path / "ab.duckdb"
    assert main([*ARGS, "--scheduler", address, "--scheduler-timeout", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hermeslab ab: cannot reach a Dask scheduler at {address}: ") and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.slow
def test_a_cluster_without_workers_or_with_one_that_cannot_import_hermeslab_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "no_hermeslab.py"
    blocker.write_text(BLOCKER)
    processes: list[subprocess.Popen] = []
    try:
        address = start_scheduler(tmp_path, processes)
        assert main([*ARGS, "--scheduler", address, "--scheduler-timeout", "1"]) == 2
        assert capsys.readouterr().err == (f"hermeslab ab: the Dask scheduler at {address} has no worker (waited "
                                           f"1 s); start some with: dask worker {address}\n")
        start_workers(address, 1, tmp_path, processes, "--preload", str(blocker))
        assert main([*ARGS, "--scheduler", address, "--out", str(tmp_path / "ab.duckdb")]) == 2
    finally:
        _stop(processes)
    err = capsys.readouterr().err
    assert err.startswith(f"hermeslab ab: the Dask scheduler at {address}: 1 of 1 worker(s) cannot import "
                          "hermeslab, e.g. tcp://127.0.0.1:")
    assert "ModuleNotFoundError: No module named 'hermeslab'" in err
    assert err.count("\n") == 1 and not (tmp_path / "ab.duckdb").exists()




def test_the_workers_answers_name_what_is_wrong():
    from hermeslab import __version__

    assert worker_problem({"tcp://a:1": __version__, "tcp://b:1": __version__}) is None
    assert worker_problem({"tcp://a:1": __version__, "tcp://b:1": "0.0.1"}).startswith(
        f"1 of 2 worker(s) run another hermeslab than this process's {__version__}, e.g. tcp://b:1: 0.0.1; ")
    assert "e.g. tcp://a:1: ImportError: gone; " in worker_problem({"tcp://a:1": ImportError("gone")})
    assert wording_problem({"tcp://a:1": HERMESLAB_WORDING}, HERMESLAB_WORDING) is None
    assert wording_problem({"tcp://a:1": HERMESLAB_WORDING, "tcp://b:1": HERMES_WORDING}, HERMESLAB_WORDING) \
        .startswith(f"1 of 2 worker(s) write {HERMES_WORDING} where this process writes {HERMESLAB_WORDING} "
                    "for configs with compression.hermes_texts, e.g. tcp://b:1; ")


def test_cpu_is_summed_only_over_workers_present_throughout():
    assert cpu_used({"a": 1.0, "b": 2.0}, {"a": 1.5, "b": 4.0}) == pytest.approx(2.5)
    assert cpu_used({"a": 1.0}, {"a": 1.5, "b": 4.0}) is None  # a worker joined
    assert cpu_used({"a": 3.0}, {"a": 0.5}) is None  # the worker restarted


def test_a_worker_or_scheduler_gone_after_the_run_leaves_the_cpu_figure_unknown():
    from hermeslab.eval.dask_cluster import worker_cpu_seconds

    class Answering:
        def run(self, function, on_error="raise"):
            assert on_error == "return"
            return {"a": 2.0, "b": OSError("worker b closed")}

    class Gone:
        def run(self, function, on_error="raise"):
            raise OSError("scheduler closed")

    assert worker_cpu_seconds(Answering()) == {"a": 2.0}
    assert cpu_used({"a": 1.0, "b": 1.0}, worker_cpu_seconds(Answering())) is None
    assert cpu_used({"a": 1.0}, worker_cpu_seconds(Gone())) is None
