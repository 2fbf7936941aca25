"""``pytest --hf-prefetch-only``: prefetch what the selected tests declare instead of running them.

The prefetch runs in the controller only: its threads already fetch in parallel, so xdist is off."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from ..core.engine.prefetch import Display, PrefetchResult, fit, prefetch, report_lines
from ..core.engine.specs import parse_spec
from ..core.implicit import pinned_files
from ..errors import InvalidRequestError
from ..request import SnapshotRequest
from ..snapshot import Snapshot
from . import pinning
from .declarations import requests_for_items
from .session import HfSnapshotSession

if TYPE_CHECKING:
    from ..core.engine.space import Need

_RESULT_KEY = pytest.StashKey[PrefetchResult]()
_DIST_OFF_KEY = pytest.StashKey[bool]()


def keep_in_process(config: pytest.Config) -> None:
    """Switch xdist's distribution off for this run (call from ``pytest_cmdline_main``)."""
    option = config.option
    if getattr(option, "dist", "no") == "no" and not getattr(option, "tx", None):
        return
    option.dist = "no"
    option.tx = []
    option.numprocesses = 0
    config.stash[_DIST_OFF_KEY] = True


def run(session: pytest.Session, state: HfSnapshotSession) -> bool | None:
    """``pytest_runtestloop`` of a prefetch run: prefetch instead of running tests.

    Returns None, leaving the loop to pytest, when it has something else to say: errors during
    collection, or ``--collect-only``.
    """
    config = session.config
    if config.option.collectonly or (session.testsfailed and not config.option.continue_on_collection_errors):
        return None
    pin_file = pinning.pin_file(config)
    recorded = pinned_files.requests(pin_file) if pin_file is not None else {}
    requests = list(dict.fromkeys([*requests_for_items(session.items), *declared(config), *recorded]))
    display = terminal_display(config)
    display.line("")
    if config.stash.get(_DIST_OFF_KEY, False):
        display.line("hfsnapshot: -n/--dist ignored: the prefetch runs in this process, repos in parallel threads")
    if not requests:
        display.line(
            "hfsnapshot: nothing to prefetch: the selected tests declare no snapshot "
            "(list the ones hf_snapshots(...) gets in the ini option hf_prefetch)"
        )
        config.stash[_RESULT_KEY] = PrefetchResult((), 0.0)
        return True
    fetch: Callable[[SnapshotRequest], Snapshot] = state.fetch
    if pin_file is not None and recorded:
        fetch = pinned_files.fetcher(pin_file, state.fetch, state.options.effective_cache_dir)
    result = prefetch(requests, fetch, display, plan=planner(state))
    for text in report_lines(result, on_auth_error=state.options.on_auth_error):
        display.line(text)
    config.stash[_RESULT_KEY] = result
    return True


def planner(state: HfSnapshotSession) -> Callable[[SnapshotRequest], Need] | None:
    """What the session would fetch for a request, for the prefetch's space check; None when it is off."""
    options = state.options
    if not options.space_check or options.effective_offline():
        return None
    from ..core.engine.engine import plan_request  # a prefetch run needs the engine anyway

    def plan(request: SnapshotRequest) -> Need:
        return plan_request(request, options.settings(state.session_id))

    return plan


def finish(session: pytest.Session, state: HfSnapshotSession) -> None:
    """Set the exit status of a prefetch run (call from the controller's ``pytest_sessionfinish``)."""
    result = session.config.stash.get(_RESULT_KEY, None)
    if result is None or session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return
    if not result.ok(state.options.on_auth_error):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif result.results:
        session.exitstatus = pytest.ExitCode.OK


def declared(config: pytest.Config) -> list[SnapshotRequest]:
    """The requests of the ini option ``hf_prefetch``; a malformed line is a usage error naming it."""
    out: list[SnapshotRequest] = []
    for number, text in enumerate(config.getini("hf_prefetch"), 1):
        if not text.strip():
            continue
        try:
            out.append(parse_spec(text))
        except InvalidRequestError as error:
            raise pytest.UsageError(
                f"ini option hf_prefetch, entry {number} ({text.strip()!r}): {error} "
                "Use org/name[@revision] or a JSON object such as "
                '{"repo_id": "org/name", "allow_patterns": ["*.json"]}.'
            ) from None
    return out


def terminal_display(config: pytest.Config) -> Display:
    """A display on pytest's terminal reporter, live when it writes to a terminal."""
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return Display(lambda text: None)
    # pytest 8.0 has a bool here; later versions a bool that is also callable.
    isatty = reporter.isatty
    if not (isatty() if callable(isatty) else isatty):
        return Display(reporter.write_line)

    def line(text: str) -> None:
        reporter.rewrite(text, erase=True)
        reporter.write("\n", flush=True)

    def status(text: str) -> None:
        reporter.rewrite(fit(text), erase=True)
        reporter.flush()

    return Display(line, status)


__all__ = ["declared", "finish", "keep_in_process", "run", "terminal_display"]
