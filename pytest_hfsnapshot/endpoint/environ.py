"""The environment a session's child processes inherit: the endpoint's URL and how to talk to it.

Set in ``os.environ`` after huggingface_hub read its own settings at import, so this process keeps
talking to the Hub while every process a test starts (at any depth, in any language) talks to the
endpoint. Each value is put back at the end unless someone else changed it meanwhile.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from .in_process import KeepUpstream

ENDPOINT = "HF_ENDPOINT"
#: Where the start-up hook of a Python child reports a connection that bypasses the endpoint (the
#: same URL as ``HF_ENDPOINT``: a test may point huggingface_hub elsewhere and still be told of).
SESSION = "HFSNAPSHOT_SESSION"
#: The hosts the start-up hook watches, and the offline switch's spelling when the session is offline.
WATCH = "HFSNAPSHOT_WATCH"
OFFLINE_SWITCH = "HFSNAPSHOT_OFFLINE"
#: The folder whose ``sitecustomize`` is the start-up hook (first on a Python child's ``PYTHONPATH``).
STARTUP = Path(__file__).resolve().parent / "_startup"
#: The Hub's own hosts, subdomains included (its CDN, Xet's CAS), which code may hard-code.
HUB_HOSTS = ("huggingface.co", "hf.co")
#: Seconds a child waits for an answer: the endpoint answers a file's HEAD once the file is ready.
CHILD_TIMEOUT = "3600"
_TIMEOUTS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")
#: The offline switches a child obeys (huggingface_hub's, transformers 4's).
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


class ChildEnvironment:
    """The variables set for children while the endpoint serves (:meth:`apply`, :meth:`restore`)."""

    def __init__(self, session_url: str, *, offline: bool, upstream: str, offline_switch: str) -> None:
        self.session_url = session_url
        values = {ENDPOINT: session_url, SESSION: session_url, "HF_HUB_DISABLE_XET": "1"}
        values[WATCH] = ",".join(watched_hosts(upstream))
        # First, once: an outer session's hook (this plugin's tests run sessions in sessions) is the same file.
        python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(STARTUP)]
        values["PYTHONPATH"] = os.pathsep.join([str(STARTUP), *python_path])
        if offline:
            values[OFFLINE_SWITCH] = offline_switch
        values.update({name: CHILD_TIMEOUT for name in _TIMEOUTS if name not in os.environ})
        if offline:
            # The endpoint is the offline one: it serves the cache and sends nothing upstream, and a
            # child that asks it gets its loads recorded and its misses named in the test's report.
            values.update({name: "0" for name in _OFFLINE if name in os.environ or name == "HF_HUB_OFFLINE"})
        self._values = values
        self._before: dict[str, str | None] = {}
        self._in_process = KeepUpstream(upstream)

    def apply(self) -> None:
        self._before = {name: os.environ.get(name) for name in self._values}
        os.environ.update(self._values)
        self._in_process.install()

    def restore(self) -> None:
        """Put back each variable that still holds the value set here."""
        self._in_process.remove()
        for name, value in self._values.items():
            if os.environ.get(name) != value:
                continue
            before = self._before.get(name)
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before

    @contextlib.contextmanager
    def for_test(self, url: str) -> Iterator[None]:
        """``HF_ENDPOINT`` naming one test while it runs (unless something else holds the variable)."""
        names = [name for name in (ENDPOINT, SESSION) if os.environ.get(name) == self.session_url]
        for name in names:
            os.environ[name] = url
        try:
            yield
        finally:
            for name in names:
                if os.environ.get(name) == url:
                    os.environ[name] = self.session_url


def watched_hosts(upstream: str) -> list[str]:
    """What a child's start-up hook watches: the Hub's hosts, and the upstream's ``host:port`` when it is
    another server (a mirror, a local Hub), which a child reaching past ``HF_ENDPOINT`` would connect to."""
    parts = urlsplit(upstream)
    host = (parts.hostname or "").lower()
    if not host or any(host == name or host.endswith("." + name) for name in HUB_HOSTS):
        return list(HUB_HOSTS)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return [*HUB_HOSTS, f"{host}:{port}"]


__all__ = ["CHILD_TIMEOUT", "ENDPOINT", "HUB_HOSTS", "STARTUP", "ChildEnvironment", "watched_hosts"]
