"""The local Hub in a process of its own, driven over a pipe.

The measured workers must not share a GIL (or a process) with the server, so the bench starts
:class:`~pytest_hfsnapshot.testing.hub.LocalHub` in a "spawn" child and talks to it with small
commands: add a repo (contents generated in the server, so a GiB never crosses the pipe),
reset and read the counters, cap the link, set a rate limit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pytest_hfsnapshot.testing.hub import LocalHub

#: Per-file content sent to the server: an int is that many random bytes, a str is the text.
FileSpec = int | str


def _stats(hub: LocalHub) -> dict[str, Any]:
    counters = hub.counters()  # one consistent copy: the figures below agree with each other
    return {
        "requests": len(counters.records),
        "revision_requests": counters.request_count("/api/*/revision/*"),
        "bytes": counters.bytes_served,
        # File bytes on every origin: /resolve itself, and the CDN and CAS requests for a file,
        # which match as that file's /resolve path.
        "file_bytes": counters.served("*/resolve/*"),
    }


def _serve(conn: Connection, tree_page_size: int) -> None:
    hub = LocalHub(tree_page_size=tree_page_size)
    hub.start()
    conn.send(hub.url)

    def content(spec: FileSpec) -> bytes | str:
        # random bytes are incompressible: Xet can neither compress nor deduplicate them
        return os.urandom(spec) if isinstance(spec, int) else spec

    def add_repo(repo_id: str, files: dict[str, FileSpec], repo_type: str = "model") -> dict[str, Any]:
        contents = {path: content(spec) for path, spec in files.items()}
        commit = hub.add_repo(repo_id, contents, repo_type=repo_type)
        sizes = {path: len(data) if isinstance(data, bytes) else len(data.encode()) for path, data in contents.items()}
        return {"commit": commit, "sizes": sizes}

    handlers: dict[str, Callable[..., Any]] = {
        "add_repo": add_repo,
        "reset": hub.reset_counters,
        "stats": lambda: _stats(hub),
        "xet": lambda: hub.xet,
        "rate_limit": hub.rate_limit,
        "clear_faults": hub.clear_faults,
        # Arrival time, origin, method, path and status of every request since the last reset.
        "records": lambda: [(r.at, r.origin, r.method, r.path, r.status) for r in hub.counters().records],
        # One cap for all bodies together, as the link of a CI runner limits them.
        "set_link_rate": hub.slow,
    }
    try:
        while True:
            command, args, kwargs = conn.recv()
            if command == "stop":
                break
            try:
                conn.send(("ok", handlers[command](*args, **kwargs)))
            except Exception as error:
                conn.send(("error", repr(error)))
    finally:
        hub.stop()
        conn.close()


class HubProcess:
    """Handle on the server process: ``with HubProcess() as hub: hub.add_repo(...)``."""

    def __init__(self, tree_page_size: int = 1000) -> None:
        # 1000 entries per listing page, as on the Hub (LocalHub's default of 10 is for tests).
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, tree_page_size), name="bench-hub", daemon=True)
        self._process.start()
        child.close()
        self.url: str = self._conn.recv()

    def _call(self, command: str, *args: Any, **kwargs: Any) -> Any:
        self._conn.send((command, args, kwargs))
        status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"bench hub: {command} failed: {value}")
        return value

    def add_repo(self, repo_id: str, files: dict[str, FileSpec], repo_type: str = "model") -> dict[str, Any]:
        """Commit ``files`` (see :data:`FileSpec`); returns commit and sizes."""
        return dict(self._call("add_repo", repo_id, files, repo_type=repo_type))

    def xet(self) -> bool:
        """Whether the Hub serves LFS files from Xet storage (hf_xet is installed)."""
        return bool(self._call("xet"))

    def reset(self) -> None:
        self._call("reset")

    def stats(self) -> dict[str, Any]:
        """Requests and body bytes since the last reset, totalled and by kind."""
        return dict(self._call("stats"))

    def rate_limit(self, limit: int, window: float, pattern: str = "*") -> None:
        """A fixed-window rate limit answering like huggingface.co (see ``LocalHub.rate_limit``)."""
        self._call("rate_limit", limit, window, pattern)

    def clear_faults(self) -> None:
        self._call("clear_faults")

    def records(self) -> list[tuple[float, str, str, str, int]]:
        """``(at, origin, method, path, status)`` per request since the last reset, as the Hub saw them."""
        return [tuple(r) for r in self._call("records")]

    def set_link_rate(self, bytes_per_second: float | None) -> None:
        """One cap for all bodies together, as a CI runner's link (None: no cap)."""
        self._call("set_link_rate", bytes_per_second)

    def stop(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(("stop", (), {}))
            self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()

    def __enter__(self) -> HubProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
