"""The local Hub in a process of its own, driven over a pipe.

The measured workers must not share a GIL (or a process) with the server, so the bench starts
:class:`~pytest_hfsnapshot.testing.hub.LocalHub` in a "spawn" child and talks to it with small
commands: add a repo (contents generated in the server, so a GiB never crosses the pipe),
reset and read the counters, and set a per-stream bandwidth cap.
"""

from __future__ import annotations

import contextlib
import fnmatch
import multiprocessing
import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pytest_hfsnapshot.testing.hub import LocalHub

#: Per-file content spec sent to the server: an int is that many random bytes, a str is the text.
FileSpec = int | str


class PacedHub(LocalHub):
    """A LocalHub whose bodies can be capped per stream (each response on its own).

    ``LocalHub.slow`` shares one budget between all bodies; a real link to the Hub limits each
    stream, which is what "two repos at once take as long as the slower one" needs to be
    measurable on a 2-core machine where raw loopback transfers are CPU-bound.
    """

    stream_rate: float | None = None

    def _write(self, write: Callable[[bytes], object], path: str, body: bytes) -> None:
        rate = self.stream_rate
        if rate is None or len(body) < 1 << 16:
            super()._write(write, path, body)
            return
        start = time.monotonic()
        sent = 0

        def paced(chunk: bytes) -> object:
            nonlocal sent
            sent += len(chunk)
            delay = start + sent / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            return write(chunk)

        super()._write(paced, path, body)


def _stats(hub: LocalHub) -> dict[str, Any]:
    with hub._lock:
        requests = list(hub.requests)
        served = dict(hub.bytes_served)

    def count(pattern: str, method: str | None = None) -> int:
        return sum(1 for m, p, _ in requests if fnmatch.fnmatchcase(p, pattern) and (method is None or m == method))

    return {
        "requests": len(requests),
        "revision_requests": count("/api/*/revision/*"),
        "tree_requests": count("/api/*/tree/*"),
        "resolve_head": count("*/resolve/*", "HEAD"),
        "resolve_get": count("*/resolve/*", "GET"),
        "errors": sum(1 for _, _, s in requests if s >= 400),
        "bytes": sum(served.values()),
        "file_bytes": sum(n for p, n in served.items() if "/resolve/" in p),
    }


def _serve(conn: Connection, tree_page_size: int) -> None:
    hub = PacedHub(tree_page_size=tree_page_size)
    hub.start()
    conn.send(hub.url)

    def add_repo(repo_id: str, files: dict[str, FileSpec], repo_type: str = "model") -> dict[str, Any]:
        contents = {path: os.urandom(spec) if isinstance(spec, int) else spec for path, spec in files.items()}
        commit = hub.add_repo(repo_id, contents, repo_type=repo_type)
        sizes = {path: len(data) if isinstance(data, bytes) else len(data.encode()) for path, data in contents.items()}
        return {"commit": commit, "sizes": sizes}

    def set_stream_rate(rate: float | None) -> None:
        hub.stream_rate = rate

    handlers: dict[str, Callable[..., Any]] = {
        "add_repo": add_repo,
        "reset": hub.reset_counters,
        "stats": lambda: _stats(hub),
        "set_stream_rate": set_stream_rate,
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

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def _call(self, command: str, *args: Any, **kwargs: Any) -> Any:
        self._conn.send((command, args, kwargs))
        status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"bench hub: {command} failed: {value}")
        return value

    def add_repo(self, repo_id: str, files: dict[str, FileSpec], repo_type: str = "model") -> dict[str, Any]:
        """Commit ``files`` (int: that many random bytes; str: text); returns commit and sizes."""
        return dict(self._call("add_repo", repo_id, files, repo_type=repo_type))

    def reset(self) -> None:
        self._call("reset")

    def stats(self) -> dict[str, Any]:
        """Requests and body bytes since the last reset, totalled and by kind."""
        return dict(self._call("stats"))

    def set_stream_rate(self, bytes_per_second: float | None) -> None:
        self._call("set_stream_rate", bytes_per_second)

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
