"""The reference environments are installed by one announced step and by nothing else.

``hermeslab reference install`` says what it downloads and where before it
starts; every other caller (the clients, the tests' fixtures) finds an
environment missing and names that command instead of installing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import shared_data
from hermeslab import cli
from hermeslab.reference import install
from hermeslab.reference import venv as hermes_venv_module
from hermeslab.reference.client import HermesReference
from hermeslab.reference.openhands import venv as openhands_venv_module
from hermeslab.reference.openhands.client import OpenHandsReference
from hermeslab.reference.openhands.venv import SDK, OpenHandsNotInstalledError
from hermeslab.reference.venv import ReferenceNotInstalledError
from hermeslab.reference.zoo import no_deps as zoo_no_deps_module
from hermeslab.reference.zoo import venv as zoo_venv_module


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> Path:
    """Every reference home pointed at an empty folder, and every installer made to fail if called."""
    monkeypatch.setenv("HERMESLAB_HERMES_VENV", str(tmp_path / "hermes"))
    monkeypatch.setenv("HERMESLAB_OPENHANDS_HOME", str(tmp_path / "openhands"))
    monkeypatch.setenv("HERMESLAB_ZOO_HOME", str(tmp_path / "zoo"))

    def refuse(*args, **kwargs):
        raise AssertionError("a reference environment was installed without being asked")

    monkeypatch.setattr(hermes_venv_module, "_build_venv", refuse)
    monkeypatch.setattr(openhands_venv_module, "_install", refuse)
    monkeypatch.setattr(zoo_venv_module, "_install", refuse)
    monkeypatch.setattr(zoo_no_deps_module, "_install", refuse)
    return tmp_path


# ---------------------------------------------------------------- the command's arguments


def test_install_needs_a_known_name(capsys):
    with pytest.raises(SystemExit, match="needs what to install: hermes, openhands, zoo or all"):
        cli.main(["reference", "install"])
    with pytest.raises(SystemExit) as exited:
        cli.main(["reference", "install", "hermes-0.19"])
    assert exited.value.code == 2 and "invalid choice: 'hermes-0.19'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="reference status takes no argument"):
        cli.main(["reference", "status", "hermes"])
    with pytest.raises(ValueError, match="no reference environment named 'openhand'; choose one of hermes, "
                                         "openhands, zoo, all"):
        install.environments("openhand")


def test_status_names_the_command_for_each_missing_environment(nowhere, capsys):
    assert cli.main(["reference", "status"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 + len(install.ENVIRONMENTS["zoo"])
    assert lines[0].startswith("hermes: not installed (hermes-agent==0.19.0, about ")
    assert lines[0].endswith("run `hermeslab reference install hermes`")
    assert all(line.endswith("run `hermeslab reference install openhands`") for line in lines[1:3])
    assert all(line.endswith("run `hermeslab reference install zoo`") for line in lines[3:])


# ---------------------------------------------------------------- the announced install


def fake(name: str, folder: Path, done: bool, calls: list[str]) -> install.Environment:
    def run(echo):
        calls.append(name)
        echo("pip says something")
        return folder / name

    return install.Environment(name, f"{name}==1.0", 40, 100, lambda: folder / name, lambda path: done, run)


def test_install_says_how_much_and_where_before_it_starts(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(install, "ENVIRONMENTS", {
        "hermes": (fake("hermes", tmp_path, True, calls),),
        "openhands": (fake("oh-a", tmp_path, False, calls), fake("oh-b", tmp_path, False, calls)),
    })
    lines: list[str] = []
    assert install.install("all", echo=lines.append) == [tmp_path / "hermes", tmp_path / "oh-a", tmp_path / "oh-b"]
    assert calls == ["oh-a", "oh-b"]
    assert lines[0] == f"hermes: hermes==1.0 already installed at {tmp_path / 'hermes'}"
    assert lines[1].startswith("installing 2 reference environment(s): about 80 MB to download and 200 MB on disk")
    assert lines[2:4] == [f"  oh-a: oh-a==1.0 into {tmp_path / 'oh-a'}", f"  oh-b: oh-b==1.0 into {tmp_path / 'oh-b'}"]
    assert lines[4:6] == ["oh-a: installing oh-a==1.0 (pip's output follows)", "pip says something"]
    assert lines[6].startswith(f"oh-a: installed at {tmp_path / 'oh-a'} in ")


def test_installing_what_is_installed_downloads_nothing(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(install, "ENVIRONMENTS", {"hermes": (fake("hermes", tmp_path, True, calls),)})
    lines: list[str] = []
    install.install("hermes", echo=lines.append)
    assert calls == [] and len(lines) == 1 and "already installed" in lines[0]


# ---------------------------------------------------------------- nothing else installs


def test_the_clients_name_the_command_instead_of_installing(nowhere):
    with pytest.raises(ReferenceNotInstalledError) as missing:
        HermesReference(timeout=5).start()
    message = str(missing.value)
    assert "\n" not in message and message.endswith("install it with `hermeslab reference install hermes`")
    with pytest.raises(OpenHandsNotInstalledError, match=r"install it with `hermeslab reference install openhands`$"):
        OpenHandsReference(SDK, timeout=5).start()


def test_a_venv_away_from_its_default_place_is_named_with_the_variable_that_points_there(nowhere):
    elsewhere = nowhere / "elsewhere"
    with pytest.raises(ReferenceNotInstalledError) as missing:
        HermesReference(elsewhere, timeout=5).start()
    assert missing.value.command == f"HERMESLAB_HERMES_VENV={elsewhere} hermeslab reference install hermes"


def test_a_test_needing_a_missing_environment_skips_with_the_command(nowhere, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install it with `hermeslab reference install hermes`"):
        shared_data.hermes_venv()
    with pytest.raises(pytest.skip.Exception, match="install it with `hermeslab reference install openhands`"):
        shared_data.openhands_venv(SDK)


def test_under_ci_a_missing_environment_fails_instead(nowhere, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="hermeslab reference install hermes"):
        shared_data.hermes_venv()
    with pytest.raises(pytest.fail.Exception, match="hermeslab reference install openhands"):
        shared_data.openhands_venv(SDK)
