"""Start and stop ``olah-cli`` in offline mode over local git mirrors, with bounded waits.

olah pins many packages, so it lives in its own venv (``crosscheck/setup_olah.sh``);
this module only runs its ``olah-cli`` as a child process.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from .content import Repo

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
# A port picked free can be taken before olah binds it; a few fresh ports settle that.
START_ATTEMPTS = 3

DEFAULT_VENV = Path(__file__).resolve().parent.parent / ".tox" / "olah-server"


def find_olah_cli() -> str | None:
    """``$OLAH_CLI`` when set (and nothing else), else the venv ``setup_olah.sh`` makes by
    default, else ``olah-cli`` on PATH."""
    explicit = os.environ.get("OLAH_CLI")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    default = DEFAULT_VENV / "bin" / "olah-cli"
    if os.access(default, os.X_OK):
        return str(default)
    return shutil.which("olah-cli")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(workdir: Path, port: int, mirrors: Path) -> Path:
    """The configuration HUB-FACTS.md records as working: offline, http, one mirrors folder."""
    config = workdir / "configs.toml"
    netloc = f"127.0.0.1:{port}"
    config.write_text(
        "[basic]\n"
        'host = "127.0.0.1"\n'
        f"port = {port}\n"
        f'repos-path = "{workdir / "repos"}"\n'
        'mirror-scheme = "http"\n'
        f'mirror-netloc = "{netloc}"\n'
        f'mirror-lfs-netloc = "{netloc}"\n'
        f'mirrors-path = ["{mirrors}"]\n'
        "[accessibility]\n"
        "offline = true\n"
    )
    return config


class OlahServer:
    """One ``olah-cli`` process serving ``mirrors``; ``probe`` is a repo it must answer for."""

    def __init__(self, olah_cli: str, workdir: Path, mirrors: Path, probe: Repo) -> None:
        self.olah_cli = olah_cli
        self.workdir = workdir
        self.mirrors = mirrors
        self.probe = probe
        self.url = ""
        self.log = workdir / "olah.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        for _ in range(START_ATTEMPTS):
            port = _free_port()
            config = write_config(self.workdir, port, self.mirrors)
            self.url = f"http://127.0.0.1:{port}"
            with self.log.open("ab") as log:
                # cwd: olah writes ./logs relative to it.
                self._process = subprocess.Popen(
                    [self.olah_cli, "-c", str(config)],
                    cwd=self.workdir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            if self._wait_ready():
                return
            self.stop()
        raise RuntimeError(
            f"olah did not become ready within {READY_TIMEOUT:.0f}s after {START_ATTEMPTS} attempts; "
            f"its output:\n{self.log_tail()}"
        )

    def _wait_ready(self) -> bool:
        assert self._process is not None
        kind = f"{self.probe.repo_type}s"
        probe_url = f"{self.url}/api/{kind}/{self.probe.repo_id}/revision/main"
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(probe_url, timeout=2.0) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no output)"
