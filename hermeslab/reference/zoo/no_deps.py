"""Installing a zoo agent's distribution without its dependencies, where they cannot be installed or are not needed.

Some agents' compaction code is one module that imports only the standard
library, inside a distribution whose declared dependencies are large or not
on the package index at all. Such a distribution is installed with
``--no-deps`` into the same kind of virtualenv as every other zoo package
(same place, same marker, same lock), and proved by the presence of the module
the worker loads by path rather than by an import of the package.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from hermeslab.reference.venv import run_streamed
from hermeslab.reference.zoo.venv import (
    MARKER_NAME,
    Package,
    ZooReferenceError,
    default_path,
    find_python,
    is_complete,
    venv_python,
)


def install_without_dependencies(package: Package, module_file: str, path: Path | None = None,
                                 echo: Callable[[str], None] = print) -> Path:
    """Install ``package`` alone into its virtualenv and check that ``module_file`` is in it; reused when done."""
    target = Path(path).expanduser() if path is not None else default_path(package)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / f".{target.name}.lock")):
            if not is_complete(target, package):
                _install(target, package, module_file, echo)
    except OSError as exc:
        raise ZooReferenceError(f"could not prepare the {package.distribution} venv at {target}: {exc}") from exc
    return target


def _install(target: Path, package: Package, module_file: str, echo: Callable[[str], None]) -> None:
    started = time.perf_counter()
    if target.exists() and not (target / "pyvenv.cfg").exists():
        raise ZooReferenceError(f"{target} exists and is not a virtualenv; refusing to use it")
    if not venv_python(target).exists():
        base = find_python(package)
        echo(f"  creating a virtualenv with {base}")
        made = subprocess.run([base, "-m", "venv", str(target)], capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise ZooReferenceError(f"could not create a virtualenv at {target}:\n{made.stderr[-2000:]}")
    python = str(venv_python(target))
    returncode, output = run_streamed([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                                       "--no-deps", package.requirement], echo)
    if returncode != 0:
        raise ZooReferenceError(f"pip install --no-deps {package.requirement} failed (exit code {returncode}); "
                                f"is the package index reachable?\n{output}")
    probe = (f"import importlib.metadata as m, sys; "
             f"sys.exit(0 if m.distribution({package.distribution!r}).locate_file({module_file!r}).is_file() else 1)")
    check = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise ZooReferenceError(f"{package.requirement} installed but holds no {module_file}:\n{check.stderr[-2000:]}")
    marker = {"requirement": package.requirement, "complete": True, "no_deps": True,
              "install_seconds": round(time.perf_counter() - started, 1),
              "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (target / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
