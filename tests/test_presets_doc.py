"""docs/presets.md and the README's preset table are checked against the policy modules, so neither drifts.

A preset's section in docs/presets.md is a heading ``## NAMES — title`` or
``### NAMES — title`` whose NAMES (before the dash, separated by commas or
"and", a ``*`` standing for any run of characters) name registered presets;
its text runs to the next heading of the same or a higher level and names
every commit, version and date its module's ``source`` gives.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from hermeslab.policies.registry import registry

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "presets.md"
README = ROOT / "README.md"

HEADING = re.compile(r"^(#{2,3}) (.+?) — (.+)$")
#: A commit (7 to 40 hex digits with a digit among them), a dotted version or a date.
REVISION = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![0-9A-Za-z])"
                      r"|(?<![\d.])\d+(?:\.\d+)+(?![\d.]*\d)|(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")


@dataclass(frozen=True)
class Section:
    patterns: tuple[str, ...]
    text: str
    line: int


def sections(markdown: str) -> list[Section]:
    """Every preset section of a page: the names its heading gives and its text down to the next such level."""
    lines = markdown.splitlines()
    found = []
    for index, line in enumerate(lines):
        match = HEADING.match(line)
        if match is None:
            continue
        level = len(match.group(1))
        end = next((j for j in range(index + 1, len(lines))
                    if re.match(r"#{1,%d} " % level, lines[j])), len(lines))
        names = [name.strip(" `") for name in re.split(r",| and ", match.group(2))]
        found.append(Section(tuple(name for name in names if name), "\n".join(lines[index:end]), index + 1))
    return found


def revisions(source: str) -> list[str]:
    return REVISION.findall(source)


def test_the_checker_reads_headings_names_and_revisions():
    page = ("# Title\n## a-1 and `b-2` — Agent\ntext abc1234\n### How it counts\nmore\n## c-* — Other\nx\n"
            "## Not a preset section\n")
    found = sections(page)
    assert [(s.patterns, s.line) for s in found] == [(("a-1", "b-2"), 2), (("c-*",), 6)]
    assert "more" in found[0].text and "Not a preset" not in found[1].text
    assert revisions("openai/codex @ 0100b103 (compact.rs), v3.65.0, docs 2026-08-22, cafebabe") == [
        "0100b103", "3.65.0", "2026-08-22"]


def test_every_registered_preset_has_a_section_naming_its_sources_revisions():
    found = sections(DOC.read_text(encoding="utf-8"))
    problems = []
    for name, (preset, entry) in registry().presets.items():
        mine = [s for s in found if any(fnmatch.fnmatchcase(name, pattern) for pattern in s.patterns)]
        if not mine:
            problems.append(f"{name} ({entry.origin}): no section in docs/presets.md")
            continue
        missing = [rev for rev in revisions(entry.policy.source) if not any(rev in s.text for s in mine)]
        if missing:
            problems.append(f"{name}: its section (line {mine[0].line}) does not name {', '.join(missing)} "
                            f"from its source {entry.policy.source!r}")
    assert not problems, "\n".join(problems)


def test_every_section_names_presets_that_exist():
    names = list(registry().presets)
    unknown = [f"line {s.line}: {pattern}" for s in sections(DOC.read_text(encoding="utf-8"))
               for pattern in s.patterns if not fnmatch.filter(names, pattern)]
    assert not unknown, "\n".join(unknown)


def readme_table_rows(markdown: str) -> list[list[str]]:
    """The rows of the README's preset table (between its two marker comments), cells stripped of backticks."""
    start, end = markdown.index("<!-- presets table -->"), markdown.index("<!-- end presets table -->")
    rows = [line for line in markdown[start:end].splitlines() if line.startswith("| ")]
    return [[cell.strip().strip("`") for cell in row.strip("|").split("|")] for row in rows[1:]]


def test_the_readme_preset_table_lists_every_preset_with_its_agent_fidelity_and_source():
    rows = readme_table_rows(README.read_text(encoding="utf-8"))
    expected = [[name, entry.policy.agent, entry.policy.fidelity, entry.policy.source]
                for name, (preset, entry) in registry().presets.items()]
    assert rows == expected
