"""The session object: one per process of a test session, registered in ``pytest_configure``.

It hands out each snapshot once per process and shares failed verdicts with the other processes;
xdist workers ship their uses to the controller at the end."""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from ..core._hf_compat import http_client_loaded, when_downloads_load
from ..core.cache.formats import FailureRow, request_label
from ..core.cache.state import FailureMemory
from ..core.hub import gate
from ..errors import AuthError, HfSnapshotError, HfSnapshotWarning
from ..request import SnapshotRequest
from ..snapshot import Snapshot
from .options import Options
from .snapshot_uses import SnapshotUse, request_key
from .verdicts import Verdict, auth_outcome, for_failure

if TYPE_CHECKING:
    from ..core.implicit.uses import ImplicitUse
    from ..endpoint import DirectConnection
    from .implicit import ImplicitSession

_WORKERINPUT_SESSION = "hfsnapshot_session"
_WORKEROUTPUT_KEY = "hfsnapshot"


class HfSnapshotSession:
    """Per-process state of one test session: options, snapshots handed out, failures remembered."""

    def __init__(self, options: Options, session_id: str, worker: str | None) -> None:
        self.options = options
        self.session_id = session_id
        self.worker = worker
        #: The snapshots this process materialized, in order.
        self.uses: list[SnapshotUse] = []
        #: The workers' uses, merged in by the controller.
        self.worker_uses: list[SnapshotUse] = []
        #: Failed requests' verdicts, shared on disk with the other processes of the session.
        self.failure_memory = FailureMemory(session_id)
        #: The session's rate-limit gate, installed once huggingface_hub's HTTP layer is loaded.
        self.gate = gate.Gate(options.effective_cache_dir, session_id, max_wait=options.max_rate_wait)
        self._gated = False
        #: Gate folders the workers wrote to, merged in by the controller.
        self.worker_gate_folders: set[str] = set()
        #: Tests that met a refused Hub access, by pytest's word for their outcome
        #: ("skipped", "xfailed", "failed", "error"; see verdicts.auth_outcome).
        self.auth_counts: dict[str, int] = {}
        #: How many collected tests use the hf_snapshots factory (the most any process collected).
        self.factory_tests = 0
        #: Requests that could not be made ready (refusals aside), by request key; the controller
        #: merges the workers' in, for the summary.
        self.failed: dict[str, FailureRow] = {}
        self._snapshots: dict[SnapshotRequest, Snapshot] = {}
        self._verdicts: dict[SnapshotRequest, Verdict] = {}
        self._lock = threading.Lock()
        self._gate_wait: Callable[[], None] = lambda: None
        #: Implicit Hub use of this process (``--hf-implicit`` other than ``off``).
        self.implicit: ImplicitSession | None = None
        #: Every implicit use of the session, merged in the controller at its end.
        self.implicit_uses: list[ImplicitUse] = []
        #: Connections the session's children made to the Hub's host past the endpoint (at the end).
        self.direct: list[DirectConnection] = []

    def fetch(self, request: SnapshotRequest, *, factory: bool = False, warn_unmatched: bool = True) -> Snapshot:
        """The request's snapshot, materialized at most once by this process; core errors propagate.

        A failure's verdict is kept (here and, for other xdist workers, in the session's folder) so
        that :meth:`provide` answers every later test at once. ``factory``: asked for through the
        ``hf_snapshots`` factory. ``warn_unmatched=False``: no warning for patterns that select nothing.
        """
        with self._lock:
            known = self._snapshots.get(request)
        if known is not None:
            return known
        opts = self.options
        # Imported on the first snapshot, not at start-up: a suite that needs none does not pay
        # for huggingface_hub's HTTP stack.
        from ..core.engine.engine import materialize_request

        self.install_gate()

        started = time.monotonic()
        try:
            snapshot = materialize_request(request, opts.settings(self.session_id), warn_unmatched=warn_unmatched)
        except HfSnapshotError as error:
            self._share_verdict(request, for_failure(request, error, opts, factory=factory))
            if not isinstance(error, AuthError):
                cause = getattr(error, "cause", None)
                failure = (request_label(request), type(error).__name__, str(error), cause)
                with self._lock:
                    self.failed.setdefault(request_key(request), failure)
            raise
        use = SnapshotUse(request, snapshot, time.monotonic() - started, self.worker)
        with self._lock:
            first = request not in self._snapshots
            if first:
                self._snapshots[request] = snapshot
                self.uses.append(use)
            snapshot = self._snapshots[request]
        if first and warn_unmatched:
            # Once per process, as a pytest warning (the core logs it too, for scripts).
            for pattern in request.unmatched_allow_patterns(snapshot.files):
                warnings.warn(HfSnapshotWarning(request.unmatched_pattern_message(pattern)), stacklevel=1)
        return snapshot

    def provide(self, request: SnapshotRequest, *, factory: bool = False) -> Snapshot:
        """:meth:`fetch` for a test: a failure becomes the session's skip, xfail or failure."""
        verdict = self._shared_verdict(request)
        if verdict is None:
            try:
                return self.fetch(request, factory=factory)
            except HfSnapshotError as error:
                verdict = self._shared_verdict(request) or for_failure(request, error, self.options, factory=factory)
        raise verdict.exception()

    def install_gate(self, *, if_loaded: bool = False) -> None:
        """Put every request huggingface_hub sends from now on through the session's gate.

        ``if_loaded``: only when huggingface_hub's HTTP layer is imported already (a dict lookup:
        a suite that never loads it pays nothing).
        """
        if self._gated or (if_loaded and not http_client_loaded()):
            return
        with self._lock:
            if not self._gated:
                gate.acquire(lambda: self.gate)
                self._gated = True

    def install_gate_on_import(self) -> None:
        """:meth:`install_gate` as soon as huggingface_hub's download module is imported (now, if it is):
        library code at collection goes through the gate, and a run that never loads it pays nothing."""
        self._gate_wait = when_downloads_load(self.install_gate)

    def remove_gate(self) -> None:
        """Take the gate out (each process, at its end); the controller also deletes the session's windows."""
        self._gate_wait()
        if self._gated:
            gate.release(self.gate)
            self._gated = False
        if self.worker is None:
            gate.remove(self.gate_folders())

    def gate_folders(self) -> set[str]:
        """Every folder of the session's rate-limit windows (the workers' too, in the controller)."""
        return self.gate.folders | self.worker_gate_folders

    def all_uses(self) -> list[SnapshotUse]:
        """This process's uses, then the workers' (those arrive in the controller only)."""
        return [*self.uses, *self.worker_uses]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # With xdist, the controller sees the workers' reports here, their auth tags included.
        outcome = auth_outcome(report)
        if outcome is not None:
            self.auth_counts[outcome] = self.auth_counts.get(outcome, 0) + 1

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.factory_tests = sum(1 for item in items if "hf_snapshots" in getattr(item, "fixturenames", ()))

    def finish_implicit(self) -> None:
        """The controller's merge of the session's implicit uses (the declared snapshots' files left out)."""
        if self.implicit is None:
            return
        declared = [
            (use.request.repo_type, use.request.repo_id, use.snapshot.commit, use.snapshot.files)
            for use in self.all_uses()
        ]
        self.implicit_uses = self.implicit.all_uses(declared)
        self.direct = self.implicit.direct_connections()

    def to_workeroutput(self, workeroutput: dict[str, Any]) -> None:
        """A worker's part of the session, for the controller (see :class:`XdistHooks`)."""
        if self.implicit is not None:
            self.implicit.to_workeroutput(workeroutput)
        workeroutput[_WORKEROUTPUT_KEY] = {
            "uses": [use.to_dict() for use in self.uses],
            "failure_memory_folders": sorted(self.failure_memory.folders),
            "factory_tests": self.factory_tests,
            "failed": [[key, *failure] for key, failure in sorted(self.failed.items())],
            "gate_folders": sorted(self.gate.folders),
        }

    def _share_verdict(self, request: SnapshotRequest, verdict: Verdict) -> None:
        with self._lock:
            self._verdicts[request] = verdict
        self.failure_memory.share(self.options.effective_cache_dir(), request_key(request), verdict.to_dict())

    def _shared_verdict(self, request: SnapshotRequest) -> Verdict | None:
        with self._lock:
            verdict = self._verdicts.get(request)
        if verdict is not None:
            return verdict
        data = self.failure_memory.recall(self.options.effective_cache_dir(), request_key(request))
        verdict = Verdict.from_dict(data) if data is not None else None
        if verdict is not None:
            with self._lock:
                self._verdicts[request] = verdict
        return verdict


class XdistHooks:
    """Controller-side xdist hooks, registered only when pytest-xdist is installed."""

    def __init__(self, state: HfSnapshotSession) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_WORKERINPUT_SESSION] = self.state.session_id

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        data = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_KEY)
        if not isinstance(data, dict):
            return
        self.state.worker_uses.extend(SnapshotUse.from_dict(item) for item in data.get("uses", ()))
        self.state.failure_memory.adopt(data.get("failure_memory_folders", ()))
        factory_tests = data.get("factory_tests", 0)
        if isinstance(factory_tests, int):
            self.state.factory_tests = max(self.state.factory_tests, factory_tests)
        for key, label, kind, message, cause in data.get("failed", ()):
            self.state.failed.setdefault(key, (label, kind, message, cause))
        self.state.worker_gate_folders.update(data.get("gate_folders", ()))
        if self.state.implicit is not None:
            self.state.implicit.from_worker(getattr(node, "workeroutput", {}))


_STATE_KEY = pytest.StashKey[HfSnapshotSession]()


def start(config: pytest.Config, options: Options) -> HfSnapshotSession:
    """Make this process's session object and register it (and, in an xdist controller, the xdist hooks)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        worker: str | None = str(workerinput.get("workerid"))
        sid = str(workerinput.get(_WORKERINPUT_SESSION) or uuid.uuid4().hex)
    else:
        worker, sid = None, uuid.uuid4().hex
    state = HfSnapshotSession(options, sid, worker)
    config.stash[_STATE_KEY] = state
    config.pluginmanager.register(state, "hfsnapshot-session")
    if workerinput is None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(state), "hfsnapshot-xdist")
    return state


def find_state(config: pytest.Config) -> HfSnapshotSession | None:
    """The session object, or None when the plugin is not configured."""
    return config.stash.get(_STATE_KEY, None)


def state_of(config: pytest.Config) -> HfSnapshotSession:
    """The session object; a RuntimeError when the plugin is not configured."""
    try:
        return config.stash[_STATE_KEY]
    except KeyError:
        raise RuntimeError("pytest-hfsnapshot is not configured for this session (-p no:hfsnapshot?)") from None


__all__ = ["HfSnapshotSession", "XdistHooks", "find_state", "start", "state_of"]
