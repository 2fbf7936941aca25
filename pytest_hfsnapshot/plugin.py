"""The pytest layer: options, markers, fixtures, outcomes and reporting over the core engine.

Everything that talks to the Hub lives in :func:`pytest_hfsnapshot.materialize`; this module only
turns declarations into :class:`~pytest_hfsnapshot.request.SnapshotRequest` objects, core errors into
skips/xfails/failures, and per-process records into one terminal summary.

Records flow: each process (the controller, or each xdist worker) appends a :class:`SnapshotRecord`
per snapshot it materialized; workers ship theirs in ``config.workeroutput`` at session finish and
the controller merges them in ``pytest_testnodedown``. From the controller's ``pytest_sessionfinish``
on, :func:`snapshot_records` holds every record of the session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn

import pytest
from huggingface_hub import constants as hf_constants

from . import manifest
from .cache import atomic_write_json, own_dir, read_json
from .errors import AuthError, HfSnapshotError, InvalidRequestError, OfflineMissingError
from .request import SnapshotRequest
from .snapshot import Snapshot

AUTH_ACTIONS = ("skip", "xfail", "fail")
MISSING_ACTIONS = ("fail", "skip")
VERIFY_MODES = ("size", "sha256")

_WORKERINPUT_SESSION = "hfsnapshot_session"
_WORKEROUTPUT_KEY = "hfsnapshot"
_REQUEST_ATTR = "hfsnapshot_request"
_REPORT_AUTH_ATTR = "hfsnapshot_auth"
NO_TOKEN_REASON = "needs a Hugging Face Hub token: set HF_TOKEN (or run `hf auth login`)"
_MARKER_KWARGS = ("repo_id", "revision", "allow_patterns", "ignore_patterns", "repo_type", "metadata_only")


# --- options ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Options:
    """The plugin's settings for one run, validated at configure time (command line over ini)."""

    offline: bool
    on_auth_error: str
    on_missing: str
    strict: bool
    retries: int
    lock_timeout: float
    verify: Literal["size", "sha256"]
    #: None: huggingface_hub's ``constants.HF_HUB_CACHE``, read when a snapshot is needed.
    cache_dir: Path | None
    prefetch_only: bool
    manifest: Path | None

    def effective_cache_dir(self) -> Path:
        """The cache folder snapshots go to right now."""
        return self.cache_dir if self.cache_dir is not None else Path(hf_constants.HF_HUB_CACHE)

    def effective_offline(self) -> bool:
        """True when no network request may be made (``--hf-offline`` or ``HF_HUB_OFFLINE=1``)."""
        return self.offline or bool(hf_constants.HF_HUB_OFFLINE)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hfsnapshot", "Hugging Face Hub snapshots (pytest-hfsnapshot)")

    def add(flag: str, help: str, ini_type: str, ini_default: Any, **kwargs: Any) -> None:
        ini = "hf_" + flag.removeprefix("--hf-").replace("-", "_")
        group.addoption(flag, dest=ini, default=None, help=f"{help} (ini: {ini})", **kwargs)
        parser.addini(ini, help=help, type=ini_type, default=ini_default)  # type: ignore[arg-type]

    add("--hf-offline", "make no network request; use only what is cached", "bool", False, action="store_true")
    add(
        "--hf-on-auth-error",
        "what a test needing a gated, private or unauthorized repo does: skip (default), xfail or fail",
        "string",
        "skip",
        metavar="{skip,xfail,fail}",
    )
    add(
        "--hf-on-missing",
        "offline and not fully cached: fail (default) or skip",
        "string",
        "fail",
        metavar="{fail,skip}",
    )
    add(
        "--hf-strict",
        "fail when a cached branch or tag cannot be confirmed against the Hub",
        "bool",
        False,
        action="store_true",
    )
    add("--hf-retries", "retries for transient Hub errors (default 5)", "string", "5", metavar="N")
    add(
        "--hf-lock-timeout",
        "seconds to wait for another process holding a repo lock (default 900)",
        "string",
        "900",
        metavar="SECONDS",
    )
    add(
        "--hf-verify",
        "how cached files are re-checked: size (default) or sha256",
        "string",
        "size",
        metavar="{size,sha256}",
    )
    add(
        "--hf-cache-dir",
        "huggingface_hub cache folder to use (default: huggingface_hub's HF_HUB_CACHE)",
        "string",
        "",
        metavar="PATH",
    )
    add(
        "--hf-prefetch-only",
        "materialize every snapshot the selected tests declare (fixtures, markers, ini hf_prefetch) "
        "in parallel, write the manifest, run no test; exit 0 when all are ready",
        "bool",
        False,
        action="store_true",
    )
    add(
        "--hf-manifest",
        "write a deterministic JSON manifest of the session's snapshots to PATH (a CI cache key)",
        "string",
        "",
        metavar="PATH",
    )
    parser.addini(
        "hf_prefetch",
        "snapshots --hf-prefetch-only fetches besides the selected tests' declarations (those "
        "hf_snapshots(...) gets): one per line, org/name[@revision] or a JSON object of its arguments",
        type="linelist",
        default=[],
    )


def _read_options(config: pytest.Config) -> Options:
    def raw(name: str) -> tuple[Any, str, Path]:
        """The value, where it came from (for errors), and the folder relative paths start from."""
        value = config.getoption(name)
        if value is not None:
            return value, "--" + name.replace("_", "-"), config.invocation_params.dir
        try:
            value = config.getini(name)
        except (TypeError, ValueError, pytest.UsageError) as error:
            raise pytest.UsageError(f"ini option {name}: {error}") from None
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        return value, f"ini option {name}", base

    def choice(name: str, allowed: Sequence[str]) -> str:
        value, where, _ = raw(name)
        text = str(value).strip()
        if text not in allowed:
            raise pytest.UsageError(f"{where}: invalid value {value!r}; use one of: {', '.join(allowed)}")
        return text

    def flag(name: str) -> bool:
        value, _, _ = raw(name)
        return bool(value)

    def number(name: str, *, integer: bool, minimum: float, inclusive: bool, wanted: str) -> float:
        value, where, _ = raw(name)
        try:
            parsed = int(str(value).strip()) if integer else float(str(value).strip())
        except ValueError:
            parsed = math.nan
        if math.isnan(parsed) or math.isinf(parsed) or parsed < minimum or (parsed == minimum and not inclusive):
            raise pytest.UsageError(f"{where}: invalid value {value!r}; use {wanted}")
        return parsed

    def path(name: str) -> Path | None:
        value, _, base = raw(name)
        text = str(value).strip()
        return (base / Path(text).expanduser()).resolve() if text else None

    return Options(
        # HF_HUB_OFFLINE is read here too: huggingface_hub reads it only at import, which may have
        # happened before it was set (a conftest, a pytester run in the same process).
        offline=flag("hf_offline") or _env_offline(),
        on_auth_error=choice("hf_on_auth_error", AUTH_ACTIONS),
        on_missing=choice("hf_on_missing", MISSING_ACTIONS),
        strict=flag("hf_strict"),
        retries=int(number("hf_retries", integer=True, minimum=0, inclusive=True, wanted="an integer >= 0")),
        lock_timeout=number(
            "hf_lock_timeout", integer=False, minimum=0, inclusive=False, wanted="a number of seconds > 0"
        ),
        verify="sha256" if choice("hf_verify", VERIFY_MODES) == "sha256" else "size",
        cache_dir=path("hf_cache_dir"),
        prefetch_only=flag("hf_prefetch_only"),
        manifest=path("hf_manifest"),
    )


# --- records ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SnapshotRecord:
    """One snapshot materialized by one process of the session (the controller or an xdist worker)."""

    request: SnapshotRequest
    snapshot: Snapshot
    #: Wall seconds the plugin spent getting it, lock wait included.
    elapsed: float
    #: xdist worker id (``"gw0"``...), or None for the controller / a run without xdist.
    worker: str | None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (str, int, float, bool, list, dict) that crosses execnet and JSON."""
        snapshot = {field.name: _plain(getattr(self.snapshot, field.name)) for field in dataclasses.fields(Snapshot)}
        request = {
            field.name: _plain(getattr(self.request, field.name)) for field in dataclasses.fields(SnapshotRequest)
        }
        return {"request": request, "snapshot": snapshot, "elapsed": self.elapsed, "worker": self.worker}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SnapshotRecord:
        """Inverse of :meth:`to_dict`."""
        snap = dict(data["snapshot"])
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(Snapshot):
            if field.name in snap:
                value = snap[field.name]
                kwargs[field.name] = tuple(value) if isinstance(value, list) else value
        kwargs["path"] = Path(snap["path"])
        return cls(
            request=SnapshotRequest.build(**data["request"]),
            snapshot=Snapshot(**kwargs),
            elapsed=float(data["elapsed"]),
            worker=data.get("worker"),
        )


def _plain(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def primary_records(records: Iterable[SnapshotRecord]) -> list[SnapshotRecord]:
    """One record per request: the process that downloaded or repaired it, else the first to ask.

    Ordered by request label, so the result is deterministic whatever the worker timing.
    """
    chosen: dict[SnapshotRequest, SnapshotRecord] = {}
    for record in records:
        current = chosen.get(record.request)
        if current is None or (current.snapshot.source == "cache" and record.snapshot.source != "cache"):
            chosen[record.request] = record
    return sorted(chosen.values(), key=lambda r: (r.request.label, _request_key(r.request)))


# --- session state ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """What every test needing a failed request gets: the same answer, without asking the Hub again."""

    action: str  # "skip" | "xfail" | "fail"
    message: str
    auth: str | None = None

    def exception(self) -> BaseException:
        exc: BaseException
        if self.action == "skip":
            exc = pytest.skip.Exception(self.message, _use_item_location=True)
        elif self.action == "xfail":
            exc = pytest.xfail.Exception(self.message)
        else:
            exc = pytest.fail.Exception(self.message, pytrace=False)
        if self.auth is not None:
            setattr(exc, _REPORT_AUTH_ATTR, {"action": self.action, "reason": self.auth})
        return exc


class HfSnapshotSession:
    """Per-process state of one test session: options, snapshots handed out, failures remembered."""

    def __init__(self, options: Options, session_id: str, worker: str | None) -> None:
        self.options = options
        self.session_id = session_id
        self.worker = worker
        self.records: list[SnapshotRecord] = []
        self.worker_records: list[SnapshotRecord] = []
        self.outcome_dirs: set[str] = set()
        #: Tests that met a refused Hub access, by action taken ("skip", "xfail", "fail").
        self.auth_counts: dict[str, int] = {}
        self._snapshots: dict[SnapshotRequest, Snapshot] = {}
        self._failures: dict[SnapshotRequest, _Outcome] = {}
        self._lock = threading.Lock()

    def fetch(self, request: SnapshotRequest) -> Snapshot:
        """The request's snapshot, materialized at most once by this process; core errors propagate.

        A failure is remembered (here and, for other xdist workers, in the session's folder) so that
        :meth:`provide` answers every later test at once.
        """
        with self._lock:
            known = self._snapshots.get(request)
        if known is not None:
            return known
        opts = self.options
        from .engine import materialize_request

        started = time.monotonic()
        try:
            snapshot = materialize_request(
                request,
                cache_dir=opts.cache_dir,
                verify=opts.verify,
                retries=opts.retries,
                lock_timeout=opts.lock_timeout,
                offline=True if opts.offline else None,
                strict=opts.strict,
                session=self.session_id,
            )
        except HfSnapshotError as error:
            self._remember(request, self._outcome_for(request, error))
            raise
        record = SnapshotRecord(request, snapshot, time.monotonic() - started, self.worker)
        with self._lock:
            if request not in self._snapshots:
                self._snapshots[request] = snapshot
                self.records.append(record)
            return self._snapshots[request]

    def provide(self, request: SnapshotRequest) -> Snapshot:
        """:meth:`fetch` for a test: a failure becomes the session's skip, xfail or failure."""
        outcome = self._remembered(request)
        if outcome is None:
            try:
                return self.fetch(request)
            except HfSnapshotError as error:
                outcome = self._remembered(request) or self._outcome_for(request, error)
        raise outcome.exception()

    def all_records(self) -> list[SnapshotRecord]:
        return [*self.records, *self.worker_records]

    # Registered as a plugin: with xdist, the controller sees the workers' reports here, the
    # auth tag included (xdist carries extra report attributes across).
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        auth = getattr(report, _REPORT_AUTH_ATTR, None)
        if isinstance(auth, dict) and report.when in ("setup", "call"):
            action = str(auth.get("action", "skip"))
            self.auth_counts[action] = self.auth_counts.get(action, 0) + 1

    def _outcome_for(self, request: SnapshotRequest, error: HfSnapshotError) -> _Outcome:
        from .outcomes import auth_message

        opts = self.options
        if isinstance(error, AuthError):
            message = auth_message(
                error.reason,
                repo_id=request.repo_id,
                repo_type=request.repo_type,
                revision=request.revision,
                endpoint=hf_constants.ENDPOINT,
                token_set=_token() is not None,
            )
            return _Outcome(opts.on_auth_error, message, auth=error.reason)
        if isinstance(error, OfflineMissingError):
            message = f"{request.label}: offline and not fully cached: {error}"
            missing = [name for name in error.missing if name not in str(error)]
            if missing:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                message += f" (missing: {shown})"
            return _Outcome(opts.on_missing, message)
        return _Outcome("fail", f"{request.label}: {type(error).__name__}: {error}")

    # Failures are shared with the other processes of the session through a small file in the
    # cache's own folder; a read-only cache just means each process finds out for itself.
    def _outcome_path(self, request: SnapshotRequest) -> Path:
        folder = own_dir(self.options.effective_cache_dir()) / "outcomes" / self.session_id
        return folder / f"{_request_key(request)}.json"

    def _remember(self, request: SnapshotRequest, outcome: _Outcome) -> None:
        with self._lock:
            self._failures[request] = outcome
        path = self._outcome_path(request)
        try:
            atomic_write_json(path, dataclasses.asdict(outcome), root=self.options.effective_cache_dir())
        except (OSError, HfSnapshotError):
            return
        self.outcome_dirs.add(str(path.parent))

    def _remembered(self, request: SnapshotRequest) -> _Outcome | None:
        with self._lock:
            outcome = self._failures.get(request)
        if outcome is not None:
            return outcome
        data = read_json(self._outcome_path(request))
        if not isinstance(data, dict) or data.get("action") not in AUTH_ACTIONS:
            return None
        outcome = _Outcome(str(data["action"]), str(data.get("message", "")), data.get("auth"))
        with self._lock:
            self._failures[request] = outcome
        return outcome


_token_memo: dict[tuple[str | None, ...], str | None] = {}


def _token() -> str | None:
    """huggingface_hub's token (what ``get_token`` returns), for the header and for redaction.

    The common sources, ``HF_TOKEN`` / ``HUGGING_FACE_HUB_TOKEN`` and the token file, are read
    here directly: importing ``get_token`` pulls in huggingface_hub's whole HTTP stack, about
    100 ms that every pytest start-up would pay for one "token=set" in the header. OIDC
    exchanges and Colab secrets go through ``get_token`` itself. The answer is memoized on the
    settings it depends on, since redaction asks for every report with text.
    """
    key = (
        os.environ.get("HF_TOKEN"),
        os.environ.get("HUGGING_FACE_HUB_TOKEN"),
        os.environ.get("HF_OIDC_RESOURCE"),
        hf_constants.HF_TOKEN_PATH,
    )
    if key not in _token_memo:
        _token_memo[key] = _look_up_token(key[0] or key[1], oidc=bool(key[2]), path=key[3])
    return _token_memo[key]


def _look_up_token(from_env: str | None, *, oidc: bool, path: str) -> str | None:
    if not oidc and "google.colab" not in sys.modules:
        if from_env and from_env.strip():
            return from_env.strip()
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip() or None
        except OSError:
            return None
    from huggingface_hub import get_token

    # get_token can raise (a failed OIDC exchange); for our messages that just means "no token".
    try:
        return get_token()
    except Exception:
        return None


def _request_key(request: SnapshotRequest) -> str:
    blob = json.dumps([_plain(getattr(request, f.name)) for f in dataclasses.fields(SnapshotRequest)])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


_STATE_KEY = pytest.StashKey[HfSnapshotSession]()
_RESTORE_KEY = pytest.StashKey[Callable[[], None]]()


def _state(config: pytest.Config) -> HfSnapshotSession:
    try:
        return config.stash[_STATE_KEY]
    except KeyError:
        raise RuntimeError("pytest-hfsnapshot is not configured for this session (-p no:hfsnapshot?)") from None


def get_options(config: pytest.Config) -> Options:
    """The validated options of this run."""
    return _state(config).options


def session_id(config: pytest.Config) -> str:
    """The id shared by the controller and every xdist worker of this test session."""
    return _state(config).session_id


def fetch_snapshot(config: pytest.Config, request: SnapshotRequest) -> Snapshot:
    """Materialize ``request`` once for this process, recording it for the summary and manifest.

    Raises the core's typed errors (:class:`~pytest_hfsnapshot.errors.HfSnapshotError`); the
    failure is remembered, so tests needing the same request later get their outcome at once.
    """
    return _state(config).fetch(request)


def snapshot_records(config: pytest.Config) -> list[SnapshotRecord]:
    """Every record of the session seen by this process: its own, then the workers' (controller only)."""
    return _state(config).all_records()


# --- declarations -------------------------------------------------------------------------------


def snapshot_fixture(
    repo_id: str,
    revision: str = "main",
    allow_patterns: str | Sequence[str] | None = None,
    ignore_patterns: str | Sequence[str] | None = None,
    repo_type: str = "model",
    metadata_only: bool = False,
) -> Callable[..., Snapshot]:
    """Declare a session-scoped fixture giving a verified :class:`~pytest_hfsnapshot.Snapshot`.

    The fixture is named after the variable it is assigned to (``tiny_bert = snapshot_fixture(...)``
    in a conftest defines ``tiny_bert``). The declaration is validated right away: a bad repo id,
    revision, repo type or pattern fails the import of the declaring file, naming its line.
    """
    __tracebackhide__ = True  # the error names the declaring line; our frame adds nothing
    caller = sys._getframe(1)
    where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
    try:
        request = SnapshotRequest.build(
            repo_id,
            revision=revision,
            allow_patterns=allow_patterns,
            ignore_patterns=ignore_patterns,
            repo_type=repo_type,
            metadata_only=metadata_only,
        )
    except InvalidRequestError as error:
        raise InvalidRequestError(
            f"invalid snapshot_fixture(...) declared at {where}: {error}", repo_id=error.repo_id
        ) from None

    def hf_snapshot_fixture(pytestconfig: pytest.Config) -> Snapshot:
        return _state(pytestconfig).provide(request)

    hf_snapshot_fixture.__doc__ = f"Snapshot of {request.label} (snapshot_fixture declared at {where})."
    setattr(hf_snapshot_fixture, _REQUEST_ATTR, request)
    fixture = pytest.fixture(scope="session")(hf_snapshot_fixture)
    setattr(fixture, _REQUEST_ATTR, request)
    return fixture


def request_from_marker(marker: pytest.Mark) -> SnapshotRequest:
    """The request an ``hf_snapshot`` marker asks for; InvalidRequestError when it is malformed."""
    unknown = sorted(set(marker.kwargs) - set(_MARKER_KWARGS))
    if unknown:
        raise InvalidRequestError(
            f"unknown argument(s) {', '.join(unknown)}; hf_snapshot takes the repo id and "
            f"{', '.join(_MARKER_KWARGS[1:])}"
        )
    kwargs = dict(marker.kwargs)
    if len(marker.args) > 1 or (marker.args and "repo_id" in kwargs):
        raise InvalidRequestError("hf_snapshot takes one positional argument, the repo id ('org/name')")
    repo_id = marker.args[0] if marker.args else kwargs.pop("repo_id", None)
    kwargs.pop("repo_id", None)
    return SnapshotRequest.build(repo_id, **kwargs)


def requests_for_items(items: Iterable[pytest.Item]) -> list[SnapshotRequest]:
    """Every snapshot the given tests declare, deduplicated, in first-use order.

    Covers ``snapshot_fixture`` declarations reachable through each item's fixture closure and the
    closest valid ``hf_snapshot`` marker; calls to the ``hf_snapshots`` factory cannot be known
    before they run.
    """
    found: dict[SnapshotRequest, None] = {}
    for item in items:
        marker = item.get_closest_marker("hf_snapshot")
        if marker is not None:
            with contextlib.suppress(InvalidRequestError):
                found.setdefault(request_from_marker(marker), None)
        info = getattr(item, "_fixtureinfo", None)
        name2defs: dict[str, Sequence[Any]] = getattr(info, "name2fixturedefs", {}) or {}
        for name in getattr(item, "fixturenames", ()):
            for request in _declared_requests(name, name2defs.get(name, ())):
                found.setdefault(request, None)
    return list(found)


def _declared_requests(name: str, defs: Sequence[Any]) -> list[SnapshotRequest]:
    # The last definition is the one the test sees; earlier ones matter only when it requests
    # its own name (an override extending the fixture it overrides).
    out: list[SnapshotRequest] = []
    for fixturedef in reversed(defs):
        request = getattr(getattr(fixturedef, "func", None), _REQUEST_ATTR, None)
        if isinstance(request, SnapshotRequest):
            out.append(request)
        if name not in getattr(fixturedef, "argnames", ()):
            break
    return out


class _InvalidDeclaration(pytest.Collector):
    """Stands in for a test whose ``hf_snapshot`` marker is malformed: it fails at collection."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._message = message

    def collect(self) -> NoReturn:
        raise self.CollectError(self._message)


def _checked(collector: pytest.Collector, node: object) -> object:
    if not isinstance(node, pytest.Function):
        return node
    if node.get_closest_marker("hf_requires_token") is not None and _token() is None:
        node.add_marker(pytest.mark.skip(reason=NO_TOKEN_REASON))
    marker = node.get_closest_marker("hf_snapshot")
    if marker is None:
        return node
    try:
        request_from_marker(marker)
    except InvalidRequestError as error:
        shown = ", ".join([*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
        message = f"{node.nodeid}: invalid @pytest.mark.hf_snapshot({shown}): {error}"
        return _InvalidDeclaration.from_parent(collector, name=node.name, message=message)
    # A marked test needs its snapshot even when it reads it by repo id rather than through the
    # hf_snapshot fixture: request the fixture for it, so a refused access skips the test. Done
    # here, for marked tests only (on a copy: parametrized siblings share the list), instead of
    # through an autouse fixture that every test of every suite would pay for.
    if "hf_snapshot" not in node.fixturenames:
        node.fixturenames = [*node.fixturenames, "hf_snapshot"]
    return node


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[None, Any, Any]:
    result = yield
    if isinstance(result, list):
        return [_checked(collector, node) for node in result]
    return _checked(collector, result)


# --- configuration ------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    from .testing import fixtures as testing_fixtures

    # The testing kit's fixtures (local_hub, ...) come with the plugin, like pytest-httpserver's.
    if not config.pluginmanager.is_registered(testing_fixtures):
        config.pluginmanager.register(testing_fixtures, "hfsnapshot-testing")
    config.addinivalue_line(
        "markers",
        "hf_snapshot(repo_id, revision='main', allow_patterns=None, ignore_patterns=None, "
        "repo_type='model', metadata_only=False): the test needs this Hugging Face Hub snapshot; "
        "the hf_snapshot fixture gives it.",
    )
    config.addinivalue_line(
        "markers", "hf_requires_token: skip the test when no Hugging Face Hub token is configured (HF_TOKEN)."
    )
    options = _read_options(config)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        worker: str | None = str(workerinput.get("workerid"))
        sid = str(workerinput.get(_WORKERINPUT_SESSION) or uuid.uuid4().hex)
    else:
        worker, sid = None, uuid.uuid4().hex
    state = HfSnapshotSession(options, sid, worker)
    config.stash[_STATE_KEY] = state
    config.pluginmanager.register(state, "hfsnapshot-session")
    if options.offline:
        config.stash[_RESTORE_KEY] = _force_offline()
    if workerinput is None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(state), "hfsnapshot-xdist")


def _env_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set to a true value, as huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in hf_constants.ENV_VARS_TRUE_VALUES


def _force_offline() -> Callable[[], None]:
    # huggingface_hub reads HF_HUB_OFFLINE once, at import: patch the constant here, and set the
    # variable for xdist workers and other children, which import it later.
    old_constant = hf_constants.HF_HUB_OFFLINE
    old_env = os.environ.get("HF_HUB_OFFLINE")
    hf_constants.HF_HUB_OFFLINE = True
    os.environ["HF_HUB_OFFLINE"] = "1"

    def restore() -> None:
        hf_constants.HF_HUB_OFFLINE = old_constant
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env

    return restore


def pytest_unconfigure(config: pytest.Config) -> None:
    restore = config.stash.get(_RESTORE_KEY, None)
    if restore is not None:
        restore()
        del config.stash[_RESTORE_KEY]
    state = config.stash.get(_STATE_KEY, None)
    if state is not None and state.worker is None:
        for folder in state.outcome_dirs:
            shutil.rmtree(folder, ignore_errors=True)


class _XdistHooks:
    """Controller-side xdist hooks, registered only when pytest-xdist is installed."""

    def __init__(self, state: HfSnapshotSession) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_WORKERINPUT_SESSION] = self.state.session_id

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        data = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_KEY)
        if not isinstance(data, dict):
            return
        self.state.worker_records.extend(SnapshotRecord.from_dict(item) for item in data.get("records", ()))
        self.state.outcome_dirs.update(data.get("outcome_dirs", ()))


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_STATE_KEY, None)
    workeroutput: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if state is not None and workeroutput is not None:
        workeroutput[_WORKEROUTPUT_KEY] = {
            "records": [record.to_dict() for record in state.records],
            "outcome_dirs": sorted(state.outcome_dirs),
        }
    if state is not None and state.worker is None:
        if state.options.prefetch_only:
            from .prefetch import finish_session

            finish_session(session)
        if state.options.manifest is not None:
            _write_manifest(session, state.options.manifest, state.all_records())


def _write_manifest(session: pytest.Session, path: Path, records: Sequence[SnapshotRecord]) -> None:
    try:
        manifest.write(path, ((record.request, record.snapshot) for record in primary_records(records)))
    except OSError as error:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"hfsnapshot: could not write the manifest {path}: {error}", red=True)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- prefetch (--hf-prefetch-only) --------------------------------------------------------------
# The code is in pytest_hfsnapshot.prefetch, which builds on this module: imported late, no cycle.


def pytest_cmdline_main(config: pytest.Config) -> None:
    # Runs after xdist's (tryfirst) pytest_cmdline_main and before xdist's pytest_configure.
    wanted = config.getoption("hf_prefetch_only", None)
    if wanted is None:
        try:
            wanted = config.getini("hf_prefetch_only")
        except (TypeError, ValueError):
            return  # reported as a usage error when the plugin reads its options
    if wanted:
        from .prefetch import keep_in_process

        keep_in_process(config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    state = session.config.stash.get(_STATE_KEY, None)
    if state is None or state.worker is not None or not state.options.prefetch_only:
        return None
    from .prefetch import run_in_session

    return run_in_session(session)


# --- fixtures -----------------------------------------------------------------------------------


class SnapshotFactory:
    """What the ``hf_snapshots`` fixture gives: call it like ``materialize`` to get a Snapshot."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def __call__(
        self,
        repo_id: str,
        *,
        revision: str = "main",
        allow_patterns: str | Sequence[str] | None = None,
        ignore_patterns: str | Sequence[str] | None = None,
        repo_type: str = "model",
        metadata_only: bool = False,
    ) -> Snapshot:
        request = SnapshotRequest.build(
            repo_id,
            revision=revision,
            allow_patterns=allow_patterns,
            ignore_patterns=ignore_patterns,
            repo_type=repo_type,
            metadata_only=metadata_only,
        )
        return _state(self._config).provide(request)


@pytest.fixture(scope="session")
def hf_snapshots(pytestconfig: pytest.Config) -> SnapshotFactory:
    """Session-scoped factory: ``hf_snapshots("org/name", revision=..., ...) -> Snapshot``."""
    return SnapshotFactory(pytestconfig)


@pytest.fixture
def hf_snapshot(request: pytest.FixtureRequest) -> Snapshot:
    """The Snapshot of the closest ``@pytest.mark.hf_snapshot(...)`` marker (one per session per request)."""
    marker = request.node.get_closest_marker("hf_snapshot")
    if marker is None:
        pytest.fail(
            f"{request.node.nodeid}: the hf_snapshot fixture needs @pytest.mark.hf_snapshot('org/name', ...) "
            "on the test, its class or its module",
            pytrace=False,
        )
    try:
        snapshot_request = request_from_marker(marker)
    except InvalidRequestError as error:
        pytest.fail(f"{request.node.nodeid}: invalid hf_snapshot marker: {error}", pytrace=False)
    return _state(request.config).provide(snapshot_request)


# --- outcomes of test code ----------------------------------------------------------------------


def _user_auth_outcome(config: pytest.Config, exc: BaseException) -> _Outcome | None:
    """A refused Hub access raised by test code (e.g. transformers' OSError from GatedRepoError)."""
    from .outcomes import auth_message, auth_repo, classify_auth

    reason = classify_auth(exc)
    state = config.stash.get(_STATE_KEY, None)
    if reason is None or state is None or state.options.on_auth_error == "fail":
        return None
    repo = auth_repo(exc)
    message = auth_message(
        reason,
        repo_id=repo[0] if repo else None,
        repo_type=repo[1] if repo else "model",
        endpoint=hf_constants.ENDPOINT,
        token_set=_token() is not None,
    )
    return _Outcome(state.options.on_auth_error, message, auth=reason)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    # One wrapper per report does all the per-test work: a refused Hub access raised by test code
    # or its fixtures becomes the configured outcome before pytest (and its skipping plugin, inner
    # to this outermost wrapper) turns the call into a report; then the report is redacted.
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, Exception) and call.when in ("setup", "call"):
        outcome = _user_auth_outcome(item.config, excinfo.value)
        if outcome is not None:
            call.excinfo = excinfo = _raised(outcome.exception())
    report: pytest.TestReport = yield
    if excinfo is not None:
        auth = getattr(excinfo.value, _REPORT_AUTH_ATTR, None)
        if auth is not None:
            setattr(report, _REPORT_AUTH_ATTR, auth)
    _redact_report(report)
    return report


def _raised(exc: BaseException) -> pytest.ExceptionInfo[BaseException]:
    """``exc`` as pytest sees an exception that was raised (with a traceback)."""
    try:
        raise exc
    except BaseException:
        return pytest.ExceptionInfo.from_current()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report: pytest.CollectReport = yield
    _redact_report(report)
    return report


def _redact_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    # A safety net behind our own messages, which never hold the token: tracebacks of libraries
    # (with --showlocals) and captured output might. Most reports carry neither: nothing to do.
    if report.longrepr is None and not report.sections and not getattr(report, "wasxfail", None):
        return
    token = _token()
    if not token or len(token) < 8:
        return
    if report.longrepr is not None and token in str(report.longrepr):
        report.longrepr = str(report.longrepr).replace(token, "***")
    report.sections = [(title, text.replace(token, "***")) for title, text in report.sections]
    wasxfail = getattr(report, "wasxfail", None)
    if isinstance(wasxfail, str) and token in wasxfail:
        report.wasxfail = wasxfail.replace(token, "***")  # type: ignore[union-attr]


# --- reporting ----------------------------------------------------------------------------------


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(_STATE_KEY, None)
    if state is None:
        return None
    opts = state.options
    token = "set" if _token() is not None else "unset"
    return (
        f"hfsnapshot: cache={opts.effective_cache_dir()} endpoint={hf_constants.ENDPOINT} "
        f"offline={opts.effective_offline()} token={token}"
    )


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE_KEY, None)
    if state is None or state.worker is not None:
        return
    records = state.all_records()
    counts = state.auth_counts
    if not records and not counts:
        return
    terminalreporter.write_sep("=", "hf snapshots")
    verbose = config.get_verbosity() > 0
    for line in summary_lines(records, verbose=verbose):
        terminalreporter.write_line(line)
    if counts:
        total = sum(counts.values())
        parts = ", ".join(f"{counts[action]} {_PAST[action]}" for action in sorted(counts))
        terminalreporter.write_line(f"Hub access refused: {total} test{'s' if total != 1 else ''} ({parts})")


_PAST = {"skip": "skipped", "xfail": "xfailed", "fail": "failed"}


def summary_lines(records: Sequence[SnapshotRecord], *, verbose: bool = False) -> list[str]:
    """The rows of the ``hf snapshots`` section: one per snapshot, merged across processes."""
    rows: list[list[str]] = []
    notes: list[list[str]] = []
    for primary in primary_records(records):
        snap = primary.snapshot
        others = [r for r in records if r.request == primary.request and r is not primary]
        extra: list[str] = []
        if primary.worker is not None and snap.source != "cache":
            extra.append(f"{snap.source} by {primary.worker}")
        if others:
            waited = sum(r.snapshot.lock_wait for r in others)
            extra.append(f"{len(others)} other{'s' if len(others) != 1 else ''} waited {waited:.2f}s")
        if snap.unverified_revision:
            extra.append("UNVERIFIED REVISION")
        if snap.repaired:
            extra.append(f"repaired {len(snap.repaired)} file{'s' if len(snap.repaired) != 1 else ''}")
        rows.append(
            [
                _row_label(primary.request),
                snap.commit[:12],
                f"{len(snap.files)} file{'s' if len(snap.files) != 1 else ''}",
                human_size(snap.size),
                snap.source,
                f"{snap.seconds:.2f}s",
                f"lock wait {snap.lock_wait:.2f}s",
                "; ".join(extra),
            ]
        )
        notes.append([f"    repaired: {name}" for name in snap.repaired] if verbose else [])
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(8)]
    lines: list[str] = []
    for row, row_notes in zip(rows, notes, strict=True):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        lines.extend(row_notes)
    return lines


def _row_label(request: SnapshotRequest) -> str:
    narrowed = []
    if request.allow_patterns is not None:
        narrowed.append("allow " + ",".join(request.allow_patterns))
    if request.ignore_patterns is not None:
        narrowed.append("ignore " + ",".join(request.ignore_patterns))
    if request.metadata_only:
        narrowed.append("metadata only")
    return request.label + (f" [{'; '.join(narrowed)}]" if narrowed else "")


def human_size(size: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


__all__ = [
    "HfSnapshotSession",
    "Options",
    "SnapshotFactory",
    "SnapshotRecord",
    "fetch_snapshot",
    "get_options",
    "hf_snapshot",
    "hf_snapshots",
    "human_size",
    "primary_records",
    "request_from_marker",
    "requests_for_items",
    "session_id",
    "snapshot_fixture",
    "snapshot_records",
    "summary_lines",
]
