"""The Hermes reference harness: the real hermes-agent 0.19.0 compressor in its own venv.

``hermeslab reference install hermes`` installs hermes-agent into its
virtualenv (a few minutes). Without that venv these tests are skipped with that
command as the reason, except under CI=true, where they fail (CI installs it first).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from shared_data import DATASETS, dataset
from shared_data import hermes_venv as shared_hermes_venv

from hermeslab.reference.client import WORKER_DIR, HermesReference
from hermeslab.reference.errors import HermesInputError, HermesReferenceError
from hermeslab.reference.venv import install_hermes_venv, venv_python

pytestmark = pytest.mark.slow

TAU2 = DATASETS / "tau2_bench_gpt41.jsonl"


@pytest.fixture(scope="module", name="hermes_venv")
def hermes_venv_fixture() -> Path:
    return shared_hermes_venv()


@pytest.fixture(scope="module")
def reference(hermes_venv: Path):
    with HermesReference(hermes_venv, timeout=120) as ref:
        yield ref


def call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def coding_session(
    rounds: int = 12, *, output_chars: int = 1_200, duplicate: tuple[int, int] | None = None
) -> list[dict]:
    """system, user task, then rounds of assistant(tool call) -> tool result, a closing exchange."""
    messages = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Fix the failing date parser in utils/dates.py and run the tests."},
    ]
    for i in range(rounds):
        messages.append({
            "role": "assistant",
            "content": f"Step {i}: inspecting the next file.",
            "tool_calls": [call(f"call_{i}", "terminal", {"command": f"cat module_{i}.py " + "-v " * 200})],
        })
        body = f"line {i} of module output\n" * (output_chars // 24)
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    if duplicate is not None:
        same = "identical listing of the project tree\n" * 12
        for index in duplicate:
            messages[2 + 2 * index + 1]["content"] = same
    messages.append({"role": "user", "content": "Thanks, please summarise what changed."})
    messages.append({"role": "assistant", "content": "The parser now accepts ISO week dates."})
    return messages


def tool_result_index(round_index: int) -> int:
    return 2 + 2 * round_index + 1


# ---------------------------------------------------------------- plan


@pytest.mark.parametrize(
    ("context_length", "threshold", "tail", "max_summary"),
    [
        (32_000, 27_200, 5_440, 1_600),
        (64_000, 54_400, 10_880, 3_200),
        (128_000, 96_000, 19_200, 6_400),
        (200_000, 150_000, 30_000, 10_000),
        (400_000, 300_000, 60_000, 10_000),
        (512_000, 256_000, 51_200, 10_000),
        (1_000_000, 500_000, 100_000, 10_000),
    ],
)
def test_budgets_follow_hermes_table(reference, context_length, threshold, tail, max_summary):
    plan = reference.plan(coding_session(), context_length=context_length)
    assert plan["context_length"] == context_length
    assert (plan["threshold_tokens"], plan["tail_token_budget"], plan["max_summary_tokens"]) == (
        threshold, tail, max_summary,
    )


def test_plan_indices_are_sane_and_match_the_real_output(reference):
    messages = coding_session()
    plan = reference.plan(messages, context_length=32_000)
    n = len(messages)
    assert plan["outcome"] == "compressed"
    assert plan["head_size"] == 4  # system + protect_first_n (3)
    assert 0 < plan["compress_start"] < plan["compress_end"] <= n
    assert plan["compress_start"] == plan["head_size"]  # index 4 is an assistant, no tool results to skip
    assert plan["summarised_indices"] == [plan["compress_start"], plan["compress_end"]]
    assert plan["previous_summary_index"] is None
    assert plan["input_len"] == n

    output = reference.compress(messages, context_length=32_000)["messages"]
    assert len(output) == plan["output_len"]
    dropped = plan["compress_end"] - plan["compress_start"]
    assert plan["output_len"] in (n - dropped + 1, n - dropped)  # standalone summary, or merged into the tail
    kept_tail = messages[plan["compress_end"]:]
    assert [m["role"] for m in output[-len(kept_tail):]] == [m["role"] for m in kept_tail]
    assert output[-1]["content"] == messages[-1]["content"]


def test_plan_reports_the_older_of_two_identical_results_as_deduplicated(reference):
    messages = coding_session(duplicate=(3, 10))
    plan = reference.plan(messages, context_length=200_000)
    actions = {entry["index"]: entry["action"] for entry in plan["pruned"]}
    assert actions.get(tool_result_index(3)) == "dedupe"
    assert tool_result_index(10) not in actions


def test_short_duplicates_are_left_alone(reference):
    messages = coding_session(duplicate=(3, 10))
    for index in (3, 10):
        messages[tool_result_index(index)]["content"] = "ok"
    plan = reference.plan(messages, context_length=200_000)
    assert all(entry["index"] not in (tool_result_index(3), tool_result_index(10)) for entry in plan["pruned"])


def test_prune_rewrites_stay_below_the_boundary(reference):
    messages = coding_session(rounds=20)
    plan = reference.plan(messages, context_length=16_000)
    n = len(messages)
    boundary = plan["prune_boundary"]
    assert boundary is not None and 0 < boundary <= n - 20  # protect_last_n keeps at least 20
    actions = {entry["index"]: entry["action"] for entry in plan["pruned"]}
    assert set(actions.values()) == {"one_line", "shrink_args"}
    assert all(index < boundary for index in actions)
    # every old tool result and every long argument below the boundary was rewritten
    for index in range(boundary):
        role = messages[index]["role"]
        if role == "tool":
            assert actions.get(index) == "one_line"
        elif role == "assistant" and messages[index].get("tool_calls"):
            assert actions.get(index) == "shrink_args"


def test_state_after_a_compaction_drops_head_protection(reference):
    messages = coding_session()
    plan = reference.plan(messages, context_length=32_000, compression_count=1)
    assert plan["head_size"] == 1
    assert plan["compress_start"] == 1


def test_an_earlier_summary_inside_the_window_is_not_summarised_again(reference):
    first = reference.compress(coding_session(), context_length=32_000)["messages"]
    summary_index = next(i for i, m in enumerate(first) if m.get("_compressed_summary"))
    grown = [m for m in first]
    for i in range(12, 24):
        grown.append({
            "role": "assistant", "content": f"Step {i}.",
            "tool_calls": [call(f"more_{i}", "terminal", {"command": f"pytest -k case_{i}"})],
        })
        grown.append({"role": "tool", "tool_call_id": f"more_{i}", "content": f"case {i} passed\n" * 80})
    grown.append({"role": "user", "content": "And the changelog?"})
    grown.append({"role": "assistant", "content": "Added an entry."})
    plan = reference.plan(grown, context_length=32_000, compression_count=1)
    assert plan["outcome"] == "compressed"
    assert plan["previous_summary_index"] == summary_index
    start, end = plan["summarised_indices"]
    assert start == max(plan["compress_start"], summary_index + 1)
    assert end == plan["compress_end"]


def test_too_few_messages_is_reported_not_invented(reference):
    plan = reference.plan(coding_session(rounds=1)[:5], context_length=32_000)
    assert plan["outcome"] == "too_small"
    assert plan["compress_start"] is None and plan["summarised_indices"] is None
    assert plan["output_len"] == 5


# ---------------------------------------------------------------- compress and timing


def test_compress_returns_hermes_output_and_its_time(reference):
    result = reference.compress(coding_session(), context_length=32_000)
    assert result["elapsed_ms"] > 0
    assert result["messages"][0]["role"] == "system"
    assert sum(1 for m in result["messages"] if m.get("_compressed_summary")) == 1


def test_time_compress_returns_one_timing_per_repeat(reference):
    timings = reference.time_compress(coding_session(), context_length=32_000, repeats=5)
    assert len(timings) == 5
    assert all(0 < t < 5_000 for t in timings)


# ---------------------------------------------------------------- replay


def tau2_sessions(count: int) -> list[dict]:
    with dataset(TAU2.name).open(encoding="utf-8") as handle:
        sessions = [json.loads(line) for line in handle]
    return sorted(sessions, key=lambda s: len(s["messages"]), reverse=True)[:count]


def test_replay_of_three_tau2_sessions_has_consistent_totals(reference):
    sessions = tau2_sessions(3)
    results = reference.replay_many(sessions, context_length=16_000)
    assert len(results) == 3
    for session, result in zip(sessions, results):
        calls, totals = result["calls"], result["totals"]
        threshold = result["threshold_tokens"]
        assert threshold == 13_600
        assert result["id"] == session["id"]
        assert totals["calls"] == len(calls) == sum(1 for m in session["messages"] if m["role"] == "assistant")
        compressed = [c for c in calls if c["compressed"]]
        records = [c["compress"] for c in compressed]
        assert totals["compress_calls"] == len(compressed)
        assert totals["over_window_after_compress"] == sum(1 for c in compressed if c["prompt_after"] > 16_000)
        assert totals["two_summary_outputs"] == sum(1 for r in records if r["summaries_in_output"] > 1)
        assert totals["missing_latest_user_outputs"] == sum(1 for r in records if r["latest_user_missing"])
        assert totals["summary_only_compressions"] == sum(1 for r in records if r["summary_only"])
        for c in calls:
            assert c["compressed"] == ("compress" in c)
            if c["compressed"]:
                assert c["prompt_before"] >= threshold
                assert c["compress"]["output_len"] <= c["compress"]["input_len"] + 1
            else:
                assert c["prompt_after"] == c["prompt_before"]
        # consecutive uncompressed calls only ever see the context grow
        for previous, current in zip(calls, calls[1:]):
            assert current["prompt_before"] >= previous["prompt_after"]
    assert sum(r["totals"]["compress_calls"] for r in results) > 0

    single = reference.replay(sessions[0]["messages"], context_length=16_000, tools=sessions[0]["tools"])
    assert single["totals"] == results[0]["totals"]


# ---------------------------------------------------------------- errors


def test_bad_arguments_are_rejected_before_reaching_the_worker(reference):
    with pytest.raises(HermesInputError, match="not valid chat messages"):
        reference.plan([{"role": "narrator", "content": "x"}], context_length=32_000)
    with pytest.raises(ValueError, match="context_length must be at least 1"):
        reference.plan(coding_session(), context_length=0)
    with pytest.raises(HermesInputError, match="must be an integer"):
        reference.compress(coding_session(), context_length=True)
    with pytest.raises(HermesInputError, match="repeats"):
        reference.time_compress(coding_session(), context_length=32_000, repeats=0)
    with pytest.raises(HermesInputError, match="session 1"):
        reference.replay_many([{"messages": []}, {"transcript": []}], context_length=16_000)


def test_worker_errors_are_clear_and_the_worker_keeps_serving(reference):
    with pytest.raises(HermesReferenceError, match="unknown op 'explode'"):
        reference.request("explode")
    with pytest.raises(HermesReferenceError, match="'context_length' must be an integer"):
        reference.request("plan", {"messages": [], "context_length": "big"})
    broken = coding_session()
    broken[4]["tool_calls"] = [{"id": "call_1", "type": "function", "function": "terminal ls"}]  # not an object
    with pytest.raises(HermesReferenceError) as failure:
        reference.request("compress", {"messages": broken, "context_length": 32_000})
    assert "failed inside Hermes" in str(failure.value)
    assert "Traceback" in failure.value.worker_traceback
    assert reference.running
    assert reference.ping() >= 0
    assert reference.plan(coding_session(), context_length=32_000)["outcome"] == "compressed"


def worker_environment(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["HERMES_HOME"] = str(home)
    return env


def test_worker_answers_malformed_lines_and_continues(hermes_venv, tmp_path):
    lines = ["garbage{", "[1, 2]", json.dumps({"id": 7, "op": "ping"}), ""]
    completed = subprocess.run(
        [str(venv_python(hermes_venv)), "-I", str(WORKER_DIR)],
        input="\n".join(lines), capture_output=True, text=True, env=worker_environment(tmp_path), timeout=60,
    )
    replies = [json.loads(line) for line in completed.stdout.splitlines()]
    assert completed.returncode == 0
    assert len(replies) == 3
    assert replies[0]["ok"] is False and "not JSON" in replies[0]["error"]
    assert replies[1]["ok"] is False and "JSON object" in replies[1]["error"]
    assert replies[2] == {"id": 7, "ok": True, "result": {}}


def test_worker_refuses_to_run_next_to_provider_keys(hermes_venv, tmp_path):
    env = worker_environment(tmp_path)
    env["EXAMPLE_API_KEY"] = "sk-not-a-real-key"
    completed = subprocess.run(
        [str(venv_python(hermes_venv)), "-I", str(WORKER_DIR)],
        input="", capture_output=True, text=True, env=env, timeout=60,
    )
    assert completed.returncode != 0
    assert "EXAMPLE_API_KEY" in completed.stderr
    assert completed.stdout == ""


def test_a_dead_worker_is_reported_not_waited_for(hermes_venv):
    ref = HermesReference(hermes_venv, timeout=60)
    ref.start()
    try:
        os.kill(ref.info["pid"], signal.SIGKILL)
        with pytest.raises(HermesReferenceError, match="exited|not running"):
            ref.ping()
        assert not ref.running
    finally:
        ref.close()


# ---------------------------------------------------------------- the venv


def test_a_completed_venv_is_reused_without_reinstalling(hermes_venv, monkeypatch):
    import hermeslab.reference.venv as venv_module

    def no_build(*args, **kwargs):
        pytest.fail("a completed venv was built again")

    monkeypatch.setattr(venv_module, "_build_venv", no_build)
    monkeypatch.setattr(venv_module.subprocess, "Popen", no_build)
    assert install_hermes_venv(hermes_venv, echo=pytest.fail) == hermes_venv


def test_a_foreign_directory_is_never_replaced(tmp_path):
    target = tmp_path / "not-a-venv"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(HermesReferenceError, match="not a virtualenv"):
        install_hermes_venv(target)
    assert (target / "notes.txt").read_text() == "keep me"


def test_an_unreachable_index_gives_a_clear_install_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "3")
    target = tmp_path / "hermes-venv"
    with pytest.raises(HermesReferenceError, match="no network access"):
        install_hermes_venv(target, echo=lambda line: None)
    assert not (target / "hermeslab-venv.json").exists()
