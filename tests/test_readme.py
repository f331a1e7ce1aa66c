"""The README's two commands are what a new user runs; CI must run the same test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = []
    for block in blocks[:2]:
        lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        commands.append(" ".join(lines))
    return commands


def test_readme_opens_with_an_install_and_demo_command_and_a_test_command():
    demo, tests = readme_commands()
    assert demo.endswith("hermeslab demo")
    assert "pip install" in tests and "pytest" in tests


def test_ci_runs_the_readme_commands_verbatim_the_plain_install_first():
    """Command 1 runs in a fresh venv without extras, so a dependency only a test extra brings in fails CI."""
    demo, tests = readme_commands()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert demo in ci_lines and tests in ci_lines
    assert ci_lines.index(demo) < ci_lines.index(tests)
    assert "test ! -e .venv" in ci_lines[:ci_lines.index(demo)]
