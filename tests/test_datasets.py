"""The project's own recorded sessions: valid, as documented, long enough to compress, and reproducible."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from hermeslab.policies.loading import apply_preset
from hermeslab.core.config import Config
from hermeslab.eval.recording import load_recordings
from hermeslab.eval.replay_compression import FixedSummariser, replay_session
from hermeslab.recordings import recording_line

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
FILE = DATASETS / "hermeslab_offline_sessions.jsonl"
README = (DATASETS / "README.md").read_text(encoding="utf-8")
#: The tools the chores use; the sessions were offered these and any other tool a logged runtime adds.
TOOLS = {"read_file", "write_file", "list_dir", "search_files", "terminal", "todo"}


def _script():
    """datasets/make_offline_sessions.py as a module (it is a script, not part of the package)."""
    if "make_offline_sessions" not in sys.modules:
        spec = importlib.util.spec_from_file_location("make_offline_sessions", DATASETS / "make_offline_sessions.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules["make_offline_sessions"]


@pytest.fixture(scope="module")
def sessions():
    return load_recordings(FILE)


def test_the_file_validates_and_the_readme_gives_its_figures(sessions):
    script = _script()
    assert len(sessions) == 36 == len({s.id for s in sessions})
    size = FILE.stat().st_size
    assert size < 10_000_000
    written = README.split(script.FIGURES_START, 1)[1].split(script.FIGURES_END, 1)[0]
    assert written.startswith("\n" + script.file_figures(sessions, size) + "\n"), \
        "the README's figures are not those of the file: rerun datasets/make_offline_sessions.py"


def test_every_session_is_a_multi_turn_tool_using_chat(sessions):
    script = _script()
    assert [s.id for s in sessions] == [f"hermeslab_offline/{task.name}" for task in script.tasks()]
    for session in sessions:
        roles = [m["role"] for m in session.messages]
        assert roles[0] == "system" and roles.count("user") >= 11
        assert sum(len(m.get("tool_calls", [])) for m in session.messages) >= 11
        offered = {t["function"]["name"] for t in session.tools}
        called = {c["function"]["name"] for m in session.messages for c in m.get("tool_calls", [])}
        assert called <= offered and TOOLS <= offered
        assert session.model == "hermeslab-offline"
        assert session.meta["lineage"] == [f"s{i}" for i in range(len(session.meta["lineage"]))]
        for point in session.meta["compression_points"]:
            assert 0 < point["at_message"] < len(session.messages) and point["context"]


def test_replays_at_small_windows_compress_every_session(sessions):
    config = apply_preset(Config(), "seed")
    for session in sessions:
        report = replay_session(session.messages, session.tools, config=config, summariser=FixedSummariser(),
                                context_length=4_000)
        assert len(report.compressions) >= 1, session.id


def test_the_script_gives_the_same_bytes_twice():
    script = _script()
    tasks = script.tasks()
    assert len(tasks) == 36 and len({t.name for t in tasks}) == 36
    assert {(t.context_length, t.in_place) for t in tasks} == {(6_000, False), (8_000, False), (6_000, True),
                                                                (8_000, True)}
    pair = [tasks[0], tasks[2]]  # one rotating, one compressing in place
    assert [t.in_place for t in pair] == [False, True]
    first = [recording_line(r) for r in script.build(pair)]
    second = [recording_line(r) for r in script.build(pair)]
    assert first == second
    assert "hermeslab-datasets-" not in "".join(first)  # the temporary workspace never shows
