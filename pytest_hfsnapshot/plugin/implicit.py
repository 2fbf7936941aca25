"""Implicit Hub use in a test session: which test made it, the endpoint its children reach, the summary, ``fail``."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..core.cache import pins
from ..core.cache.formats import count, human_size
from ..core.implicit import cache_changes, file_materialize, observe
from ..core.implicit.uses import COLLECTION, SESSION, ImplicitUse, Key, merged
from ..endpoint import ChildEnvironment, DirectConnection, SessionEndpoint
from ..request import snapshot_label
from ..settings import pytest_command, say
from .options import Options

_WORKEROUTPUT_KEY = "hfsnapshot_implicit"
_DIRECT_KEY = "hfsnapshot_direct"
_WORKEROUTPUT_MISSES = "hfsnapshot_implicit_misses"
#: Where a session's pin file would be written when none is named (the commands the messages give).
_PINS_HINT = "hf-pins.json"


#: ``Path(text)``, made once for each text: the endpoint asks for its children's cache on every request.
_path = functools.lru_cache(maxsize=4)(Path)


class ImplicitSession:
    """This process's part of implicit Hub use: registered as a plugin when the mode is not ``off``."""

    def __init__(
        self,
        config: pytest.Config,
        options: Options,
        session_id: str,
        *,
        install_gate: Callable[[], None] = lambda: None,
    ) -> None:
        from huggingface_hub import constants

        self.config = config
        self.options = options
        #: The pin file the loads follow, made absolute once (the endpoint reads it for every answer):
        #: none while ``--hf-update-pins`` asks the Hub anew.
        self._pins = None if options.pins is None or options.update_pins else os.path.abspath(options.pins)
        self.observer = observe.Observer(
            mode=options.implicit,
            offline=options.effective_offline,
            endpoint=lambda: str(constants.ENDPOINT),
            pin_file=self._pin_file,
            settings=lambda: options.settings(session_id),
            prepare=file_materialize.prepare,
        )
        self.worker_uses: list[ImplicitUse] = []
        self.worker_direct: list[DirectConnection] = []
        #: Offline misses of the workers that no test can be told of (label, path).
        self.worker_misses: list[tuple[str, str]] = []
        self._before: cache_changes.CacheState | None = None
        #: Keys each fixture's setup used, by (baseid, name): ``fail`` fails every test that requests it.
        self._fixture_keys: dict[tuple[str, str], set[Key]] = {}
        self._fixture_stack: list[tuple[str, str]] = []
        observe.start(self.observer)
        if getattr(config, "workerinput", None) is None:
            self._before = cache_changes.scan(options.effective_cache_dir())
        #: The session endpoint the processes tests start talk to (None where no test runs).
        self.endpoint: SessionEndpoint | None = None
        self._children: ChildEnvironment | None = None
        if _runs_tests(config):
            # The children's cache is the one they inherit (HF_HUB_CACHE), as library code's calls here use.
            self.endpoint = SessionEndpoint(
                self.observer,
                lambda: options.settings(session_id),
                lambda: _path(constants.HF_HUB_CACHE),
                before_upstream=install_gate,
            )
            self.endpoint.start()
            self._children = ChildEnvironment(
                self.endpoint.url_for(SESSION),
                offline=options.effective_offline(),
                upstream=self.endpoint.upstream,
                offline_switch=say("offline"),
            )
            self._children.apply()

    def _pin_file(self) -> pins.PinFile | None:
        """The pins the session's loads follow."""
        if self._pins is None:
            return None
        try:
            return pins.load(self._pins)
        except Exception:
            return None

    def close(self) -> None:
        """The endpoint stopped (no port left listening), the children's environment restored, the hooks out."""
        try:
            if self.endpoint is not None:
                self.endpoint.close()
        finally:
            if self._children is not None:
                self._children.restore()
            observe.stop(self.observer)

    def _children_of(self, phase: str) -> contextlib.AbstractContextManager[None]:
        """``HF_ENDPOINT`` naming ``phase`` for the processes started in it."""
        if self.endpoint is None or self._children is None:
            return contextlib.nullcontext()
        return self._children.for_test(self.endpoint.url_for(phase))

    # --- which test is running ------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, Any, Any]:
        self.observer.recorder.phase = COLLECTION
        try:
            with self._children_of(COLLECTION):
                return (yield)
        finally:
            self.observer.recorder.phase = SESSION

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        self.observer.recorder.phase = item.nodeid
        try:
            with self._children_of(item.nodeid):
                return (yield)
        finally:
            self.observer.recorder.phase = SESSION

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Generator[None, Any, Any]:
        if fixturedef.scope == "function" or self.observer.mode != "fail":
            return (yield)
        owner = (fixturedef.baseid, fixturedef.argname)
        before = self.observer.recorder.keys_of(self.observer.recorder.phase)
        try:
            return (yield)
        finally:
            used = self.observer.recorder.keys_of(self.observer.recorder.phase) - before
            if used:
                self._fixture_keys.setdefault(owner, set()).update(used)

    # --- reports: fail mode, offline misses -----------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        report: pytest.TestReport = yield
        if report.when == "call" and report.passed and self.observer.mode == "fail" and not self.options.update_pins:
            unlisted = self._unlisted(item)
            if unlisted:
                report.outcome = "failed"
                report.longrepr = fail_message(item.nodeid, unlisted, self.options.pins)
        if report.failed:
            lines = [
                offline_miss_line(miss.label, miss.path, self.options.pins)
                for miss in self.observer.offline_misses
                if miss.phase == item.nodeid
            ]
            if lines:
                _add_lines(report, list(dict.fromkeys(lines)))
        return report

    def _unlisted(self, item: pytest.Item) -> list[str]:
        keys = set(self.observer.recorder.keys_of(item.nodeid))
        names = set(getattr(item, "fixturenames", ()))
        for (baseid, name), used in self._fixture_keys.items():
            if name in names and item.nodeid.startswith(baseid):
                keys |= used
        pin_file = self._pin_file()
        labels = []
        for repo_type, repo_id, revision in sorted(keys):
            listed = pin_file is not None and pin_file.pin_for(repo_type, repo_id, revision) is not None
            if not listed:
                labels.append(snapshot_label(repo_id, repo_type, revision))
        return labels

    # --- xdist and the end of the session -------------------------------------------------------
    def to_workeroutput(self, workeroutput: dict[str, Any]) -> None:
        workeroutput[_WORKEROUTPUT_KEY] = [use.to_dict() for use in self.observer.recorder.uses()]
        if self.endpoint is not None:
            workeroutput[_DIRECT_KEY] = [c._asdict() for c in self.endpoint.direct()]
        workeroutput[_WORKEROUTPUT_MISSES] = [list(miss) for miss in self._untold_misses()]

    def from_worker(self, workeroutput: dict[str, Any]) -> None:
        for data in workeroutput.get(_WORKEROUTPUT_KEY, ()):
            self.worker_uses.append(ImplicitUse.from_dict(data))
        self.worker_direct += [DirectConnection(**data) for data in workeroutput.get(_DIRECT_KEY, ())]
        self.worker_misses.extend((str(label), str(path)) for label, path in workeroutput.get(_WORKEROUTPUT_MISSES, ()))

    def direct_connections(self) -> list[DirectConnection]:
        """The connections the session's children made to the Hub's host past the endpoint, one per place."""
        found = [*(self.endpoint.direct() if self.endpoint is not None else ()), *self.worker_direct]
        return list({(c.host, c.where): c for c in reversed(found)}.values())[::-1]

    def _untold_misses(self) -> list[tuple[str, str]]:
        """Offline misses made outside any test (a process started at collection or session start)."""
        return [(m.label, m.path) for m in self.observer.offline_misses if m.phase in (SESSION, COLLECTION)]

    def miss_lines(self) -> list[str]:
        """The hint line of each offline miss no test's report can carry (the summary's), this process's and
        the workers'."""
        misses = [*self._untold_misses(), *self.worker_misses]
        return list(dict.fromkeys(offline_miss_line(label, path, self.options.pins) for label, path in misses))

    def all_uses(self, declared: Sequence[tuple[str, str, str, Sequence[str]]] = ()) -> list[ImplicitUse]:
        """Every implicit use of the session: this process's, the workers', and what child processes left.

        ``declared``: (repo type, repo id, commit, files) of the declared snapshots, whose files in
        the cache are not implicit use.
        """
        uses = merged([*self.observer.recorder.uses(), *self.worker_uses])
        if self._before is not None:
            after = cache_changes.scan(self.options.effective_cache_dir())
            known = {(u.repo_type, u.repo_id, u.commit, p) for u in uses for p in (*u.files, *u.missing)}
            known |= {(t, r, c, p) for t, r, c, files in declared for p in files}
            for use in cache_changes.uses_between(self._before, after):
                use.files = {
                    p: s for p, s in use.files.items() if (use.repo_type, use.repo_id, use.commit, p) not in known
                }
                use.missing = {p for p in use.missing if (use.repo_type, use.repo_id, use.commit, p) not in known}
                if use.files or use.missing:
                    uses.append(use)
            uses = merged(uses)
        return uses


def _runs_tests(config: pytest.Config) -> bool:
    """Whether this process runs tests: an xdist worker, or a session that is no xdist controller."""
    if config.getoption("collectonly", False):
        return False
    if getattr(config, "workerinput", None) is not None:
        return True
    distributed = getattr(config.option, "dist", "no") != "no" and bool(getattr(config.option, "tx", None))
    return not distributed


def pins_hint(pin_path: Path | None) -> str:
    """The command that records implicit uses into the run's pin file."""
    return pytest_command(("pins", pin_path if pin_path is not None else _PINS_HINT), "update_pins")


def fail_message(nodeid: str, labels: Sequence[str], pin_path: Path | None) -> str:
    """Why ``--hf-implicit=fail`` failed a test."""
    where = f"the pin file {pin_path}" if pin_path is not None else f"a pin file (no {say('pins')} given)"
    return (
        f"{nodeid} loaded {', '.join(labels)} from the Hub by repo id, and {where} does not list "
        f"{'it' if len(labels) == 1 else 'them'} ({say('implicit', value='fail')}). Record the loads online with "
        f"`{pins_hint(pin_path)}` and commit the pin file."
    )


def offline_miss_line(label: str, path: str, pin_path: Path | None) -> str:
    """The line an offline run adds to a test that failed because a load was not in the cache."""
    return (
        f"hfsnapshot: {label} has no cached {path} for this offline run; record it online with "
        f"`{pins_hint(pin_path)}`, then prefetch it with "
        f"`{pytest_command('prefetch_only', ('pins', pin_path if pin_path is not None else _PINS_HINT))}`."
    )


def _add_lines(report: pytest.TestReport, lines: list[str]) -> None:
    longrepr = report.longrepr
    text = "\n".join(lines)
    addsection = getattr(longrepr, "addsection", None)
    if callable(addsection):
        addsection("hfsnapshot", text)
    elif isinstance(longrepr, str):
        report.longrepr = f"{longrepr}\n{text}"
    elif isinstance(longrepr, tuple):
        path, lineno, message = longrepr
        report.longrepr = (path, lineno, f"{message}\n{text}")


def direct_line(connection: DirectConnection, *, offline: bool) -> str:
    """The summary's line for a connection to the Hub's host that bypassed the session endpoint."""
    what = (
        f"refused: this session is offline ({say('offline')})"
        if offline
        else "its loads are not recorded, verified, retried or served offline"
    )
    return (
        f"hfsnapshot: {connection.where} connected to {connection.host} directly, past HF_ENDPOINT "
        f"(a process of {connection.test}); {what}"
    )


def summary_lines(uses: Sequence[ImplicitUse], pin_file: pins.PinFile | None, pin_path: Path | None) -> list[str]:
    """The ``hf implicit`` section's lines: one row per snapshot, then how many the pin file does not list."""
    if not uses:
        return []
    lines = []
    for use in uses:
        commit = (use.commit or "?" * 12)[:12]
        first = use.tests[0] if use.tests else SESSION
        state = f" refused ({use.refusal})" if use.refusal else ""
        lines.append(
            f"{use.label} {commit} {count(len(use.files), 'file')} "
            f"{human_size(use.fetched)} fetched {count(len(use.tests), 'test')} (first: {first}){state}"
        )
    unlisted = [u for u in uses if pin_file is None or pin_file.pin_for(u.repo_type, u.repo_id, u.revision) is None]
    where = f"the pin file {pin_path}" if pin_path is not None else "a pin file"
    if unlisted:
        n = len(unlisted)
        lines.append(
            f"hfsnapshot: {count(n, 'implicit snapshot')} {'is' if n == 1 else 'are'} not in "
            f"{where}; record {'it' if n == 1 else 'them'} with `{pins_hint(pin_path)}`"
        )
    else:
        every, are = ("the", "is") if len(uses) == 1 else ("all", "are")
        lines.append(f"hfsnapshot: {every} {count(len(uses), 'implicit snapshot')} {are} in {where}")
    return lines


__all__ = ["ImplicitSession", "direct_line", "fail_message", "offline_miss_line", "pins_hint", "summary_lines"]
