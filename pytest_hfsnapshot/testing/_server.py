"""The local Hub's HTTP side: origins, request handling, fault plan, counters and pacing."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from ._counters import Entry, RequestLog
from ._faults import Fault, FaultPlan, Pacer
from ._routes import Origin, Reply, Routes, carries_file_bytes, error_reply

__all__ = ["CDN_HOST", "LOOPBACK_HOSTS", "Exchange", "Servers"]

# The CDN is another loopback host, as the real one is another host: huggingface_hub 1.x follows a
# redirect to the same host on another port, which it never does for huggingface.co's CDN.
CDN_HOST = "127.0.0.2"
LOOPBACK_HOSTS = ("127.0.0.1", CDN_HOST, "localhost")


class Exchange:
    """One request's way through the hub: the fault plan, the routes, the counters, the body's pacing."""

    def __init__(self, routes: Routes, faults: FaultPlan, log: RequestLog, pacer: Pacer) -> None:
        self.routes = routes
        self.faults = faults
        self.log = log
        self.pacer = pacer

    def answer(
        self, origin: Origin, method: str, raw_path: str, query: str, headers: Mapping[str, str], payload: bytes
    ) -> tuple[Reply, Fault | None, Entry]:
        """The reply to one request (a ``corrupt`` fault already applied), the fault it got, and its counter entry."""
        arrived = time.time()
        path = unquote(raw_path)
        aliases = self.routes.aliases(origin, raw_path, query, headers)
        refusal = self.faults.rate_limited((path, *aliases))
        fault = None if refusal is not None else self.faults.take(method, (path, *aliases), with_body=False)
        # cut and corrupt aimed at a file reach the bodies holding its bytes: a reconstruction
        # (JSON) is matched by its own path only, the xorb ranges it names by the file's too.
        body_paths = (path, *aliases) if carries_file_bytes(origin, raw_path) else (path,)
        if refusal is not None:
            reply = error_reply(429, None, f"local Hub: rate limit reached for {path}", refusal)
        elif fault is not None:
            extra = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            message = f"local Hub: injected {fault.status} for {path}"
            reply = error_reply(fault.status, fault.error_code, message, extra)
            fault = None
        else:
            try:
                reply = self.routes.answer(origin, method, raw_path, query, headers, payload)
            except Exception as exc:  # a bug here must reach the client as a 500, not a hung socket
                reply = error_reply(500, None, f"local Hub error: {exc!r}")
            if method != "HEAD" and reply.body and 200 <= reply.status < 300:
                fault = self.faults.take(method, body_paths, with_body=True)
            if fault is not None and fault.kind == "corrupt":
                try:
                    reply = reply.corrupted()
                except Exception as exc:  # as above: a 500 the test sees
                    reply = error_reply(500, None, f"local Hub error corrupting {path}: {exc!r}")
        entry = self.log.record(origin, method, path, reply.status, aliases, at=arrived)
        return reply, fault, entry

    def write(self, write: Callable[[bytes], object], entry: Entry, body: bytes) -> None:
        step = self.pacer.chunk_size()
        started, sent = time.monotonic(), 0
        for start in range(0, len(body), step):
            chunk = body[start : start + step]
            self.pacer.wait(len(chunk), started=started, sent=sent)
            # Counted before the write so a client that has read the bytes never sees a stale
            # counter; taken back if the socket refuses them.
            self.log.add_bytes(entry, len(chunk))
            try:
                write(chunk)
            except OSError:
                self.log.add_bytes(entry, -len(chunk))
                raise
            sent += len(chunk)


class Servers:
    """The hub's listening origins (one server and thread each) and the connections they hold open."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self._servers: dict[Origin, _Server] = {}
        self._url_hosts: dict[Origin, str] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._answering = 0

    @property
    def running(self) -> bool:
        return bool(self._servers)

    def busy(self) -> bool:
        """Whether a request is being answered, or one has arrived that no handler has read yet.

        A connection with bytes (or an end of file) waiting to be read, and a listening socket
        with a connection waiting to be accepted, are work about to start: a client killed
        mid-request leaves exactly that, and its handler's last write is still to be counted.
        """
        with self._lock:
            if self._answering:
                return True
            sockets: list[Any] = [*self._connections, *(server.socket for server in self._servers.values())]
        try:
            readable, _, _ = select.select(sockets, [], [], 0)
        except (OSError, ValueError):  # a socket closed meanwhile: its handler is finishing
            return True
        return bool(readable)

    def answering(self, *, started: bool) -> None:
        with self._lock:
            self._answering += 1 if started else -1

    def bind(self, origin: Origin, host: str, *, port: int = 0, url_host: str | None = None) -> None:
        """Serve ``origin`` on ``port`` of ``host`` (0: a free one); its URLs name ``url_host`` (default: ``host``)."""
        server = _Server((host, port), _Handler)
        server.exchange = self.exchange
        server.servers = self
        server.origin = origin
        self._servers[origin] = server
        self._url_hosts[origin] = url_host or host
        # A short poll keeps stop() (and so each test's teardown) quick.
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"local-hub-{origin}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def url(self, origin: Origin) -> str:
        """``http://host:port`` of ``origin``; ``RuntimeError`` when it does not serve."""
        server = self._servers.get(origin)
        if server is None:
            if self._servers:
                raise RuntimeError(f"the local Hub has no {origin.upper()}: it serves LFS files without Xet")
            raise RuntimeError("the local Hub is not running: call start() or use it as a context manager")
        return f"http://{self._url_hosts[origin]}:{server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving and close every open connection."""
        servers, self._servers = list(self._servers.values()), {}
        threads, self._threads = self._threads, []
        for server in servers:
            server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for server in servers:
            server.server_close()
        for thread in threads:
            thread.join(timeout=5)

    def track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # The default backlog (5) drops the SYNs of a burst of new connections (many workers resuming
    # at once), which the kernel sends again only a second later: requests then arrive late.
    request_queue_size = 128
    exchange: Exchange
    servers: Servers
    origin: Origin

    def get_request(self) -> tuple[socket.socket, Any]:
        # Called once the listening socket is readable (busy); the new connection is tracked
        # before this call ends, so no moment shows neither.
        self.servers.answering(started=True)
        try:
            connection, address = super().get_request()
            self.servers.track(connection, add=True)
        finally:
            self.servers.answering(started=False)
        return connection, address


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # idle keep-alive connections end on their own
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms each.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self) -> None:
        # Peeked, not read: the bytes stay readable in the socket (so Servers.busy() sees them)
        # until the request is marked as being answered. Clients here never pipeline requests.
        try:
            self.connection.recv(1, socket.MSG_PEEK)
        except OSError:  # the idle keep-alive timeout, or a reset
            self.close_connection = True
            return
        self.server.servers.answering(started=True)
        try:
            super().handle_one_request()
        finally:
            self.server.servers.answering(started=False)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.servers.track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        exchange = self.server.exchange
        length = int(self.headers.get("Content-Length") or 0)
        payload = self.rfile.read(length) if length > 0 else b""
        raw_path, _, query = self.path.partition("?")
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply, fault, entry = exchange.answer(self.server.origin, method, raw_path, query, headers, payload)
        body = reply.body
        sends_body = method != "HEAD"
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if fault is not None and fault.kind == "cut":
            self.send_header("Connection", "close")
        self.end_headers()
        if not sends_body:
            return
        cut = fault is not None and fault.kind == "cut"
        # At most all but the last byte: a body shorter than after_bytes (a tiny file, or a xorb
        # range Xet compressed to a few bytes) is still cut short, never sent whole.
        to_send = body[: min(fault.after_bytes, len(body) - 1)] if fault is not None and cut else body
        try:
            exchange.write(self.wfile.write, entry, to_send)
        except OSError:
            self.close_connection = True
            return
        if cut:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
