"""The session endpoint: loopback only, a random port, the session's secret in every path.

A child's ``HF_ENDPOINT`` is ``http://127.0.0.1:<port>/<secret>/<test>``: the secret keeps out what is
not the session's (403), ``<test>`` names the test its loads are recorded under (:mod:`.answers`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import secrets
import selectors
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..core.implicit.observe import Observer
from ..core.implicit.uses import SESSION
from ..settings import Settings
from .access import Access
from .replies import Reply, no_secret

if TYPE_CHECKING:
    from .answers import Answers
    from .serving import Server

#: Where a child's start-up hook reports a connection past the endpoint (``_startup/sitecustomize.py``).
DIRECT_ROUTE = "_hfsnapshot/direct"
#: Where it reports a file its huggingface_hub took from the cache: a load by commit sends no request.
READ_ROUTE = "_hfsnapshot/read"
#: Where it says the process is loading huggingface_hub's download module: the endpoint loads what its
#: first answer needs meanwhile (the two imports overlap rather than add up).
WARM_ROUTE = "_hfsnapshot/warm"


class DirectConnection(NamedTuple):
    """A connection a session process made to the Hub's host past ``HF_ENDPOINT``: where from, in which test."""

    host: str
    where: str
    test: str


class SessionEndpoint:
    """The Hub's HTTP API for the processes of one session, served from this process under ``observer``.

    ``settings``: the session's (retries, verification). ``cache_dir``: the cache the children use,
    which their loads are made ready in (default: the settings' cache). ``before_upstream``: called
    before a child's request is answered, to put huggingface_hub's requests through the session's
    gate and the observer's hooks even where this process has not loaded its download module. The
    upstream is the endpoint ``observer`` talks to when the endpoint is made: huggingface_hub's
    ``constants.ENDPOINT`` here.
    """

    def __init__(
        self,
        observer: Observer,
        settings: Callable[[], Settings],
        cache_dir: Callable[[], Path] | None = None,
        *,
        before_upstream: Callable[[], None] = lambda: None,
    ) -> None:
        self.observer = observer
        self._settings = settings
        self._cache_dir = cache_dir
        self._before_upstream = before_upstream
        self.upstream = observer.endpoint().rstrip("/")
        self._secret = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._phases: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self.access = Access(self.upstream, self.cache_dir)
        observer.listen(self.access.seen)
        self._listener: _Listener | None = None
        self._made: Answers | None = None
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
        self._listener = _Listener(self)

    def close(self) -> None:
        """Stop listening and cut every connection still open: nothing of the endpoint outlives it."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

    @property
    def address(self) -> tuple[str, int]:
        """The host and port it listens on."""
        if self._listener is None:
            raise RuntimeError("the session endpoint is not serving")
        return self._listener.address

    @property
    def port(self) -> int:
        return self.address[1]

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
        answers = self._answers()
        if rest == READ_ROUTE and method == "POST":
            return answers.read(phase, headers, body)
        if rest == WARM_ROUTE and method == "POST":
            answers.warm()
            return Reply(204)
        here = f"http://127.0.0.1:{self.port}/{self._secret}/{name}"
        return answers.answer(phase, method, rest, headers, body, here=here)

    def _answers(self) -> Answers:
        """What answers past the secret, made on the first request (its modules cost a start-up)."""
        with self._lock:
            if self._made is None:
                from .answers import Answers

                self._made = Answers(
                    self.observer, self.access, self.upstream, self._settings, self.cache_dir, self._before_upstream
                )
            return self._made


class _Listener:
    """The endpoint's socket, bound at once, and the thread that accepts on it until :meth:`close`:
    blocked in one ``select`` (no polling). The HTTP server is made on the first connection."""

    def __init__(self, endpoint: SessionEndpoint) -> None:
        self.endpoint = endpoint
        self.socket = socket.create_server(("127.0.0.1", 0))
        host, port = self.socket.getsockname()[:2]
        self.address = (str(host), int(port))
        # A connection reset between select and accept must not block the loop (accept then fails).
        self.socket.setblocking(False)
        self._wake, self._woken = socket.socketpair()
        self._server: Server | None = None
        self._thread = threading.Thread(target=self._serve, name="hfsnapshot-endpoint", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._woken, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._woken in ready:
                    return
                if self._server is None:
                    from .serving import Server

                    self._server = Server(self.endpoint.answer, self.socket)
                self._server.handle_request()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._wake.send(b"\0")
        self._thread.join()
        if self._server is not None:
            self._server.server_close()
            self._server.cut_connections()
        else:
            self.socket.close()
        self._wake.close()
        self._woken.close()


__all__ = ["DIRECT_ROUTE", "READ_ROUTE", "WARM_ROUTE", "DirectConnection", "SessionEndpoint"]
