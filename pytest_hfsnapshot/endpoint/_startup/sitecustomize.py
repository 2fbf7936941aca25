"""pytest-hfsnapshot's start-up code for the Python processes a test session starts (CONTRACT section 11).

First on ``PYTHONPATH``. An audit hook names a connection to the Hub's host by a client that
hard-codes it, and refuses it offline. huggingface_hub's loads are wrapped at import to tell the
endpoint of each cache file they return and wait while it verifies it; that import also tells the
endpoint to warm up meanwhile. Standard library only.
"""

from __future__ import annotations

import _thread
import os
import sys

# typing costs a child tens of milliseconds at start-up: the names are for type checkers only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

#: Hosts whose connections bypass the session: ``huggingface.co`` (any subdomain too) or ``host:port``.
_WATCHED = [entry for entry in os.environ.get("HFSNAPSHOT_WATCH", "").split(",") if entry]
#: Where the session's endpoint takes reports (``http://127.0.0.1:PORT/<secret>/<test>``).
_REPORT_TO = os.environ.get("HFSNAPSHOT_SESSION", "")
#: The endpoint's routes for reports (``server.DIRECT_ROUTE``, ``server.READ_ROUTE``, ``server.WARM_ROUTE``;
#: this file imports nothing of the package, and tests/endpoint/test_startup.py holds the spellings equal).
_DIRECT_ROUTE, _READ_ROUTE, _WARM_ROUTE = "_hfsnapshot/direct", "_hfsnapshot/read", "_hfsnapshot/warm"
#: The offline switch as the session's front end spells it (``--hf-offline``); empty when online.
_OFFLINE = os.environ.get("HFSNAPSHOT_OFFLINE", "")
#: Code a connection passes through on its way: the caller named is the first frame outside it.
_TRANSIT = frozenset(
    (
        *("socket", "ssl", "selectors", "encodings", "concurrent", "threading", "http", "urllib", "asyncio"),
        *("urllib3", "requests", "certifi", "idna", "httpx", "httpcore", "h11", "h2", "anyio", "sniffio"),
        *("aiohttp", "huggingface_hub", "sitecustomize"),
    )
)
#: The standard library's folder (``os`` lives there), known without importing ``sysconfig``.
_STDLIB = os.path.join(os.path.dirname(os.__file__), "")
#: The threads inside the hook now (its own report connects too).
_inside: set[int] = set()
_reported: set[tuple[str, str]] = set()
#: The cache files told of, each as it was then (inode, size, mtime): a rewritten file is told again.
_read: dict[str, tuple[int, int, int]] = {}
#: The connection that told the endpoint to warm up, kept open until this process ends: its answer is
#: never waited for, and closing it at once could cut the request short.
_warming: list[Any] = []


def _watched(host: object, port: object) -> str | None:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return None
    host = host.lower().rstrip(".")
    for entry in _WATCHED:
        name, _, wanted = entry.partition(":")
        if wanted:
            if host == name and str(port) == wanted:
                return entry
        elif host == name or host.endswith("." + name):
            return host
    return None


def _caller() -> str:
    """``file:line`` of the code that asked for the connection (past the HTTP clients and the stdlib)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        filename = frame.f_code.co_filename
        standard = filename.startswith(_STDLIB) and "-packages" not in filename[len(_STDLIB) :]
        if module not in _TRANSIT and not standard and not filename.startswith("<frozen"):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "unknown"


def _report(host: str, where: str) -> None:
    if not _REPORT_TO or (host, where) in _reported:
        return
    import json
    import urllib.request

    _reported.add((host, where))
    body = json.dumps({"host": host, "where": where, "pid": os.getpid()}).encode()
    request = urllib.request.Request(
        _REPORT_TO.rstrip("/") + "/" + _DIRECT_ROUTE,
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            answer.read()
    except OSError:
        pass  # the session ended or its endpoint is gone: nothing left to tell


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.getaddrinfo" or _thread.get_ident() in _inside:
        return
    host = _watched(args[0], args[1])
    if host is None:
        return
    _inside.add(_thread.get_ident())
    try:
        where = _caller()
        _report(host, where)
    finally:
        _inside.discard(_thread.get_ident())
    if _OFFLINE:
        raise ConnectionRefusedError(
            f"pytest-hfsnapshot: {where} connects to {host} directly, past HF_ENDPOINT, and this test "
            f"session is offline ({_OFFLINE}): the connection is refused"
        )


def _session_serves(endpoint: str) -> bool:
    """Whether ``endpoint`` is the session's endpoint, whichever test's name follows its secret."""
    return bool(_REPORT_TO) and endpoint.startswith(_REPORT_TO.rsplit("/", 1)[0] + "/")


def _tell_read(path: str, kwargs: dict[str, Any]) -> None:
    """Tell the endpoint of a cache file a load returned (and the revision asked, if named): it records
    the file and, under ``manage``, verifies and repairs it before this returns. A failure it could not
    mend is raised."""
    from huggingface_hub import constants

    endpoint = str(kwargs.get("endpoint") or constants.ENDPOINT).rstrip("/") + "/"
    if not _session_serves(endpoint):
        return  # this call read another Hub's files: not the session's
    try:
        st = os.stat(path)
    except OSError:
        return
    seen = (st.st_ino, st.st_size, st.st_mtime_ns)
    if _read.get(path) == seen:
        return
    import json
    import urllib.error
    import urllib.request

    body = json.dumps({"path": os.path.abspath(path), "revision": kwargs.get("revision")}).encode()
    request = urllib.request.Request(
        _REPORT_TO.rstrip("/") + "/" + _READ_ROUTE, data=body, headers={"Content-Type": "application/json"}
    )
    timeout = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or 3600)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            answer.read()
    except urllib.error.HTTPError as error:
        if error.code == 502:  # the endpoint could not make the file right: its message says why
            raise OSError(error.headers.get("X-Error-Message") or "pytest-hfsnapshot: the file is damaged") from None
        return
    except OSError:
        return  # the session ended or its endpoint is gone: nothing left to tell
    try:
        st = os.stat(path)
        _read[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        pass


def _warm() -> None:
    """Tell the session's endpoint that this process is loading huggingface_hub's download module: the
    endpoint loads the modules its first answer needs meanwhile, instead of after this process asks
    for a file. Nothing is waited for; a failure changes nothing."""
    if not _session_serves(os.environ.get("HF_ENDPOINT", "")):
        return  # this process's loads go to another Hub: the session will not answer them
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(_REPORT_TO)
    request = (
        f"POST {parts.path.rstrip('/')}/{_WARM_ROUTE} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    try:
        connection = socket.create_connection((parts.hostname, parts.port or 80), timeout=5)
        connection.sendall(request.encode("ascii"))
    except OSError:
        return  # the session ended or its endpoint is gone
    _warming.append(connection)


def _wrap_loads(module: Any) -> None:
    """``hf_hub_download`` and ``try_to_load_from_cache`` (transformers reads a commit's files with it)
    tell the endpoint of the cache file they return."""
    import functools

    def telling(original: Any) -> Any:
        @functools.wraps(original)
        def load(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if isinstance(result, str) and not kwargs.get("local_dir"):
                _tell_read(result, kwargs)
            return result

        return load

    for name in ("hf_hub_download", "try_to_load_from_cache"):
        setattr(module, name, telling(getattr(module, name)))


class _ThenWrap:
    """The loader of ``huggingface_hub.file_download``, with :func:`_wrap_loads` run after it."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _wrap_loads(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _OnImport:
    """A finder that finds nothing itself: it hands ``huggingface_hub.file_download`` a wrapping loader."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "huggingface_hub.file_download":
            return None
        _warm()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None and spec.loader is not None:
                spec.loader = _ThenWrap(spec.loader)
                return spec
        return None


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if the environment has one."""
    import importlib.machinery

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [path for path in sys.path if os.path.abspath(path or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = type(sys)("sitecustomize")
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if _WATCHED:
    sys.addaudithook(_hook)
if _REPORT_TO:
    sys.meta_path.insert(0, _OnImport())
_chain()
