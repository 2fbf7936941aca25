"""pytest-hfsnapshot's start-up code for the Python processes a test session starts (CONTRACT section 11).

The plugin puts this folder first on ``PYTHONPATH``. A client that hard-codes the Hub's address
(``requests.get("https://huggingface.co/...")``) cannot be sent to the session's endpoint; an audit
hook sees its connection, tells the endpoint where it came from (host, file and line), and refuses
it when the session is offline. Standard library only: the child may run another interpreter.
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
        _REPORT_TO.rstrip("/") + "/_hfsnapshot/direct",
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
_chain()
