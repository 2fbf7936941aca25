"""Running ``tests/peers/suite`` in a pytest process against a server, and listing the requests it got.

A run is a fresh pytest process in a copy of the suite, with the environment of the server's
``configure(cache)`` and none of the outer session's ``PYTEST_``/``HFSNAPSHOT_`` variables (as
tests/peers/test_modes.py's ``child_env``). Requests are listed as ``"<status> <method> <path>"``:
LocalHub's from its own log; olah's from its access log (uvicorn's, one line per answered
request) between two sentinel requests sent before and after, each waited for until logged.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_hfsnapshot.testing.hub import LocalHub

from .olah_server import OlahServer
from .servers import Server

SUITE = Path(__file__).resolve().parent.parent / "tests" / "peers" / "suite"
RUN_TIMEOUT = 300.0
LOG_TIMEOUT = 10.0
Run = subprocess.CompletedProcess[str]


@dataclass(frozen=True)
class PeerHub:
    """A server holding the peer repos; ``requests_during`` runs an action and lists the requests
    the server answered meanwhile."""

    server: Server
    requests_during: Callable[[Callable[[], Run]], tuple[Run, list[str]]]


def run_suite(hub: PeerHub, folder: Path, cache: Path, *args: str, plugin: bool = True) -> Run:
    """The suite in a pytest process in ``folder`` (copied there once), against ``hub`` and ``cache``."""
    if not folder.exists():
        shutil.copytree(SUITE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    with hub.server.configure(cache) as cache_dir:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HFSNAPSHOT_"))}
        options = [f"--hf-cache-dir={cache_dir}"] if plugin else ["-p", "no:hfsnapshot"]
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", *options, *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )


def local_requests_during(hub: LocalHub, action: Callable[[], Run]) -> tuple[Run, list[str]]:
    hub.reset_counters()
    done = action()
    hub.wait_idle()
    return done, [f"{status} {method} {path}" for method, path, status in hub.requests]


def olah_requests_during(olah: OlahServer, action: Callable[[], Run]) -> tuple[Run, list[str]]:
    _, start = _sentinel(olah)
    done = action()
    end, _ = _sentinel(olah)
    between = olah.log.read_text(errors="replace")[start:end]
    lines = re.findall(r'"([A-Z]+) (\S+) HTTP/[0-9.]+" (\d{3})', between)
    return done, [f"{status} {method} {path}" for method, path, status in lines]


def _sentinel(olah: OlahServer) -> tuple[int, int]:
    """Send a request and wait until olah's access log has it; where its line starts and ends."""
    marker = f"sentinel-{uuid.uuid4().hex}"
    with contextlib.suppress(urllib.error.HTTPError):  # a 401 (no such repo) is logged as any answer
        urllib.request.urlopen(f"{olah.url}/api/models/crosscheck/{marker}/revision/main", timeout=LOG_TIMEOUT).close()
    deadline = time.monotonic() + LOG_TIMEOUT
    while (at := (log := olah.log.read_text(errors="replace")).find(marker)) < 0:
        assert time.monotonic() < deadline, f"olah did not log {marker}:\n{olah.log_tail()}"
        time.sleep(0.05)
    return log.rfind("\n", 0, at) + 1, log.find("\n", at)
