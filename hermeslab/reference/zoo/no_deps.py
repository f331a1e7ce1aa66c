"""Installing a zoo agent's distribution without its dependencies, where they cannot be installed or are not needed.

Some agents' compaction code is one module that imports only the standard
library, inside a distribution whose declared dependencies are large or not
on the package index at all. Such a distribution is installed with
``--no-deps`` into the same kind of virtualenv as every other zoo package
(same place, same marker, same lock), and proved by the presence of the module
the worker loads by path rather than by an import of the package.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from hermeslab.reference.venv_builder import build_once, create_if_missing, pip_install, write_marker
from hermeslab.reference.zoo.venv import Package, ZooReferenceError, default_path, find_python


def install_without_dependencies(package: Package, module_file: str, path: Path | None = None,
                                 echo: Callable[[str], None] = print) -> Path:
    """Install ``package`` alone into its virtualenv and check that ``module_file`` is in it; reused when done."""
    target = Path(path).expanduser() if path is not None else default_path(package)
    return build_once(target, package.requirement, lambda: _install(target, package, module_file, echo),
                      ZooReferenceError, package.distribution)


def _install(target: Path, package: Package, module_file: str, echo: Callable[[str], None]) -> None:
    started = time.perf_counter()
    python = create_if_missing(target, lambda: find_python(package), echo, ZooReferenceError)
    pip_install(python, package.requirement, echo, ZooReferenceError, no_deps=True)
    probe = (f"import importlib.metadata as m, sys; "
             f"sys.exit(0 if m.distribution({package.distribution!r}).locate_file({module_file!r}).is_file() else 1)")
    check = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise ZooReferenceError(f"{package.requirement} installed but holds no {module_file}:\n{check.stderr[-2000:]}")
    write_marker(target, package.requirement, started, no_deps=True)
