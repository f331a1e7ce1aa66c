"""The announced step that installs the reference environments (``hermeslab reference install|status``).

The comparisons with Hermes and OpenHands run those projects' own code in
virtualenvs of their own, which take hundreds of megabytes and minutes to
install. Nothing installs them on the way (not the tests, not ``hermeslab ab``,
not a benchmark); this step does, saying first how much it downloads and where
it puts it, then streaming pip's progress.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hermeslab.reference.openhands import venv as openhands_venv
from hermeslab.reference.zoo import venv as packaged_venv
from hermeslab.reference.zoo.no_deps import install_without_dependencies
from hermeslab.reference.venv import (
    HERMES_REQUIREMENT,
    default_venv_path,
    install_hermes_venv,
    read_marker,
)


@dataclass(frozen=True)
class Environment:
    """One reference environment: what it holds, where, roughly how big, and how to install it."""

    name: str
    requirement: str
    #: Rough figures measured on a clean install (pip's downloads; the venv's size on disk).
    download_mb: int
    disk_mb: int
    path: Callable[[], Path]
    installed: Callable[[Path], bool]
    install: Callable[[Callable[[str], None]], Path]


ENVIRONMENTS: dict[str, tuple[Environment, ...]] = {
    "hermes": (
        Environment("hermes", HERMES_REQUIREMENT, 40, 230, default_venv_path,
                    lambda path: read_marker(path) is not None, lambda echo: install_hermes_venv(echo=echo)),
    ),
    "openhands": tuple(
        Environment(f"openhands-{release.family}", release.requirement, download, disk,
                    lambda release=release: openhands_venv.default_path(release),
                    lambda path, release=release: openhands_venv.is_complete(path, release),
                    lambda echo, release=release: openhands_venv.install_venv(release, echo=echo))
        for release, download, disk in ((openhands_venv.SDK, 115, 480), (openhands_venv.LEGACY, 340, 1890))
    ),
    "zoo": tuple(
        Environment(package.folder, package.requirement, download, disk,
                    lambda package=package: packaged_venv.default_path(package),
                    lambda path, package=package: packaged_venv.is_complete(path, package),
                    lambda echo, package=package: packaged_venv.install_venv(package, echo=echo))
        for package, download, disk in ((packaged_venv.AIDER, 150, 670), (packaged_venv.LANGCHAIN, 25, 105),
                                        (packaged_venv.INSPECT_AI, 90, 325), (packaged_venv.KIMI_CLI, 60, 360))
    ) + (
        Environment(packaged_venv.SWE_AGENT.folder, packaged_venv.SWE_AGENT.requirement, 1, 26,
                    lambda: packaged_venv.default_path(packaged_venv.SWE_AGENT),
                    lambda path: packaged_venv.is_complete(path, packaged_venv.SWE_AGENT),
                    lambda echo: install_without_dependencies(packaged_venv.SWE_AGENT, packaged_venv.SWE_AGENT_MODULE,
                                                              echo=echo)),
    ),
}
CHOICES = (*ENVIRONMENTS, "all")


def environments(which: str) -> tuple[Environment, ...]:
    """The environments ``which`` names (``hermes``, ``openhands``, ``zoo`` or ``all``); ValueError otherwise."""
    if which == "all":
        return tuple(env for group in ENVIRONMENTS.values() for env in group)
    if which not in ENVIRONMENTS:
        raise ValueError(f"no reference environment named {which!r}; choose one of {', '.join(CHOICES)}")
    return ENVIRONMENTS[which]


def install(which: str, echo: Callable[[str], None] = print) -> list[Path]:
    """Install the environments ``which`` names that are not installed yet, announcing the cost first."""
    chosen = environments(which)
    missing = [env for env in chosen if not env.installed(env.path())]
    for env in chosen:
        if env not in missing:
            echo(f"{env.name}: {env.requirement} already installed at {env.path()}")
    if missing:
        download, disk = sum(env.download_mb for env in missing), sum(env.disk_mb for env in missing)
        echo(f"installing {len(missing)} reference environment(s): about {download} MB to download and "
             f"{disk} MB on disk; a few minutes each")
        for env in missing:
            echo(f"  {env.name}: {env.requirement} into {env.path()}")
        _check_room(missing, echo)
    for env in missing:
        started = time.monotonic()
        echo(f"{env.name}: installing {env.requirement} (pip's output follows)")
        path = env.install(echo)
        echo(f"{env.name}: installed at {path} in {time.monotonic() - started:.0f} s")
    return [env.path() for env in chosen]


def _check_room(missing: list[Environment], echo: Callable[[str], None]) -> None:
    """Say so when the disk holding an environment has less room than it needs (the install then fails late)."""
    for env in missing:
        folder = env.path().parent
        while not folder.exists():
            folder = folder.parent
        free_mb = shutil.disk_usage(folder).free // 2**20
        if free_mb < env.disk_mb:
            echo(f"  warning: {folder} has {free_mb} MB free and {env.name} needs about {env.disk_mb} MB")


def status(echo: Callable[[str], None] = print) -> bool:
    """One line per environment, installed or not (with the command that installs it); True when all are."""
    complete = True
    for group, envs in ENVIRONMENTS.items():
        for env in envs:
            path = env.path()
            if env.installed(path):
                echo(f"{env.name}: {env.requirement} installed at {path}")
            else:
                complete = False
                echo(f"{env.name}: not installed ({env.requirement}, about {env.download_mb} MB to download); "
                     f"run `hermeslab reference install {group}`")
    return complete
