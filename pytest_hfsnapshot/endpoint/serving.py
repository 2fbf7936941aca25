"""The endpoint's HTTP server and request handler, made on its first connection (http.server costs a start-up)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Mapping
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .replies import Reply, gave_up

#: The endpoint's answer to one request: method, path (secret first), headers, body.
Answer = Callable[[str, str, Mapping[str, str], bytes], Reply]

#: The largest request body read (the Hub's API takes JSON; files go up elsewhere).
_MAX_BODY = 64 * 1024 * 1024


class Server(ThreadingHTTPServer):
    """The HTTP server of one endpoint, on the socket its listener bound."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, answer: Answer, listening: socket.socket) -> None:
        self.answer = answer
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(listening.getsockname(), _Handler, bind_and_activate=False)
        self.socket.close()  # the one it made unbound: the listener's is the endpoint's
        self.socket = listening

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
    server: Server

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
            reply = self.server.answer(self.command, path, dict(self.headers.items()), body)
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
        # The status line and headers as one write, the Date made once a second: BaseHTTPRequestHandler's
        # send_response and send_header cost a warm answer more than the endpoint's own work did.
        lines = [f"{self.protocol_version} {reply.status} {_phrase(reply.status)}", _stamp()]
        lines += [f"{name}: {value}" for name, value in reply.headers.items()]
        lines.append(f"Content-Length: {reply.length}")
        if any(name.lower() == "connection" and value.lower() == "close" for name, value in reply.headers.items()):
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        try:
            if self.command == "HEAD":
                self.wfile.write(head)
            elif reply.file is not None and reply.span is not None:
                self.wfile.write(head)
                with open(reply.file, "rb") as handle:
                    self.connection.sendfile(handle, reply.span[0], reply.length)
            else:
                self.wfile.write(head + reply.body)
        except OSError:
            self.close_connection = True  # the child went away


def _phrase(status: int) -> str:
    known = BaseHTTPRequestHandler.responses.get(status)
    return known[0] if known is not None else ""


#: The ``Server`` and ``Date`` lines of the second they were made in.
_stamped: tuple[int, str] = (0, "")


def _stamp() -> str:
    global _stamped
    now = int(time.time())
    second, lines = _stamped
    if second != now:
        lines = f"Server: {_Handler.server_version}\r\nDate: {formatdate(now, usegmt=True)}"
        _stamped = (now, lines)
    return lines


__all__ = ["Server"]
