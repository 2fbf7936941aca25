"""One rate-limit gate for every request huggingface_hub sends during a session (or a ``materialize`` call).

huggingface_hub honours a 429's reset only inside the call that met it; the gate's hooks on the
client keep one file per endpoint so every thread and process of the session waits for it.
hf_xet's own requests are out of its reach."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from ...errors import HfSnapshotError, RateLimitError
from ...settings import DEFAULT_MAX_RATE_WAIT, say
from .._hf_compat import client_factory_in_place, client_factory_is
from ..cache.formats import count
from ..cache.layout import atomic_write_json, endpoint_file, endpoint_lock, gate_dir, read_json

if TYPE_CHECKING:
    from .retry import Classification

log = logging.getLogger("pytest_hfsnapshot")

# Two 429s of one window give resets a second apart at most (the Hub rounds t to seconds).
_SAME_WINDOW = 1.5


def origin_of(url: object) -> str:
    """``scheme://host:port`` of a URL, as written in it (the one rule for an origin)."""
    text = str(url)
    slash = text.find("/", text.find("//") + 2) if "//" in text else -1
    if slash < 0 or "?" in text[:slash] or "#" in text[:slash]:
        parts = urlsplit(text)
        return f"{parts.scheme}://{parts.netloc}"
    return text[:slash]


def endpoint_of(url: object) -> str:
    """The origin of a URL, with ``/api`` appended for the Hub's API routes (their quota is apart)."""
    text = str(url)
    origin = origin_of(text)
    return origin + "/api" if text.startswith("/api/", len(origin)) else origin


class Waited(NamedTuple):
    """The rate-limit windows a session met: how many, for how long (their union), at which endpoints."""

    windows: int
    seconds: float
    endpoints: tuple[str, ...]


class Gate:
    """The rate-limit gate of ``session``; ``cache_dir`` gives the cache its windows live in (read at each request)."""

    def __init__(
        self,
        cache_dir: Callable[[], str | os.PathLike[str]],
        session: str,
        *,
        max_wait: float = DEFAULT_MAX_RATE_WAIT,
    ) -> None:
        self._cache_dir = cache_dir
        self.session = session
        self.max_wait = max_wait
        #: Every folder this process wrote a window to (for the cleanup and the summary).
        self.folders: set[str] = set()
        self._known: dict[str, tuple[int, int, float]] = {}
        self._paths: dict[tuple[Path, str], str] = {}
        self._folders: dict[str | os.PathLike[str], Path] = {}

    def _folder(self) -> Path:
        cache = self._cache_dir()
        folder = self._folders.get(cache)
        if folder is None:
            folder = self._folders[cache] = gate_dir(cache, self.session)
        return folder

    # --- the hooks ------------------------------------------------------------------------------
    def before(self, request: Any) -> None:
        """Request hook: wait for the reset of the request's endpoint, when a 429 closed it."""
        endpoint = endpoint_of(request.url)
        folder = self._folder()
        path = self._paths.get((folder, endpoint))
        if path is None:
            path = self._paths[(folder, endpoint)] = str(endpoint_file(folder, endpoint))
        while True:
            try:
                st = os.stat(path)
            except OSError:
                return
            wait = self._until(path, st) - time.time()
            if wait <= 0:
                return
            if wait > self.max_wait:
                data = read_json(Path(path))
                policy = data.get("policy") if isinstance(data, dict) else None
                message = self._cap_message(endpoint, wait, policy)
                raise RateLimitError(message, endpoint=endpoint, wait=wait, cap=self.max_wait)
            time.sleep(wait)  # then look again: a later 429 may have moved the reset on

    def after(self, response: Any) -> None:
        """Response hook: a 429 that says when its window resets closes the endpoint until then."""
        if response.status_code != 429:
            return
        from .retry import rate_limit_reset  # needs huggingface_hub's errors: loaded by now

        reset = rate_limit_reset(response.headers)
        if reset is None or reset <= 0:
            return
        endpoint = endpoint_of(response.request.url)
        policy = _policy(response.headers)
        self.record(endpoint, reset, policy, announce=reset <= self.max_wait)
        if reset > self.max_wait:
            # Raised here, before the client sleeps out the window in its own backoff.
            raise RateLimitError(
                self._cap_message(endpoint, reset, policy), endpoint=endpoint, wait=reset, cap=self.max_wait
            )

    # --- windows --------------------------------------------------------------------------------
    def record(self, endpoint: str, reset: float, policy: str | None = None, *, announce: bool = True) -> None:
        """Close ``endpoint`` for ``reset`` seconds, for every process of the session; logged once per window.

        ``announce=False`` when the wait will not happen (past the cap: the error says so instead).
        """
        from filelock import FileLock  # imported by the first 429, not at every start-up

        now = time.time()
        until = now + reset
        folder = self._folder()
        path = endpoint_file(folder, endpoint)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with FileLock(str(endpoint_lock(path)), is_singleton=False):
                data = read_json(path)
                data = data if isinstance(data, dict) else {}
                if float(data.get("until", 0.0)) >= until - _SAME_WINDOW:
                    return  # another request of this window told us already
                windows = [*data.get("windows", []), [now, until]]
                atomic_write_json(path, {"endpoint": endpoint, "until": until, "windows": windows, "policy": policy})
        except (OSError, HfSnapshotError):
            return  # a read-only cache: each process meets the limit on its own, as without the gate
        finally:
            self.folders.add(str(folder))
        if not announce:
            return
        log.warning(
            "hfsnapshot: the Hub rate-limited this session (%s); waiting %.0f s until its window resets",
            endpoint,
            reset,
        )

    def _until(self, path: str, st: os.stat_result) -> float:
        known = self._known.get(path)
        if known is not None and known[:2] == (st.st_mtime_ns, st.st_size):
            return known[2]
        data = read_json(Path(path))
        until = float(data.get("until", 0.0)) if isinstance(data, dict) else 0.0
        self._known[path] = (st.st_mtime_ns, st.st_size, until)
        return until

    def _cap_message(self, endpoint: str, wait: float, policy: str | None) -> str:
        limit = f" (its limit: {policy})" if policy else ""
        return (
            f"The Hub rate-limited this session at {endpoint}{limit}: its window resets in {wait:.0f} s, "
            f"longer than {say('max_rate_wait', value=f'{self.max_wait:g}')} s allows waiting. Run again later, "
            f"raise {say('max_rate_wait')}, or set HF_TOKEN (signed-in requests get higher limits)."
        )

    # --- the client factory ---------------------------------------------------------------------
    def client_factory(self, previous: Callable[[], Any]) -> Callable[[], Any]:
        """A factory that makes ``previous``'s client and adds the gate's hooks to it."""

        def gated_client() -> Any:
            client = previous()
            hooks = client.event_hooks
            client.event_hooks = {
                "request": [*hooks.get("request", ()), self.before],
                "response": [self.after, *hooks.get("response", ())],
            }
            for attach in list(_attachers):
                attach(client)
            _made.add(client)
            return client

        gated_client.gate = self  # type: ignore[attr-defined]
        return gated_client


#: What every gated client gets besides the gate's hooks, registered by the wings above the Hub door
#: (the observer of implicit use): the door calls up through this list, never imports upward.
_attachers: list[Callable[[Any], None]] = []
#: The gated clients made so far, so that an attacher registered late reaches them too.
_made: weakref.WeakSet[Any] = weakref.WeakSet()


def on_new_client(attach: Callable[[Any], None]) -> None:
    """Run ``attach`` on each client the gate makes from now on, and on those it made already."""
    _attachers.append(attach)
    for client in list(_made):
        attach(client)


def waited(folders: Iterable[str], *, now: float | None = None) -> Waited:
    """The windows recorded in ``folders``: their count and the seconds they cover (up to ``now``)."""
    end = time.time() if now is None else now
    spans: list[tuple[float, float]] = []
    endpoints: set[str] = set()
    for folder in set(folders):
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                data = read_json(Path(entry.path)) if entry.name.endswith(".json") else None
                if not isinstance(data, dict):
                    continue
                endpoints.add(str(data.get("endpoint")))
                for start, until in data.get("windows", ()):
                    spans.append((float(start), min(float(until), end)))
    total, reach = 0.0, -1.0
    for start, until in sorted(spans):
        if until > reach:
            total += until - max(start, reach)
            reach = until
    return Waited(len(spans), total, tuple(sorted(endpoints)))


def remove(folders: Iterable[str]) -> None:
    """Delete gate folders (once every process of the session is done with them)."""
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


# --- installation: one gate per process at a time ---------------------------------------------


@dataclass
class _Installed:
    gate: Gate
    previous: Callable[[], Any]
    factory: Callable[[], Any]
    users: int = 0


_install_lock = threading.Lock()
_installed: _Installed | None = None


def active() -> Gate | None:
    """The gate installed in this process, if any."""
    current = _installed
    return current.gate if current is not None else None


def acquire(make: Callable[[], Gate]) -> Gate:
    """Install the gate ``make()`` builds, or join the one already installed; pair with :func:`release`."""
    global _installed
    with _install_lock:
        if _installed is None:
            import huggingface_hub

            previous = client_factory_in_place()
            gate = make()
            factory = gate.client_factory(previous)
            huggingface_hub.set_client_factory(factory)
            _installed = _Installed(gate, previous, factory)
        _installed.users += 1
        return _installed.gate


def release(gate: Gate) -> bool:
    """Leave the gate; the last user removes it and puts the previous factory back. True when removed."""
    global _installed
    with _install_lock:
        current = _installed
        if current is None or current.gate is not gate:
            return False
        current.users -= 1
        if current.users > 0:
            return False
        _installed = None
        import huggingface_hub

        if client_factory_is(current.factory):
            huggingface_hub.set_client_factory(current.previous)  # also closes the gated client
        return True


@contextlib.contextmanager
def for_call(cache_dir: str | os.PathLike[str], max_wait: float, session: str | None = None) -> Iterator[Gate]:
    """The gate for work outside a pytest session: the one installed, or one of its own until the work ends.

    With ``session`` (an id the caller shares between processes, as the bench's workers do) its
    windows are shared with the other processes of that session and left for them; without, they
    live in a folder of this call, removed at the end.
    """
    name = session or "call-" + uuid.uuid4().hex[:16]
    gate = acquire(lambda: Gate(lambda: cache_dir, name, max_wait=max_wait))
    try:
        yield gate
    finally:
        if release(gate) and session is None:
            remove(gate.folders)


def holds(kind: Classification) -> bool:
    """Whether the installed gate waits out this failure's rate-limit window itself (so a retry need not)."""
    return kind.status == 429 and kind.retry_after is not None and active() is not None


def _policy(headers: Any) -> str | None:
    """The Hub's quota in words, from ``RateLimit-Policy`` (``"fixed window";"api";q=500;w=300``)."""
    from huggingface_hub import utils as hf_utils

    parse = getattr(hf_utils, "parse_ratelimit_headers", None)
    info = parse(headers) if parse is not None and hasattr(headers, "get") else None
    if info is None or info.limit is None or info.window_seconds is None:
        return None
    requests = count(info.limit, '"' + str(info.resource_type) + '" request')
    return f"{requests} per {info.window_seconds} s"


__all__ = [
    "Gate",
    "Waited",
    "acquire",
    "active",
    "endpoint_of",
    "for_call",
    "holds",
    "on_new_client",
    "origin_of",
    "release",
    "remove",
    "waited",
]
