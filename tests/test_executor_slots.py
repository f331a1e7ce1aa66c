"""An A/B never sends a model endpoint more requests at once than it serves."""

from __future__ import annotations

import pytest

from hermeslab.core.config import Config
from hermeslab.eval.executors import SerialExecutor, endpoint_slots, make_executor
from hermeslab.providers import LocalServer, OfflineModel


def test_a_pool_made_here_has_no_more_workers_than_slots():
    assert make_executor("processes", 4, slots=1).workers == 1
    assert make_executor("processes", 2, slots=8).workers == 2
    assert make_executor("serial", slots=1).workers == 1


def test_a_given_executor_with_more_workers_than_slots_is_refused():
    class Wide(SerialExecutor):
        workers = 3

    with pytest.raises(ValueError, match="serves 2 request"):
        make_executor(Wide(), slots=2)
    with pytest.raises(ValueError, match="slots must be a positive integer"):
        make_executor("serial", slots=0)


def test_the_slots_come_from_the_endpoints_the_cells_call():
    server = LocalServer(OfflineModel(), personality="llama-server", slots=3)
    url = server.start()
    try:
        llm = Config().with_overrides({"model.base_url": url, "compression.summariser": "llm"})
        extractive = Config().with_overrides({"model.base_url": url, "compression.summariser": "extractive"})
        assert endpoint_slots([llm]) == 3
        assert endpoint_slots([extractive]) is None  # no cell of it calls the endpoint
        assert endpoint_slots([extractive], exam=True) == 3  # the exam does
        assert endpoint_slots([Config()]) is None
    finally:
        server.stop()
