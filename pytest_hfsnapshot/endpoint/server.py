"""The session endpoint's HTTP server: loopback only, a random port, the session's secret in every path.

A child reaches it as ``http://127.0.0.1:<port>/<secret>/<test>`` (its ``HF_ENDPOINT``): the secret
keeps out everything that is not a process of the session (403), and ``<test>`` names the test that
started the child, so its loads are recorded under that test while the test's thread goes on. Each
request is served in a thread of its own: a file on ``/resolve/`` by :mod:`.files`, anything else by
:mod:`.proxy`. Nothing is logged (the paths hold the secret, the headers a token).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
import os
import secrets
import selectors
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..core.cache import layout
from ..core.hub import credentials, hub_calls
from ..core.implicit.observe import Observer
from ..core.implicit.uses import SESSION
from ..errors import HfSnapshotError
from ..settings import Settings
from . import files, proxy
from .access import Access, bearer
from .replies import Reply, gave_up, no_secret

#: Where a child's start-up hook reports a connection past the endpoint (``_startup/sitecustomize.py``).
DIRECT_ROUTE = "_hfsnapshot/direct"
#: Where it reports a file its huggingface_hub took from the cache: a load by commit sends no request.
READ_ROUTE = "_hfsnapshot/read"
#: The largest request body read (the Hub's API takes JSON; files go up elsewhere).
_MAX_BODY = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class DirectConnection:
    """A connection a session process made to the Hub's host past ``HF_ENDPOINT``: where from, in which test."""

    host: str
    where: str
    test: str


class SessionEndpoint:
    """The Hub's HTTP API for the processes of one session, served from this process under ``observer``.

    ``settings``: the session's (retries, verification). ``cache_dir``: the cache the children use,
    which their loads are made ready in (default: the settings' cache). The upstream is the endpoint
    ``observer`` talks to when the endpoint is made: huggingface_hub's ``constants.ENDPOINT`` here.
    """

    def __init__(
        self, observer: Observer, settings: Callable[[], Settings], cache_dir: Callable[[], Path] | None = None
    ) -> None:
        self.observer = observer
        self._settings = settings
        self._cache_dir = cache_dir
        self.upstream = observer.endpoint().rstrip("/")
        self._secret = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._phases: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self.access = Access(self.upstream, self.cache_dir)
        observer.listen(self.access.seen)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        #: The connections children reported past the endpoint, the first test of each (host, where).
        self._direct: dict[tuple[str, str], DirectConnection] = {}

    def cache_dir(self) -> Path:
        if self._cache_dir is not None:
            return self._cache_dir()
        cache = self._settings().resolved().cache_dir
        assert cache is not None
        return Path(cache)

    # --- life -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Listen on 127.0.0.1, on a port the system picks, and serve in daemon threads."""
        server = _Server(self)
        thread = threading.Thread(target=server.serve_until_stopped, name="hfsnapshot-endpoint", daemon=True)
        thread.start()
        self._server, self._thread = server, thread

    def close(self) -> None:
        """Stop listening and cut every connection still open: nothing of the endpoint outlives it."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.stop()
        if thread is not None:
            thread.join()
        server.server_close()
        server.cut_connections()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the session endpoint is not serving")
        return int(self._server.server_address[1])

    def url_for(self, phase: str = SESSION) -> str:
        """The ``HF_ENDPOINT`` of a child started in ``phase`` (a node id, ``collection`` or ``session``)."""
        with self._lock:
            name = self._names.get(phase)
            if name is None:
                name = self._names[phase] = secrets.token_urlsafe(9)
                self._phases[name] = phase
        return f"http://127.0.0.1:{self.port}/{self._secret}/{name}"

    def direct(self) -> list[DirectConnection]:
        """The connections the session's children made to the Hub's host past the endpoint, as reported."""
        with self._lock:
            return list(self._direct.values())

    def _reported(self, phase: str, body: bytes) -> Reply:
        """A child's start-up hook saw a connection to the Hub's host that bypasses the endpoint."""
        try:
            data = json.loads(body)
            host, where = str(data["host"]), str(data["where"])
        except (ValueError, KeyError, TypeError):
            return Reply(400, {"Content-Type": "text/plain"}, b"a report names a host and a place\n")
        with self._lock:
            self._direct.setdefault((host, where), DirectConnection(host, where, phase))
        return Reply(204)

    def _read(self, body: bytes) -> Reply:
        """A child's huggingface_hub took a file from the cache (its start-up hook says which, and at
        which revision it was asked): under ``manage`` it is verified and repaired before the child's
        call returns, and it is recorded under the test that started the child."""
        try:
            data = json.loads(body)
            path, revision = os.path.abspath(str(data["path"])), str(data.get("revision") or "")
        except (ValueError, KeyError, TypeError, AttributeError):
            path, revision = "", ""
        place = layout.snapshot_file(path) if path else None
        if place is None or not os.path.isfile(path):
            return Reply(400, {"Content-Type": "text/plain"}, b"a read names a file of a snapshot in a cache\n")
        try:
            self.observer.read_from_cache(
                place.cache_dir, place.repo_type, place.repo_id, revision or place.commit, place.commit, place.relpath
            )
        except HfSnapshotError as error:  # the file could not be made right: the child's call fails with this
            return gave_up(str(error))
        return Reply(204)

    # --- one request ----------------------------------------------------------------------------
    def answer(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """The reply to one request (``path``: as sent, secret and test first)."""
        _, secret, name, rest = [*path.split("/", 3), "", "", ""][:4]
        if not hmac.compare_digest(secret.encode(), self._secret.encode()) or not name:
            return no_secret()
        with self._lock:
            phase = self._phases.get(name, SESSION)
        if rest == DIRECT_ROUTE and method == "POST":
            return self._reported(phase, body)
        here = f"http://127.0.0.1:{self.port}/{self._secret}/{name}"
        token = bearer(_header(headers, "authorization"))
        target = "/" + rest
        observer = self.observer
        offline = observer.offline()
        with observer.recorder.acting_for(phase), credentials.sending(token):
            if rest == READ_ROUTE and method == "POST":
                return self._read(body)
            call = hub_calls.parse(self.upstream + target, self.upstream)
            if call is not None and call.kind == "file" and method in ("GET", "HEAD"):
                return files.serve(
                    call,
                    method,
                    _header(headers, "range"),
                    token=token,
                    cache_dir=self.cache_dir(),
                    access=self.access,
                    offline=offline,
                    observer=observer,
                )
            retries = self._settings().retries if observer.manages else None
            reply = proxy.forward(
                method, target, headers, body, upstream=self.upstream, here=here, retries=retries, offline=offline
            )
            if call is not None and call.kind in ("revision", "info"):
                # The commit a branch resolved to, which the child's later loads by commit name: read
                # here, where the answer is read anyway (huggingface_hub's own client leaves it unread).
                commit = proxy.commit_in(reply)
                if commit is not None:
                    observer.recorder.note(call.repo_type, call.repo_id, call.revision, commit=commit)
            return reply


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, endpoint: SessionEndpoint) -> None:
        self.endpoint = endpoint
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._wake, self._woken = socket.socketpair()
        super().__init__(("127.0.0.1", 0), _Handler)
        # A connection reset between select and accept must not block the loop (accept then fails).
        self.socket.setblocking(False)

    def serve_until_stopped(self) -> None:
        """Accept connections until :meth:`stop`: blocked in one ``select``, no polling (stopping costs no wait)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._woken, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._woken in ready:
                    return
                self.handle_request()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._wake.send(b"\0")

    def server_close(self) -> None:
        super().server_close()
        self._wake.close()
        self._woken.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a connection cut at close, or by a child that went away: nothing to tell

    def cut_connections(self) -> None:
        with self._open_lock:
            still = list(self._open)
        for connection in still:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pytest-hfsnapshot"
    # TCP_NODELAY: the headers and the body go out as two writes, and Nagle's algorithm held the
    # second until the client's delayed ACK of the first (40 ms for each small answer on Linux).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # the path holds the session's secret

    def _handle(self) -> None:
        try:
            body = self._body()
        except ValueError:
            self.close_connection = True
            self._send(Reply(400, {"Content-Type": "text/plain"}, b"malformed request body\n"))
            return
        path = self.path
        if "://" in path.split("/", 1)[0] + "/" and path.count("/") >= 3:
            path = "/" + path.split("/", 3)[3]  # an absolute URL: its path
        try:
            reply = self.server.endpoint.answer(self.command, path, dict(self.headers.items()), body)
        except Exception as error:  # the child gets an answer, whatever went wrong here
            reply = gave_up(f"pytest-hfsnapshot's session endpoint failed: {type(error).__name__}: {error}")
        self._send(reply)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _handle

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                total += size
                if total > _MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > _MAX_BODY:
            raise ValueError("bad length")
        return self.rfile.read(length) if length else b""

    def _send(self, reply: Reply) -> None:
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(reply.length))
            self.end_headers()
            if self.command == "HEAD":
                return
            if reply.file is not None and reply.span is not None:
                with open(reply.file, "rb") as handle:
                    self.connection.sendfile(handle, reply.span[0], reply.length)
            elif reply.body:
                self.wfile.write(reply.body)
        except OSError:
            self.close_connection = True  # the child went away


__all__ = ["DirectConnection", "SessionEndpoint"]
