"""A real JupyterLab on loopback and Debian's headless Chromium driven by Playwright.

Everything Jupyter reads (config, data, runtime, IPython profile, user
settings, workspaces) lives under a temporary home, and the only kernel is the
test's own Python. Under ``CI=true`` a missing Chromium fails the run instead of
skipping it, so a green CI always means the browser test ran.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
]
#: Screenshots and timings; HERMESLAB_BROWSER_ARTIFACTS moves them (e.g. to a CI upload folder).
ARTIFACTS = Path(os.environ.get("HERMESLAB_BROWSER_ARTIFACTS")
                 or Path(__file__).resolve().parents[2] / "test-artifacts" / "browser")
#: Lab settings: no news toast over the page, every cell kept in the DOM.
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing; install it with: apt-get install -y --no-install-recommends chromium"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LabServer:
    def __init__(self, url: str, root: Path, process: subprocess.Popen, log: Path):
        self.url, self.root, self.process, self.log = url, root, process, log

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?reset"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    _require_chromium()
    home = tmp_path_factory.mktemp("jupyter-home")
    root = home / "work"
    dirs = {name: home / name for name in ("config", "data", "runtime", "ipython", "settings", "workspaces")}
    for path in [root, *dirs.values()]:
        path.mkdir(parents=True, exist_ok=True)
    kernel_dir = dirs["data"] / "kernels" / "python3"
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (hermeslab tests)", "language": "python"}))
    for name, values in USER_SETTINGS.items():
        target = dirs["settings"] / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(dirs["config"]),
           "JUPYTER_DATA_DIR": str(dirs["data"]), "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
           "IPYTHONDIR": str(dirs["ipython"]), "JUPYTER_PLATFORM_DIRS": "1",
           "JUPYTER_PREFER_ENV_PATH": "0"}
    env.pop("JUPYTER_PATH", None)
    port = _free_port()
    log = home / "server.log"
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
        f"--ServerApp.root_dir={root}", "--ServerApp.disable_check_xsrf=True", "--ServerApp.allow_root=True",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={dirs['settings']}",
        f"--LabApp.workspaces_dir={dirs['workspaces']}",
    ]
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(url, process, log)
        yield LabServer(url, root, process, log)
    finally:
        _stop(process)


def _wait_until_ready(url: str, process: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM lets the server shut its kernels down; whatever is left of its process group goes after."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def browser(lab_server: LabServer):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
