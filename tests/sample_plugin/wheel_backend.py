"""The smallest PEP 517 backend that builds this folder's wheel: its modules, metadata and entry points."""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _project() -> dict:
    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    project = _project()
    name, version = project["name"].replace("-", "_"), project["version"]
    info = f"{name}-{version}.dist-info"
    groups = project.get("entry-points", {})
    files = {path.name: path.read_bytes() for path in sorted(HERE.glob("hermeslab_*.py"))}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: wheel_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items()) + "\n"
        for group, points in groups.items()).encode()
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in files.items()) + f"{info}/RECORD,,\n"
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{info}/RECORD", record)
    return wheel
