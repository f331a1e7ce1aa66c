"""Every package the code imports is one the project declares.

A transitive dependency is not a declaration: ``httpx`` once came only through
JupyterLab (a test extra), so the plain install crashed while every test passed.
Imports are read from the source (not executed), so one inside a function counts.
The reference workers run in their own environments and are left out.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Modules that run inside a reference environment (Hermes, OpenHands, the zoo's agents), never in hermeslab's own.
WORKER_DIRS = (ROOT / "hermeslab" / "reference" / "worker", ROOT / "hermeslab" / "reference" / "openhands" / "worker",
               ROOT / "hermeslab" / "reference" / "zoo" / "worker")


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def _distributions(requirement: str) -> set[str]:
    """The distribution a requirement names, and those its extras (``dask[distributed]``) bring in."""
    name, extras = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", requirement).groups()
    names = {_normal(name)}
    for extra in filter(None, (e.strip() for e in (extras or "").split(","))):
        for required in importlib.metadata.requires(name) or ():
            if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", required):
                names.add(_normal(re.match(r"[A-Za-z0-9._-]+", required).group()))
    return names


@cache
def declared() -> dict[str, set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = set().union(*(_distributions(r) for r in project["dependencies"]))
    extras = set().union(*(_distributions(r) for group in project["optional-dependencies"].values() for r in group))
    return {"runtime": runtime, "extras": extras, "any": runtime | extras}


def top_level_imports(folder: Path, skip: tuple[Path, ...] = (), root: Path = ROOT) -> dict[str, str]:
    """Third-party top-level module → one ``path:line`` importing it."""
    local = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        if any(path.is_relative_to(s) for s in skip):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in local or top in ("hermeslab", "tests"):
                    continue
                found.setdefault(top, f"{path.relative_to(root)}:{node.lineno}")
    return found


def undeclared(imports: dict[str, str], allowed: set[str]) -> list[str]:
    owners = importlib.metadata.packages_distributions()
    problems = []
    for module, where in sorted(imports.items()):
        distributions = {_normal(d) for d in owners.get(module, [])}
        if not distributions:
            problems.append(f"{where}: imports {module}, which no installed distribution provides")
        elif not distributions & allowed:
            problems.append(f"{where}: imports {module} (from {', '.join(sorted(distributions))}), not declared")
    return problems


def test_the_package_imports_only_its_declared_dependencies():
    """Runtime dependencies, or an extra's (those are imported where the extra's feature is used)."""
    imports = top_level_imports(ROOT / "hermeslab", skip=WORKER_DIRS)
    assert imports, "no imports were read"
    assert undeclared(imports, declared()["any"]) == []


@pytest.mark.parametrize("folder", ["tests", "benchmarks"])
def test_tests_and_benchmarks_import_only_declared_packages(folder):
    assert undeclared(top_level_imports(ROOT / folder), declared()["any"]) == []


def test_an_undeclared_import_is_named_with_its_place(tmp_path):
    (tmp_path / "mod.py").write_text("import json\nimport yaml\n")
    problems = undeclared(top_level_imports(tmp_path, root=tmp_path), {"numpy"})
    assert problems == ["mod.py:2: imports yaml (from pyyaml), not declared"]
