"""The pytest plugin (entry point ``hfsnapshot``): hooks that delegate, one module per job of the layer."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

from ..core.cache.formats import human_size
from ..core.hub import gate, outage
from ..core.hub.offline import force_offline
from ..errors import InvalidRequestError
from ..request import RequestKeywords, SnapshotRequest
from ..settings import AUTH_ACTIONS, MISSING_ACTIONS, VERIFY_MODES, serve_front
from ..snapshot import Snapshot
from . import pinning, reporting, verdicts
from .declarations import (
    MARKERS,
    NO_TOKEN_REASON,
    checked,
    request_from_marker,
    requests_for_items,
    snapshot_fixture,
)
from .options import Options, add_options, prefetch_only_wanted, read_options
from .reporting import summary_lines
from .session import HfSnapshotSession, find_state, start, state_of
from .snapshot_uses import SnapshotUse, primary_uses

if TYPE_CHECKING:
    from typing_extensions import Unpack

_RESTORE_KEY = pytest.StashKey[Callable[[], None]]()
#: The front end the process served before this session (a script may run pytest, then materialize).
_FRONT_KEY = pytest.StashKey[str]()

# The hooks below import prefetch_run only for a --hf-prefetch-only run: prefetching needs
# huggingface_hub's HTTP stack, which a plain pytest start-up must not pay for.


# --- configuration ------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_cmdline_main(config: pytest.Config) -> None:
    # Runs after xdist's (tryfirst) pytest_cmdline_main and before xdist's pytest_configure.
    if prefetch_only_wanted(config):
        from . import prefetch_run

        prefetch_run.keep_in_process(config)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_FRONT_KEY] = serve_front("pytest")
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    options = read_options(config)
    pinning.configure(config, options)
    state = start(config, options)
    implicit = options.implicit != "off" and not options.prefetch_only
    if options.offline:
        # With implicit use answered from the cache, datasets' loads take the Hub path it serves.
        config.stash[_RESTORE_KEY] = force_offline(datasets_hub_path=implicit)
    if implicit:
        from .implicit import ImplicitSession

        state.implicit = ImplicitSession(config, options, state.session_id, install_gate=state.install_gate)
        config.pluginmanager.register(state.implicit, "hfsnapshot-implicit")
        state.install_gate_on_import()


def pytest_unconfigure(config: pytest.Config) -> None:
    serve_front(config.stash.get(_FRONT_KEY, "materialize"))
    state = find_state(config)
    if state is not None and state.implicit is not None:
        state.implicit.close()  # first: the children's environment it set goes back before offline's
    restore = config.stash.get(_RESTORE_KEY, None)
    if restore is not None:
        restore()
        del config.stash[_RESTORE_KEY]
    if state is not None:
        state.remove_gate()
    if state is not None and state.worker is None:
        state.failure_memory.remove()
        outage.remove(state.options.effective_cache_dir(), state.session_id)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = find_state(session.config)
    if state is None:
        return
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        state.to_workeroutput(workeroutput)
    if state.worker is None:
        if state.options.prefetch_only:
            from . import prefetch_run

            prefetch_run.finish(session, state)
        if state.options.manifest is not None:
            reporting.write_manifest(session, state.options.manifest, state.all_uses())
        state.finish_implicit()
        pinning.finish(session, state.options, state.all_uses(), state.implicit_uses)


# --- collection and running ---------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[None, Any, Any]:
    result = yield
    if isinstance(result, list):
        return [checked(collector, node) for node in result]
    return checked(collector, result)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Requests of the tests themselves (from_pretrained, hf_hub_download) go through the gate too.
    state = find_state(item.config)
    if state is not None:
        state.install_gate(if_loaded=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    state = find_state(session.config)
    if state is None or state.worker is not None or not state.options.prefetch_only:
        return None
    from . import prefetch_run

    return prefetch_run.run(session, state)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    # One wrapper per report does all the per-test work: a refused Hub access raised by test code
    # or its fixtures becomes the configured verdict before pytest (and its skipping plugin, inner
    # to this outermost wrapper) turns the call into a report; then the report is redacted.
    state = find_state(item.config)
    excinfo = verdicts.apply_to_call(state.options if state is not None else None, call)
    report: pytest.TestReport = yield
    verdicts.tag_report(excinfo, report)
    reporting.redact_report(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report: pytest.CollectReport = yield
    reporting.redact_report(report)
    return report


# --- reporting ----------------------------------------------------------------------------------


def pytest_report_header(config: pytest.Config) -> str | None:
    state = find_state(config)
    return reporting.header(state.options) if state is not None else None


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    state = find_state(config)
    if state is None or state.worker is not None:
        return
    reporting.write_summary(
        terminalreporter,
        state.all_uses(),
        state.auth_counts,
        verbose=config.get_verbosity() > 0,
        factory_tests=state.factory_tests if not config.getini("hf_prefetch") else 0,
        failed=list(state.failed.values()),
        rate_limited=gate.waited(state.gate_folders()),
        unreachable=outage.endpoints(state.options.effective_cache_dir(), state.session_id),
        pins=pinning.summary_lines(config),
    )
    misses = state.implicit.miss_lines() if state.implicit is not None else []
    if state.implicit_uses or misses or state.direct:
        from .implicit import direct_line
        from .implicit import summary_lines as implicit_lines

        terminalreporter.write_sep("=", "hf implicit")
        if state.implicit_uses:
            for line in implicit_lines(state.implicit_uses, pinning.pin_file_now(config), state.options.pins):
                terminalreporter.write_line(line)
        for line in misses:
            terminalreporter.write_line(line)
        offline = state.options.effective_offline()
        for connection in state.direct:
            terminalreporter.write_line(direct_line(connection, offline=offline))


# --- fixtures -----------------------------------------------------------------------------------


class SnapshotFactory:
    """What the ``hf_snapshots`` fixture gives: call it like ``materialize`` to get a Snapshot."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def __call__(self, repo_id: str, **keywords: Unpack[RequestKeywords]) -> Snapshot:
        """The snapshot of ``repo_id``, with the keywords of every declaration form (see ``snapshot_fixture``)."""
        request = SnapshotRequest.from_keywords(repo_id, keywords, form="hf_snapshots(...)")
        return state_of(self._config).provide(request, factory=True)


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
    return state_of(request.config).provide(snapshot_request)


# --- public helpers -----------------------------------------------------------------------------


def get_options(config: pytest.Config) -> Options:
    """The validated options of this run."""
    return state_of(config).options


def session_id(config: pytest.Config) -> str:
    """The id shared by the controller and every xdist worker of this test session."""
    return state_of(config).session_id


def fetch_snapshot(config: pytest.Config, request: SnapshotRequest) -> Snapshot:
    """Materialize ``request`` once for this process, keeping it for the summary and manifest.

    Raises the core's typed errors (:class:`~pytest_hfsnapshot.errors.HfSnapshotError`); the
    failure is remembered, so tests needing the same request later get their verdict at once.
    """
    return state_of(config).fetch(request)


def snapshot_uses(config: pytest.Config) -> list[SnapshotUse]:
    """Every snapshot use of the session seen by this process: its own, then the workers' (controller only)."""
    return state_of(config).all_uses()


__all__ = [
    "AUTH_ACTIONS",
    "MISSING_ACTIONS",
    "NO_TOKEN_REASON",
    "VERIFY_MODES",
    "HfSnapshotSession",
    "Options",
    "SnapshotFactory",
    "SnapshotUse",
    "fetch_snapshot",
    "get_options",
    "hf_snapshot",
    "hf_snapshots",
    "human_size",
    "primary_uses",
    "request_from_marker",
    "requests_for_items",
    "session_id",
    "snapshot_fixture",
    "snapshot_uses",
    "summary_lines",
]
