"""Every built-in policy of another agent says where its numbers and rules were read.

hermeslab's own arms (``seed`` and the baselines) are this repository's
choices and cite nothing; every other built-in policy reproduces an outside
agent, so each must carry citations whose ``where`` names a file or page.
"""

from __future__ import annotations

import re

from hermeslab.policies.base import Citation
from hermeslab.policies.registry import BUILT_IN, registry

#: hermeslab's own policy modules: their numbers are the project's, not read from elsewhere.
OWN = frozenset({"hermeslab.policies.seed", "hermeslab.policies.baselines"})
#: A file name with an extension (``compact.rs``, ``model-config.md``) or a documentation page's address.
NAMES_A_FILE_OR_PAGE = re.compile(r"[\w-]+\.[A-Za-z]{1,5}\b|\b[\w-]+ page\b")


def citation_problems(origin: str, citations: tuple[Citation, ...]) -> list[str]:
    """What is wrong with one policy's citations, one line each."""
    if not citations:
        return [f"{origin}: no citations"]
    problems = []
    for citation in citations:
        if not citation.rule.strip() or not citation.hermeslab.strip():
            problems.append(f"{origin}: a citation without its rule or hermeslab setting: {citation!r}")
        if not NAMES_A_FILE_OR_PAGE.search(citation.where):
            problems.append(f"{origin}: {citation.rule!r} is cited at {citation.where!r}, which names no file or page")
    return problems


def test_the_checker_refuses_missing_empty_and_placeless_citations():
    assert citation_problems("m", ()) == ["m: no citations"]
    assert citation_problems("m", (Citation("r", "h", "compact.rs 33"),)) == []
    assert citation_problems("m", (Citation("r", "h", "model-config page, \"Default thresholds\""),)) == []
    assert len(citation_problems("m", (Citation("r", "h", ""),))) == 1
    assert len(citation_problems("m", (Citation("r", "h", "lines 3-9"),))) == 1
    assert len(citation_problems("m", (Citation("", "h", "a.py 1"),))) == 1


def test_every_outside_agents_built_in_policy_cites_where_it_was_read():
    outside = [entry for entry in registry().entries if entry.package == BUILT_IN and entry.origin not in OWN]
    assert {entry.origin for entry in outside} >= {f"hermeslab.policies.{name}" for name in (
        "codex", "gemini", "opencode", "roo", "claude", "hermes")}
    problems = [line for entry in outside for line in citation_problems(entry.origin, entry.policy.citations)]
    assert not problems, "\n".join(problems)
