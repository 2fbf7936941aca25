"""Implicit Hub use seen where huggingface_hub does its work, and managed there (CONTRACT section 9).

Hooks on the gated client, on the download into the cache and on ``try_to_load_from_cache`` see
every load by repo id, whatever library binds them; installed once, they serve the innermost
:class:`Observer`."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import HfSnapshotError
from ...request import is_commit, snapshot_label
from ...settings import ImplicitMode, Settings, pytest_command
from .. import _hf_compat
from ..cache import state, usage
from ..cache.layout import RepoCache
from ..cache.pins import REFUSALS, Pin, PinFile
from ..hub import gate, hub_calls
from ..hub.credentials import token_set
from ..own_work import busy
from . import local_answers
from .ready import ReadyFiles, repo_root, snapshot_path
from .uses import Preparer, Recorder

#: Refusals that depend on the token in use: replayed offline only under the same token situation.
_TOKEN_REFUSALS = ("GatedRepo", "RepoNotFound")

log = logging.getLogger("pytest_hfsnapshot")


class OfflineMiss(NamedTuple):
    """A load an offline run could not serve: in which phase, of which snapshot and path."""

    phase: str
    label: str
    path: str


class Observer:
    """Implicit Hub use of one test session in this process: what is seen, and what is done about it."""

    def __init__(
        self,
        *,
        mode: ImplicitMode,
        offline: Callable[[], bool],
        endpoint: Callable[[], str],
        pin_file: Callable[[], PinFile | None],
        settings: Callable[[], Settings],
        prepare: Preparer | None = None,
    ) -> None:
        self.mode = mode
        self.recorder = Recorder()
        self._offline = offline
        self._endpoint = endpoint
        self._pin_file = pin_file
        self._settings = settings
        self.offline_misses: list[OfflineMiss] = []
        self._lock = threading.Lock()
        #: What ``manage`` and ``fail`` make ready before the client reads it, and what it verified.
        self.ready = ReadyFiles(prepare, settings, self._pin)
        #: The implicit refusals this process kept in the cache's state (cache, repo, code, token set).
        self._refusals_kept: set[tuple[str, str, str, str, bool]] = set()
        self._fetched = _Fetched()
        #: Called with every answer huggingface_hub's client gets, the plugin's own included.
        self._listeners: list[Callable[[Any], None]] = []

    @property
    def manages(self) -> bool:
        return self.mode in ("manage", "fail")

    def offline(self) -> bool:
        return self._offline()

    def listen(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener(response)`` with every answer of the Hub from now on (the plugin's own too)."""
        self._listeners.append(listener)

    def endpoint(self) -> str:
        """The Hub's endpoint this process talks to."""
        return self._endpoint()

    # --- HTTP: requests and answers -------------------------------------------------------------
    def on_request(self, request: Any) -> None:
        """Send a pinned branch's requests at its commit (``manage``): no request names the branch."""
        if not self.manages or busy() or self.offline():
            return
        url = str(request.url)
        call = hub_calls.parse(url, self._endpoint())
        if call is None or is_commit(call.revision):
            return
        pin = self._pin(call.repo_type, call.repo_id, call.revision)
        if pin is not None and pin.commit is not None:
            request.url = type(request.url)(hub_calls.with_revision(url, call, pin.commit))

    def on_response(self, response: Any) -> None:
        """Record what an answer of the Hub says of a snapshot (its commit, a path, an absence, a refusal)."""
        for listener in self._listeners:
            listener(response)
        if busy():
            return
        request = response.request
        call = hub_calls.parse(str(request.url), self._endpoint())
        if call is None or call.kind in ("xet-token", "other"):
            return
        status = int(response.status_code)
        headers = response.headers
        code = headers.get("X-Error-Code")
        commit = headers.get("X-Repo-Commit") or (call.revision if is_commit(call.revision) else None)
        note = self.recorder.note
        revision = self._asked_revision(call)
        if status >= 400:
            if code in REFUSALS and status in (401, 403, 404):
                self._refused(call.repo_type, call.repo_id, revision, code)
            elif code == "EntryNotFound" and call.kind == "file":
                note(call.repo_type, call.repo_id, revision, commit=commit, missing=call.path)
            return
        if call.kind == "file":
            size = _int(headers.get("X-Linked-Size")) if request.method == "HEAD" else -1
            if size < 0 and request.method == "HEAD":
                size = _int(headers.get("Content-Length"))
            note(call.repo_type, call.repo_id, revision, commit=commit, path=call.path, size=size)
        elif call.kind in ("revision", "info"):
            # The body is the client's to read (a cut one must fail as it would): the commit comes
            # from the files then loaded, or the refs the client writes (see branch_of).
            note(call.repo_type, call.repo_id, revision, commit=commit)
        elif call.kind == "paths-info":
            note(call.repo_type, call.repo_id, revision, commit=commit)
            for entry in _json_list(response):
                if isinstance(entry, dict) and entry.get("type", "file") == "file" and "path" in entry:
                    listed: Any = entry.get("size")
                    note(
                        call.repo_type,
                        call.repo_id,
                        revision,
                        path=str(entry["path"]),
                        size=listed if isinstance(listed, int) else -1,
                    )
        else:
            note(call.repo_type, call.repo_id, revision, commit=commit)

    def _refused(self, repo_type: str, repo_id: str, revision: str, code: str) -> None:
        """The Hub refused a load: recorded, and (for offline runs) whether a token was set then."""
        self.recorder.note(repo_type, repo_id, revision, refused=code)
        if code not in _TOKEN_REFUSALS or self.offline():
            return
        with_token = token_set()
        kept = (str(self._cache_dir()), repo_type, repo_id, code, with_token)
        if kept not in self._refusals_kept:
            # Once per process for each refusal and token situation: library code refused on every
            # call (a repo-info probe it catches) writes no file per request.
            self._refusals_kept.add(kept)
            state.remember_implicit_refusal(
                RepoCache(self._cache_dir(), repo_id, repo_type), code=code, token_set=with_token
            )

    def _refusal_stands(self, repo_type: str, repo_id: str, code: str) -> bool:
        """Whether a recorded refusal is replayed offline: under the token situation it was met with
        (CONTRACT section 3), or when this cache never met it (the pin file alone records it)."""
        if code not in _TOKEN_REFUSALS:
            return True
        recalled = state.recalled_implicit_refusal(RepoCache(self._cache_dir(), repo_id, repo_type))
        if recalled is None:
            return True
        from ..hub.refusals import replay_refused  # it imports huggingface_hub's HTTP stack: not at start-up

        return replay_refused(recorded_token_set=bool(recalled.get("token_set")), token_set=token_set())

    def _asked_revision(self, call: hub_calls.HubCall) -> str:
        """The revision a request was asked at: a pinned branch the plugin sent at its commit is the branch."""
        return self.branch_of(call.repo_type, call.repo_id, call.revision, None)

    def _pin(self, repo_type: str, repo_id: str, revision: str) -> Pin | None:
        pin_file = self._pin_file()
        return pin_file.pin_for(repo_type, repo_id, revision) if pin_file is not None else None

    def branch_of(self, repo_type: str, repo_id: str, revision: str, cache_dir: Path | None) -> str:
        """The branch or tag a load by commit id stands for: the pin file's, else the cache's ref naming it.

        Library code resolves ``main`` once and loads every file by commit (transformers); offline,
        that resolution reads the cache's refs and sends nothing.
        """
        if not is_commit(revision):
            return revision
        pin = self._pin(repo_type, repo_id, revision)
        if pin is not None:
            return pin.revision
        if cache_dir is not None:
            refs = RepoCache(cache_dir, repo_id, repo_type).root / "refs"
            with contextlib.suppress(OSError):
                for name in sorted(os.listdir(refs)):
                    with contextlib.suppress(OSError), open(refs / name) as ref:
                        if ref.read().strip() == revision:
                            return name
        return revision

    def local_answer(self, request: Any) -> local_answers.Answer | None:
        """Offline: the Hub's answer to ``request`` made from the pin file and the cache, if it can be."""
        if not self.offline():
            return None
        call = hub_calls.parse(str(request.url), self._endpoint())
        if call is None:
            return None
        pin_file = self._pin_file()
        pin = pin_file.pin_for(call.repo_type, call.repo_id, call.revision) if pin_file is not None else None
        if (
            pin is not None
            and pin.refusal is not None
            and not self._refusal_stands(call.repo_type, call.repo_id, pin.refusal)
        ):
            return None
        return local_answers.answer(call, str(request.method), pin_file, self._cache_dir(), _body(request))

    def local_refs(self, repo_type: str, repo_id: str) -> local_answers.Answer | None:
        """Offline, and under ``manage`` and ``fail``: a repo's refs as the pin file records them (no
        request resolves a pinned branch); None where it records none, or under ``report``."""
        if not (self.manages or self.offline()):
            return None
        return local_answers.refs(self._pin_file(), repo_type, repo_id)

    def handle(self, inner: Any, request: Any) -> Any:
        """The transport's step: offline, answer a recorded snapshot here and let nothing out."""
        if not self.offline():
            return inner.handle_request(request)
        url = str(request.url)
        made = self.local_answer(request)
        if made is None:
            from huggingface_hub.errors import OfflineModeIsEnabled

            self.refused_offline(request)
            raise OfflineModeIsEnabled(
                f"Cannot reach {url}: this test session is offline ({pytest_command('offline')} or HF_HUB_OFFLINE=1), "
                "and pytest-hfsnapshot lets no request of huggingface_hub out."
            )
        return _response(request, made)

    def _cache_dir(self) -> Path:
        cache = self._settings().resolved().cache_dir
        assert cache is not None
        return Path(cache)

    # --- hf_hub_download into the cache ---------------------------------------------------------
    def download(self, original: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        if busy() or kwargs.get("dry_run"):
            return original(**kwargs)
        repo_type = str(kwargs.get("repo_type") or "model")
        repo_id = str(kwargs["repo_id"])
        filename = str(kwargs["filename"])
        asked = kwargs.get("revision") or "main"
        revision = str.__str__(asked)
        resolved = getattr(asked, "resolved", None)
        cache_dir = Path(kwargs.get("cache_dir") or self._cache_dir())
        revision = self.branch_of(repo_type, repo_id, revision, cache_dir)
        offline = self.offline()
        started = time.time()
        if offline or self.manages:
            self._replay(repo_type, repo_id, revision, filename, refusals=offline, cache_dir=cache_dir)
        managed = 0
        if not offline and self.manages and not kwargs.get("local_files_only") and not kwargs.get("force_download"):
            target = self.ready.target(repo_type, repo_id, resolved or revision)
            prepared = self.ready.prepare(cache_dir, repo_type, repo_id, target, filename)
            if prepared is not None and target != str(resolved or revision):
                _point_ref(cache_dir, repo_type, repo_id, revision, prepared.commit)
            if prepared is not None:
                kwargs = {**kwargs, "revision": prepared.commit}
                managed = prepared.fetched
        try:
            result = original(**kwargs)
        except Exception as error:
            self._failed(error, repo_type, repo_id, revision, filename, offline=offline)
            raise
        if isinstance(result, str):
            commit = commit_of(result)
            size, fetched = self._fetched.sizes(result, started)
            self.recorder.note(
                repo_type, repo_id, revision, commit=commit, path=filename, size=size, fetched=max(fetched, managed)
            )
            if commit is not None:
                usage.record_use(cache_dir, repo_type, repo_id, commit)
        return result

    def _replay(
        self, repo_type: str, repo_id: str, revision: str, path: str, *, refusals: bool, cache_dir: Path | None = None
    ) -> None:
        """A recorded absence (and, offline, a refusal) raises what the Hub's answer made the client raise
        online; an absence leaves the client's marker in the call's cache, as the Hub's 404 does."""
        pin = self._pin(repo_type, repo_id, revision)
        if pin is None:
            return
        made = None
        if pin.refusal is not None:
            if not refusals or not self._refusal_stands(repo_type, repo_id, pin.refusal):
                return
            made = local_answers.refusal(pin.refusal, pin.commit)
        elif path in pin.missing and pin.commit is not None:
            made = local_answers.missing(pin.commit)
            if cache_dir is not None:
                with contextlib.suppress(OSError, HfSnapshotError):
                    RepoCache(cache_dir, repo_id, repo_type).mark_absent(pin.commit, path)
        if made is not None:
            self.recorder.note(repo_type, repo_id, revision, commit=pin.commit, missing=path, refused=pin.refusal)
            _hf_compat.raise_for_answer(
                _response(_request("HEAD", _resolve_url(repo_type, repo_id, revision, path)), made)
            )

    def _failed(
        self, error: BaseException, repo_type: str, repo_id: str, revision: str, path: str, *, offline: bool
    ) -> None:
        from huggingface_hub import errors

        note = self.recorder.note
        if isinstance(error, errors.LocalEntryNotFoundError):
            if offline:
                self._missed(snapshot_label(repo_id, repo_type, revision), path)
            return
        if isinstance(error, errors.EntryNotFoundError):
            response = getattr(error, "response", None)
            commit = response.headers.get("X-Repo-Commit") if response is not None else None
            note(repo_type, repo_id, revision, commit=commit, missing=path)
        elif isinstance(error, errors.GatedRepoError):
            self._refused(repo_type, repo_id, revision, "GatedRepo")
        elif isinstance(error, errors.RepositoryNotFoundError):
            self._refused(repo_type, repo_id, revision, "RepoNotFound")
        elif isinstance(error, errors.RevisionNotFoundError):
            self._refused(repo_type, repo_id, revision, "RevisionNotFound")

    def refused_offline(self, request: Any) -> None:
        """A request offline mode refuses: the load it serves was not recorded, its test's failure says so."""
        call = hub_calls.parse(str(request.url), self._endpoint())
        if call is not None and call.kind not in ("xet-token", "other"):
            asked = hub_calls.HubCall(call.kind, call.repo_type, call.repo_id, self._asked_revision(call))
            self._missed(asked.label, call.path or f"answer to its {call.kind} request")

    def _missed(self, label: str, what: str) -> None:
        """An offline load the cache could not serve: its test's failure will name it."""
        with self._lock:
            self.offline_misses.append(OfflineMiss(self.recorder.phase, label, what))

    # --- try_to_load_from_cache -----------------------------------------------------------------
    def lookup(self, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        result = original(*args, **kwargs)
        if busy():
            return result
        bound = _bind(original, args, kwargs)
        if bound is None or "repo_id" not in bound or "filename" not in bound:
            return result
        repo_id, filename = str(bound["repo_id"]), str(bound["filename"])
        repo_type = str(bound.get("repo_type") or "model")
        lookup_cache = Path(bound.get("cache_dir") or self._cache_dir())
        revision = self.branch_of(repo_type, repo_id, str.__str__(bound.get("revision") or "main"), lookup_cache)
        commit = commit_of(result) if isinstance(result, str) else None
        if isinstance(result, str) and commit is not None:
            self.read_from_cache(lookup_cache, repo_type, repo_id, revision, commit, filename)
            if not os.path.isfile(result):
                result = original(*args, **kwargs)
        elif isinstance(result, str):
            self.recorder.note(repo_type, repo_id, revision, path=filename, size=_size(result))
        elif result is not None:  # huggingface_hub's _CACHED_NO_EXIST
            self.recorder.note(repo_type, repo_id, revision, missing=filename)
        return result

    def ready_file(self, cache_dir: Path, repo_type: str, repo_id: str, revision: str, path: str) -> str | None:
        """The snapshot file of a load ``manage`` made ready here before (at the commit asked, or the
        branch's pinned one), unchanged since: recorded, and answered with no other work; else None."""
        commit = self.ready.target(repo_type, repo_id, revision)
        known = is_commit(commit) and self.manages and not self.offline()
        found = self.ready.known(cache_dir, repo_type, repo_id, commit, path) if known else None
        if found is None:
            return None
        revision = self.branch_of(repo_type, repo_id, revision, cache_dir)
        self.recorder.note(repo_type, repo_id, revision, commit=commit, path=path, size=found[1])
        usage.record_use(cache_dir, repo_type, repo_id, commit)
        return found[0]

    def read_from_cache(
        self, cache_dir: Path, repo_type: str, repo_id: str, revision: str, commit: str, path: str
    ) -> None:
        """A file read from the cache with no request: ``try_to_load_from_cache`` here, or a session
        process's load by commit (its start-up hook tells the endpoint). Under ``manage`` it is verified,
        and repaired, before the reader goes on; it is recorded like a download."""
        revision = self.branch_of(repo_type, repo_id, revision, cache_dir)
        if self.manages and not self.offline():
            self.ready.prepare(cache_dir, repo_type, repo_id, commit, path)
        snapshot_file = snapshot_path(cache_dir, repo_type, repo_id, commit, path)
        self.recorder.note(repo_type, repo_id, revision, commit=commit, path=path, size=_size(snapshot_file))
        usage.record_use(cache_dir, repo_type, repo_id, commit)


# --- installation: hooks once per process, serving the innermost observer -----------------------

_active: list[Observer] = []
#: What puts huggingface_hub back as it was; the cancel of the wait for its download module.
_hooks: list[Callable[[], None]] = []
_waiting: list[Callable[[], None]] = []
_install_lock = threading.RLock()


def current() -> Observer | None:
    """The innermost active observer of this process, if any."""
    return _active[-1] if _active else None


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[Observer]:
    """Make ``observer`` the one the hooks serve while inside (hooks installed on first use)."""
    start(observer)
    try:
        yield observer
    finally:
        stop(observer)


def start(observer: Observer) -> None:
    """Make ``observer`` the one the hooks serve until :func:`stop`; the hooks go on huggingface_hub
    when its download module is imported (now, if it is)."""
    with _install_lock:
        _active.append(observer)
        if not _hooks and not _waiting:
            _waiting.append(_hf_compat.when_downloads_load(_hook_in))


def _hook_in() -> None:
    with _install_lock:
        if _active and not _hooks:
            _hooks.append(_hf_compat.wrap_download_to_cache(_download_wrapper))
            _hooks.append(_hf_compat.hook_cache_lookup(_lookup_hook))


def stop(observer: Observer) -> None:
    """Take ``observer`` out; the last one out removes the hooks (or the wait for the module)."""
    with _install_lock:
        if observer in _active:
            _active.remove(observer)
        if not _active:
            for undo in [*_waiting, *reversed(_hooks)]:
                undo()
            _waiting.clear()
            _hooks.clear()


def _download_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def download_to_cache_dir(**kwargs: Any) -> Any:
        observer = current()
        if observer is None:
            return original(**kwargs)
        return observer.download(original, kwargs)

    return download_to_cache_dir


def _lookup_hook(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    observer = current()
    if observer is None:
        return original(*args, **kwargs)
    return observer.lookup(original, args, kwargs)


class _Transport:
    """A transport that lets the active observer answer (offline) before the real one sends."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def handle_request(self, request: Any) -> Any:
        observer = current()
        if observer is None:
            return self._inner.handle_request(request)
        return observer.handle(self._inner, request)

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _Transport:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)


def attach(client: Any) -> None:
    """Give a new HTTP client of huggingface_hub the observation hooks and the offline transport."""

    def on_request(request: Any) -> None:
        observer = current()
        if observer is not None:
            observer.on_request(request)

    def on_response(response: Any) -> None:
        observer = current()
        if observer is not None:
            observer.on_response(response)

    def answered_here(hook: Any) -> Any:
        # huggingface_hub's own hook refuses every request in offline mode; one the observer answers
        # from the pin file and the cache never leaves the process, so it may go on to the transport.
        def request_hook(request: Any) -> Any:
            try:
                return hook(request)
            except Exception as error:
                observer = current()
                if type(error).__name__ != "OfflineModeIsEnabled" or observer is None:
                    raise
                if observer.local_answer(request) is None:
                    observer.refused_offline(request)
                    raise
                return None

        return request_hook

    hooks = client.event_hooks
    client.event_hooks = {
        "request": [
            *(
                answered_here(hook) if getattr(hook, "__module__", "").startswith("huggingface_hub") else hook
                for hook in hooks.get("request", ())
            ),
            on_request,
        ],
        "response": [*hooks.get("response", ()), on_response],
    }
    _hf_compat.wrap_client_transports(client, _Transport)


# Implicit Hub use is seen, and offline runs kept offline, on every client the gate makes.
gate.on_new_client(attach)


# --- helpers ------------------------------------------------------------------------------------


def _int(text: str | None) -> int:
    try:
        return int(text) if text is not None else -1
    except ValueError:
        return -1


def _json_list(response: Any) -> list[Any]:
    """The JSON list of an answer; a body that cannot be read fails as it would when the client reads it."""
    response.read()
    try:
        data = response.json()
    except ValueError:
        return []
    return data if isinstance(data, list) else []


def _body(request: Any) -> bytes:
    """A request's body when it is at hand (a paths-info form); b"" for a streamed one."""
    try:
        return bytes(request.content)
    except Exception:
        return b""


def commit_of(path: str) -> str | None:
    """The commit of a path ``.../snapshots/<commit>/...`` of the cache."""
    parts = os.fspath(path).split(os.sep)
    for index in range(len(parts) - 2, -1, -1):
        if parts[index] == "snapshots" and is_commit(parts[index + 1]):
            return parts[index + 1]
    return None


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


class _Fetched:
    """The file contents counted as fetched, by blob and write time: each write is counted once (a
    client's HEAD loads a file, its GET right after reads the same bytes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted: set[tuple[str, int]] = set()

    def sizes(self, path: str, started: float) -> tuple[int, int]:
        """The file's size, and the bytes this call fetched for it: its contents written since
        ``started`` and not counted before."""
        try:
            st = os.stat(path)
        except OSError:
            return -1, 0
        if st.st_mtime < started - 1:
            return st.st_size, 0
        written = (os.path.realpath(path), st.st_mtime_ns)
        with self._lock:
            if written in self._counted:
                return st.st_size, 0
            self._counted.add(written)
        return st.st_size, st.st_size


def _point_ref(cache_dir: Path, repo_type: str, repo_id: str, branch: str, commit: str) -> None:
    """``refs/<branch>`` names the pinned commit a load was made ready at, as huggingface_hub's own
    resolution of the branch leaves it (``try_to_load_from_cache`` reads it)."""
    ref = os.path.join(repo_root(str(cache_dir), repo_id, repo_type), "refs", *branch.split("/"))
    with contextlib.suppress(OSError), open(ref, encoding="ascii", errors="replace") as held:
        if held.read().strip() == commit:
            return
    with contextlib.suppress(OSError, HfSnapshotError):
        RepoCache(cache_dir, repo_id, repo_type).refs.write(branch, commit)


@functools.lru_cache(maxsize=16)
def _parameters(function: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def _bind(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments by name (a hook's hot path: no ``Signature.bind``); None when they do not fit."""
    names = _parameters(function)
    if len(args) > len(names) or any(name in kwargs for name in names[: len(args)]):
        return None
    return {**dict(zip(names, args, strict=False)), **kwargs}


def _resolve_url(repo_type: str, repo_id: str, revision: str, path: str) -> str:
    from huggingface_hub import hf_hub_url

    return str(hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision))


def _http_module() -> Any:
    import importlib

    import huggingface_hub

    return importlib.import_module(type(huggingface_hub.get_session()).__module__.split(".")[0])


def _request(method: str, url: str) -> Any:
    return _http_module().Request(method, url)


def _response(request: Any, made: local_answers.Answer) -> Any:
    return _http_module().Response(made.status, headers=dict(made.headers), content=made.body, request=request)


__all__ = ["Observer", "OfflineMiss", "attach", "commit_of", "current", "observing", "start", "stop"]
