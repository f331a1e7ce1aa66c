"""The parity-check contract the zoo benchmark reads: every check is found, and steps are counted as they differ."""

from __future__ import annotations

import pytest

from hermeslab.reference.zoo.checks import ParityCheck, Tally, discover


def test_the_packaged_agents_checks_are_found_by_their_preset():
    checks, broken = discover()
    assert {"aider-0.86.2", "langchain-1.5.0", "inspect-ai-0.3.285", "inspect-ai-0.3.285-trim"} <= set(checks)
    assert all(isinstance(check, ParityCheck) and check.variants for check in checks.values())
    assert broken == {}


def test_a_tally_counts_identical_steps_compactions_and_keeps_the_first_difference():
    tally = Tally()
    same = {"at": 1, "compacted": True, "view": ["summary", "m3"]}
    tally.add_session("a", [same, {"at": 4, "compacted": False, "view": ["m0"]}],
                      [same, {"at": 4, "compacted": False, "view": ["m1"]}])
    assert (tally.steps, tally.identical, tally.compactions_reference, tally.sessions_identical) == (2, 1, 1, 0)
    assert tally.share == 0.5 and tally.examples[0]["step"] == 1


def test_a_share_of_nothing_says_so_and_unequal_step_counts_are_refused():
    assert Tally().share is None and Tally().as_record()["identical_decisions_share"] is None
    with pytest.raises(ValueError, match="session x"):
        Tally().add_session("x", [{"at": 1}], [])
