"""``hermeslab exam``: the probe exam from the command line, its scorecard, and its exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermeslab.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "datasets" / "hermeslab_offline_sessions.jsonl"


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory) -> Path:
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()[:2]
    path = tmp_path_factory.mktemp("exam") / "two.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_exam_prints_a_scorecard_with_its_unit_answerer_judge_and_intervals(two_sessions, tmp_path, capsys):
    lab = tmp_path / "lab.duckdb"
    argv = ["exam", str(two_sessions), "--config", "hermes-0.19", "--config", "seed", "--window", "6000",
            "--lab", str(lab), "--quiet", "--resamples", "200"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 sessions" in out and "tiktoken cl100k_base" in out and "perfect-reader" in out and "match-1" in out
    assert "vs hermes-0.19 [95% CI]" in out and "overall" in out and "floor" in out
    first = [line for line in out.splitlines() if line.startswith("2 sessions")][0]
    assert main(argv) == 0  # the rerun reads every answer from the lab
    again = capsys.readouterr().out
    assert again.split("\n", 1)[1] == out.split("\n", 1)[1]
    assert " 0 answerer calls" in again.splitlines()[0] and first != again.splitlines()[0]


def test_an_exam_that_scores_nothing_exits_1_and_says_so(two_sessions, capsys):
    # A window this large never compacts: no probe, nothing scored.
    assert main(["exam", str(two_sessions), "--config", "seed", "--window", "500000", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "exit 1" in captured.err and "asked no probe" in captured.err
    assert " 0.000" not in captured.out


def test_a_bad_answerer_is_one_line_error(two_sessions):
    with pytest.raises(SystemExit, match="http"):
        main(["exam", str(two_sessions), "--config", "seed", "--answerer", "someone", "--quiet"])


def test_the_older_exam_option_of_ab_and_replay_is_still_there():
    from hermeslab.cli import build_parser

    for command in (["ab", "f.jsonl", "--config", "seed", "--config", "hermes-0.19", "--exam"],
                    ["replay", "f.jsonl", "--exam", "cache.sqlite"]):
        assert build_parser().parse_args(command).exam is not None
