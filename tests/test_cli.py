"""The ``hermeslab`` command answers --help and an empty ``sessions`` without importing the agent stack.

Start-up times are measured by benchmarks/startup.py; these tests check what
makes them short (which modules a command imports) and what a user reads.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermeslab.cli import _lab_path, build_parser
from hermeslab.terminal import PROMPT as CHAT_PROMPT
from hermeslab.core.config import Config
from hermeslab.home import HOME_ENV_VAR, default_lab_path, lab_home

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


#: reStructuredText that reads as noise in a terminal: literals, roles, links, directives.
MARKUP = re.compile(r"``|:(?:func|class|meth|mod|attr|data|ref|doc):`|`_|^\s*\.\. ", re.M)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_has_plain_help(name):
    parser = subcommands()[name]
    undocumented = [action.option_strings or action.dest for action in parser._actions
                    if not action.help or action.help == argparse.SUPPRESS or not action.help.strip()]
    assert undocumented == []
    assert not MARKUP.search(parser.format_help()), parser.format_help()


def test_top_level_help_is_plain_text():
    text = build_parser().format_help()
    assert not MARKUP.search(text), text
    assert HOME_ENV_VAR in text  # where labs go is said where a new user looks first


def test_the_markup_check_catches_rst():
    assert MARKUP.search("see ``store.path``") and MARKUP.search("see :func:`replay`")
    assert not MARKUP.search("a YAML config (Hermes key names), a preset name or BASE,key=value,...")


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
    monkeypatch.delenv(HOME_ENV_VAR, raising=False)
    no_lab = argparse.Namespace(lab=None, config=None)
    assert _lab_path(no_lab) == lab_path(Config())
    configured = Config().with_overrides({"store.path": str(tmp_path / "elsewhere.duckdb")})
    assert _lab_path(no_lab, configured) == lab_path(configured)
    assert _lab_path(argparse.Namespace(lab="given.duckdb", config="not read.yaml")) == Path("given.duckdb")


def test_chat_says_what_it_starts_before_its_prompt(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != HOME_ENV_VAR}
    chat = subprocess.run([str(EXE), "chat"], input="/quit\n", cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert chat.returncode == 0, chat.stderr
    starting, header, created, prompt = chat.stdout.split("\n")[:4]
    assert starting == "hermeslab chat · starting the offline model…"
    assert header.startswith("hermeslab chat · hermeslab-offline · session ")
    lab = tmp_path.resolve() / ".hermeslab" / "lab.duckdb"
    assert created == (f"lab created at {lab}; memory files in {lab.parent} "
                       f"(set {HOME_ENV_VAR} to keep labs in one folder)")
    assert prompt == CHAT_PROMPT
    again = subprocess.run([str(EXE), "chat"], input="/quit\n", cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env=env)
    assert again.returncode == 0 and "lab created" not in again.stdout  # said once, when the file is new


def test_chat_takes_lab_and_the_home_variable(tmp_path):
    home, given = tmp_path / "home", tmp_path / "given" / "chat.duckdb"
    env = {**os.environ, HOME_ENV_VAR: str(home)}
    for extra, lab in (([], home / "lab.duckdb"), (["--lab", str(given)], given)):
        chat = subprocess.run([str(EXE), "chat", *extra], input="/quit\n", cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env=env)
        assert chat.returncode == 0, chat.stderr
        assert f"lab created at {lab}; memory files in {lab.parent}\n" in chat.stdout
        assert lab.is_file()
    assert not (tmp_path / ".hermeslab").exists()  # nothing lands in the folder the command ran from


def test_the_lab_home_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(HOME_ENV_VAR, raising=False)
    assert default_lab_path() == tmp_path / ".hermeslab" / "lab.duckdb"
    monkeypatch.setenv(HOME_ENV_VAR, "  ")
    assert lab_home() == tmp_path / ".hermeslab"  # blank counts as unset
    monkeypatch.setenv(HOME_ENV_VAR, "~/labs")
    assert lab_home() == Path("~/labs").expanduser()
    monkeypatch.setenv(HOME_ENV_VAR, "relative/home")
    assert default_lab_path() == tmp_path / "relative" / "home" / "lab.duckdb"
    no_lab = argparse.Namespace(lab=None, config=None)
    assert _lab_path(no_lab) == tmp_path / "relative" / "home" / "lab.duckdb"
    configured = Config().with_overrides({"store.path": str(tmp_path / "configured.duckdb")})
    assert _lab_path(no_lab, configured) == tmp_path / "configured.duckdb"  # store.path beats the variable
    given = argparse.Namespace(lab=str(tmp_path / "given.duckdb"), config=None)
    assert _lab_path(given, configured) == tmp_path / "given.duckdb"  # --lab beats both


def test_sessions_finds_the_lab_in_the_home_folder(tmp_path):
    from hermeslab.store import StoreWriter
    from hermeslab.core.events import SessionStarted

    home = tmp_path / "home"
    with StoreWriter(home / "lab.duckdb") as writer:
        writer.handle(SessionStarted(session_id="s-home", turn=0))
    env = {**os.environ, HOME_ENV_VAR: str(home)}
    listed = subprocess.run([str(EXE), "sessions"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env=env)
    assert listed.returncode == 0, listed.stderr
    assert "s-home" in listed.stdout


def test_a_runtime_says_it_created_the_lab_once(tmp_path, monkeypatch):
    from hermeslab.runtime import Runtime

    monkeypatch.setenv(HOME_ENV_VAR, str(tmp_path / "home"))
    config = Config().with_overrides({"memory.memory_enabled": False, "memory.user_profile_enabled": False,
                                      "skills.enabled": False, "tools.workspace": str(tmp_path)})
    with Runtime(config) as first:
        assert first.lab_notice() == f"lab created at {tmp_path / 'home' / 'lab.duckdb'}"
    with Runtime(config) as second:
        assert second.lab_notice() is None


@pytest.mark.parametrize("name", ["demo", "chat", "sessions", "mcp-server", "export"])
def test_every_command_that_opens_a_lab_takes_lab(name):
    options = {option for action in subcommands()[name]._actions for option in action.option_strings}
    assert "--lab" in options


@pytest.mark.parametrize("out,says", [("no/such/dir/x.md", "no folder"), (".", "is a directory")])
def test_export_refuses_a_missing_folder_before_reading_the_lab(tmp_path, monkeypatch, capsys, out, says):
    from hermeslab.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=says):
        main(["export", "any-session", "--lab", str(tmp_path / "missing.duckdb"), "--format", "md", "--out", out])
    assert not (tmp_path / "no").exists() and not (tmp_path / "missing.duckdb").exists()
