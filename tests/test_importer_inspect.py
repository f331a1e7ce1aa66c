"""Inspect AI evaluation logs: one written by Inspect itself (its mock model, a real tool call), and broken copies."""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, system_message, use_tools
from inspect_ai.tool import tool

from hermeslab.eval.importers import detect, import_paths, sample_of
from hermeslab.eval.importers.inspect_eval import FORMAT
from hermeslab.recordings import Recording
from tests.importer_props import read_all

#: Where tiktoken looks for o200k_base, which Inspect counts tokens with; bpe-openai ships the same file.
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


@tool
def add():
    async def execute(x: int, y: int):
        """Add two numbers.

        Args:
            x: First number.
            y: Second number.
        """
        return x + y

    return execute


@pytest.fixture(scope="module")
def eval_log(tmp_path_factory) -> Path:
    """A log Inspect writes for two samples, one answered through a tool call, run offline on its mock model."""
    root = tmp_path_factory.mktemp("inspect")
    cache = root / "tiktoken"
    cache.mkdir()
    encoding = importlib.resources.files("bpe_openai") / "data" / "o200k_base.tiktoken.gz"
    (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(gzip.decompress(encoding.read_bytes()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        outputs = [ModelOutput.for_tool_call("mockllm/model", "add", {"x": 1, "y": 2}, tool_call_id="call_add"),
                   ModelOutput.from_content("mockllm/model", "3"),
                   ModelOutput.from_content("mockllm/model", "Paris")]
        task = Task(dataset=[Sample(input="What is 1 + 2?", target="3", id="sum"),
                             Sample(input="Capital of France?", target="Paris", id="capital")],
                    solver=[system_message("You answer briefly."), use_tools(add()), generate()], scorer=match())
        (log,) = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=outputs),
                              log_dir=str(root / "logs"), display="none", max_samples=1)
    assert log.status == "success", log.error
    return Path(log.location)


def test_inspects_own_log_gives_each_sample_its_conversation(eval_log):
    assert detect(sample_of(eval_log)) is FORMAT
    recordings = {r.meta["sample_id"]: r for r in read_all(FORMAT, eval_log)}
    total = recordings["sum"]
    assert total.messages == [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "What is 1 + 2?"},
        {"role": "assistant", "content": "tool call for tool add", "tool_calls": [
            {"id": "call_add", "type": "function", "function": {"name": "add", "arguments": '{"x": 1, "y": 2}'}}]},
        {"role": "tool", "tool_call_id": "call_add", "content": "3"},
        {"role": "assistant", "content": "3"}]
    assert [t["function"]["name"] for t in total.tools] == ["add"]
    assert total.tools[0]["function"]["parameters"]["required"] == ["x", "y"]
    assert total.model == "mockllm/model" and total.id.startswith("inspect/task/") and total.id.endswith("/sum/1")
    assert recordings["capital"].messages[-1] == {"role": "assistant", "content": "Paris"}


def test_a_folder_of_logs_is_imported_by_detection(eval_log, tmp_path):
    out = tmp_path / "inspect.jsonl"
    report = import_paths([eval_log.parent])
    assert sorted(r.meta["sample_id"] for r in report.recordings) == ["capital", "sum"] and not report.skipped
    assert report.taken[0].format == "inspect" and not out.exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_damaged_log_is_skipped_with_one_line_or_read_whole(eval_log, tmp_path, data):
    raw = bytearray(eval_log.read_bytes())
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 8))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "damaged.eval"
    path.write_bytes(bytes(raw))
    outcomes = read_all(FORMAT, path)
    for outcome in outcomes:
        if isinstance(outcome, Recording):
            assert json.dumps(outcome.to_dict())
