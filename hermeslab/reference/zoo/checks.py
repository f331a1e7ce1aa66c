"""How a zoo policy proves decision parity with its agent's own code, and how the results are counted.

A policy plugs in with a module named ``<anything>_parity`` in
``hermeslab.reference`` or ``hermeslab.reference.zoo`` that exports ``CHECK``,
a ``ParityCheck`` (or ``CHECKS``, several): the preset it checks, the package
requirement its reference environment holds, its variants, and two functions that step a
recording and return one record per recorded assistant reply. ``reference``
runs the agent's own code (a worker in the agent's virtualenv, which raises
``ReferenceNotInstalledError`` naming the install command when it is missing)
over many recordings and variants at once, so a worker starts once per check;
``ours`` runs hermeslab's strategy and trigger over one recording. A record is
any JSON value; a dict with ``"compacted"`` is counted as a compaction when
true. ``benchmarks/zoo_parity.py`` finds every ``CHECK`` and counts the steps
whose two records are equal.

The workers under ``zoo/worker`` share one protocol (``worker/__main__``): a
module ``<agent>_steps.py`` beside it with ``describe()`` and
``replay(messages, params)``; ``client.ZooReference`` drives it, and records
look like ``{"at": index, "compacted": bool, "view": [keys]}`` with ``m<i>``
for the recording's message ``i`` and fixed names for what a compaction wrote.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

Message = dict[str, Any]
Step = Any


@dataclass(frozen=True)
class Variant:
    """One configuration both sides run at: a name, and parameters both sides read."""

    name: str
    params: dict[str, Any]


@dataclass(frozen=True)
class ParityCheck:
    """One policy's parity check: which preset, which reference package, and both sides' steppers."""

    preset: str
    requirement: str
    variants: tuple[Variant, ...]
    #: The agent's own records: for each variant's params, for each recording, its steps.
    reference: Callable[[list[list[Message]], list[dict[str, Any]]], list[list[list[Step]]]]
    #: hermeslab's steps for one recording under one variant's params.
    ours: Callable[[list[Message], dict[str, Any]], list[Step]]


def discover() -> tuple[dict[str, ParityCheck], dict[str, str]]:
    """Every ``*_parity`` module's ``CHECK`` (and ``CHECKS``) in ``hermeslab.reference`` and
    ``hermeslab.reference.zoo``, by preset, and the modules that failed to import, with the error (one broken
    check does not hide the others)."""
    found: dict[str, ParityCheck] = {}
    broken: dict[str, str] = {}
    for package_name in ("hermeslab.reference", "hermeslab.reference.zoo"):
        package = importlib.import_module(package_name)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.endswith("_parity"):
                continue
            name = f"{package_name}.{module.name}"
            try:
                module_found = importlib.import_module(name)
            except ImportError as exc:
                broken[name] = f"{type(exc).__name__}: {exc}"
                continue
            for check in (getattr(module_found, "CHECK", None), *getattr(module_found, "CHECKS", ())):
                if isinstance(check, ParityCheck):
                    found[check.preset] = check
    return found, broken


@dataclass
class Tally:
    """Counts over compared steps."""

    steps: int = 0
    identical: int = 0
    compactions_reference: int = 0
    compactions_hermeslab: int = 0
    sessions: int = 0
    sessions_identical: int = 0
    examples: list = field(default_factory=list)

    def add_session(self, session_id: str, reference: list[Step], ours: list[Step], keep_examples: int = 1) -> None:
        if len(reference) != len(ours):
            raise ValueError(f"session {session_id}: the reference stepped {len(reference)} times, hermeslab "
                             f"{len(ours)}")
        same = True
        for number, (theirs, mine) in enumerate(zip(reference, ours)):
            self.steps += 1
            self.compactions_reference += _compacted(theirs)
            self.compactions_hermeslab += _compacted(mine)
            if theirs == mine:
                self.identical += 1
                continue
            same = False
            if len(self.examples) < keep_examples:
                self.examples.append({"session": session_id, "step": number, "reference": theirs, "hermeslab": mine})
        self.sessions += 1
        self.sessions_identical += same

    def merge(self, other: Tally) -> None:
        for name in ("steps", "identical", "compactions_reference", "compactions_hermeslab", "sessions",
                     "sessions_identical"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def share(self) -> float | None:
        """The share of identical steps; None when nothing was compared (a share of nothing means nothing)."""
        return self.identical / self.steps if self.steps else None

    def as_record(self) -> dict:
        share = self.share
        return {"steps": self.steps, "identical_steps": self.identical,
                "identical_decisions_share": None if share is None else round(share, 6),
                "sessions": self.sessions, "sessions_identical": self.sessions_identical,
                "compactions_reference": self.compactions_reference,
                "compactions_hermeslab": self.compactions_hermeslab}


def _compacted(step: Step) -> bool:
    return isinstance(step, dict) and bool(step.get("compacted"))
