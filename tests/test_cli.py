"""The ``hermeslab`` command answers --help and an empty ``sessions`` without importing the agent stack.

Start-up times are measured by benchmarks/startup.py; these tests check what
makes them short (which modules a command imports) and what a user reads.
"""

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermeslab.cli import _lab_path, build_parser
from hermeslab.terminal import PROMPT as CHAT_PROMPT
from hermeslab.core.config import Config

EXE = Path(sys.executable).with_name("hermeslab")
HEAVY = ("pandas", "duckdb", "openai", "hermeslab.agent", "hermeslab.store", "hermeslab.providers.server")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices


def imported_after(code: str, cwd: Path) -> dict:
    """Run ``code`` in a fresh interpreter; it must print one JSON object: what it saw, and which HEAVY it loaded."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        seen["heavy"] = sorted(name for name in {HEAVY!r} if name in sys.modules)
        print(json.dumps(seen))
    """)
    result = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_help_lists_every_subcommand():
    result = subprocess.run([str(EXE), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for name in subcommands():
        assert re.search(rf"^ +{re.escape(name)}( |$)", result.stdout, flags=re.M), name


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_has_plain_help(name):
    parser = subcommands()[name]
    undocumented = [action.dest for action in parser._actions if not action.help]
    assert undocumented == []
    assert "``" not in parser.format_help()


def test_top_level_help_is_plain_text():
    assert "``" not in build_parser().format_help()


def test_sessions_without_a_lab_says_so_before_importing_the_stack(tmp_path):
    seen = imported_after("""
        import contextlib, io
        from hermeslab.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["sessions"])
        seen = {"code": code, "out": out.getvalue()}
    """, tmp_path)
    assert seen["code"] == 1
    assert seen["out"] == f"no lab database at {tmp_path.resolve() / '.hermeslab' / 'lab.duckdb'}\n"
    assert seen["heavy"] == []


def test_help_imports_nothing_heavy(tmp_path):
    seen = imported_after("""
        import contextlib, io
        from hermeslab.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(["sessions", "--help"])
        seen = {}
    """, tmp_path)
    assert seen["heavy"] == []


def test_providers_import_their_backends_on_first_use(tmp_path):
    seen = imported_after("""
        import sys
        import hermeslab.providers as providers
        before = sorted(name for name in ("openai", "hermeslab.providers.server") if name in sys.modules)
        from hermeslab.providers import OFFLINE_MODEL_NAME, LocalServer
        try:
            providers.NoSuchBackend
        except AttributeError as exc:
            missing = str(exc)
        seen = {"before": before, "name": OFFLINE_MODEL_NAME, "server": LocalServer.__module__,
                "all": [name for name in providers.__all__ if getattr(providers, name, None) is None],
                "missing": missing}
    """, tmp_path)
    assert seen["before"] == []
    assert seen["name"] == "hermeslab-offline"
    assert seen["server"] == "hermeslab.providers.server"
    assert seen["all"] == []  # every exported name resolves
    assert "NoSuchBackend" in seen["missing"]


def test_the_cli_default_lab_is_the_stores(tmp_path, monkeypatch):
    from hermeslab.runtime import lab_path

    monkeypatch.chdir(tmp_path)
    no_lab = argparse.Namespace(lab=None, config=None)
    assert _lab_path(no_lab) == lab_path(Config())
    configured = Config().with_overrides({"store.path": str(tmp_path / "elsewhere.duckdb")})
    assert _lab_path(no_lab, configured) == lab_path(configured)
    assert _lab_path(argparse.Namespace(lab="given.duckdb", config="not read.yaml")) == Path("given.duckdb")


def test_chat_says_what_it_starts_before_its_prompt(tmp_path):
    chat = subprocess.run([str(EXE), "chat"], input="/quit\n", cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert chat.returncode == 0, chat.stderr
    starting, header, prompt = chat.stdout.split("\n")[:3]
    assert starting == "hermeslab chat · starting the offline model…"
    assert header.startswith("hermeslab chat · hermeslab-offline · session ")
    assert prompt == CHAT_PROMPT
