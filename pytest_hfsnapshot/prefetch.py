"""Prefetch: make every snapshot a test selection needs ready, several repos at once, and run no test.

Three ways in, one code path (:func:`prefetch`):

- ``pytest --hf-prefetch-only [selection]`` collects the selected tests (paths, ``-k`` and ``-m``
  apply), gathers the snapshots they declare (``snapshot_fixture`` fixtures in their closure, the
  closest ``hf_snapshot`` marker) plus those listed in the ini option ``hf_prefetch``, materializes
  them, writes ``--hf-manifest`` if given, and runs no test.
- ``pytest-hfsnapshot prefetch [pytest arguments]`` (or ``python -m pytest_hfsnapshot prefetch ...``)
  is the same run through ``pytest.main``.
- ``pytest-hfsnapshot prefetch --repo org/name[@revision] ...`` fetches the repos given, without
  collecting tests.

The ini option ``hf_prefetch`` declares the snapshots tests get through the ``hf_snapshots(...)``
factory, which no collection can see. One per line: ``org/name[@revision]`` (``datasets/org/name``
or ``spaces/org/name`` for other repo types), or a JSON object with the factory's arguments::

    [pytest]
    hf_prefetch =
        org/tiny-model@v1.0
        {"repo_id": "org/corpus", "repo_type": "dataset", "allow_patterns": ["*.json"]}

Those are prefetched whatever the selection, so a prefetch's manifest lists them even when the
tests calling the factory are not selected.

Parallelism: requests are grouped by repo; up to :data:`DEFAULT_WORKERS` repos are worked on at
once in threads, the requests of one repo one after another (they would only wait on its lock).

Progress: on a terminal one status line is redrawn in place (the snapshots in flight, elapsed
time) and a line is printed as each snapshot is done; elsewhere (CI logs) only those lines.

Exit status: 0 when every snapshot is ready; 1, after a table of what failed and why, when any is
not. Repos the Hub refuses (gated, private, 401) are listed apart: with the default
``--hf-on-auth-error=skip`` (or ``xfail``) the tests needing them are skipped (xfailed) later by
design, so they do not fail the prefetch; with ``--hf-on-auth-error=fail`` they do. A run that
selects no test and declares nothing keeps pytest's "no tests collected" status (5).

pytest-xdist: the prefetch runs in the controller process only. Workers would each collect the
same tests, and the threads above already fetch in parallel, so ``-n``/``--dist`` are switched
off for a ``--hf-prefetch-only`` run (a note says so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TextIO

import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub import get_token
from huggingface_hub.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

from .errors import AuthError, InvalidRequestError
from .outcomes import auth_message
from .plugin import _MARKER_KWARGS, fetch_snapshot, get_options, human_size, requests_for_items
from .plugin import _row_label as label
from .request import REPO_TYPES, SnapshotRequest
from .snapshot import Snapshot

#: Repos worked on at once.
DEFAULT_WORKERS = 4
#: Seconds between redraws of the live status line.
_TICK = 0.2


# --- results ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one request ended: its snapshot, or the error that stopped it."""

    request: SnapshotRequest
    snapshot: Snapshot | None
    error: Exception | None
    seconds: float


@dataclasses.dataclass(frozen=True)
class PrefetchResult:
    """Every request's outcome, in request order, and the prefetch's wall time."""

    outcomes: tuple[Outcome, ...]
    seconds: float

    @property
    def ready(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.snapshot is not None]

    @property
    def refused(self) -> list[Outcome]:
        """Requests the Hub refused (gated, private, unauthorized): tests skip these by design."""
        return [o for o in self.outcomes if isinstance(o.error, AuthError)]

    @property
    def failed(self) -> list[Outcome]:
        """Requests that failed for any other reason."""
        return [o for o in self.outcomes if o.error is not None and not isinstance(o.error, AuthError)]

    def ok(self, on_auth_error: str = "skip") -> bool:
        """True when nothing failed, refusals counting only when their tests will fail."""
        return not self.failed and not (on_auth_error == "fail" and self.refused)


# --- progress display ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Display:
    """Where progress goes: ``line`` for lines that stay; ``status``, if set, redraws one line in place."""

    line: Callable[[str], None]
    status: Callable[[str], None] | None = None

    @property
    def live(self) -> bool:
        return self.status is not None


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
        reporter.rewrite(_fit(text), erase=True)
        reporter.flush()

    return Display(line, status)


def stream_display(stream: TextIO) -> Display:
    """A display on a text stream (the command line's stdout), live when it is a terminal."""
    if not stream.isatty():
        return Display(lambda text: print(text, file=stream, flush=True))
    width = shutil.get_terminal_size().columns

    def line(text: str) -> None:
        print("\r" + text.ljust(width - 1), file=stream, flush=True)

    def status(text: str) -> None:
        print("\r" + _fit(text).ljust(width - 1), end="", file=stream, flush=True)

    return Display(line, status)


def _fit(text: str) -> str:
    # A status line that wraps cannot be redrawn with "\r": keep it within one terminal row.
    width = shutil.get_terminal_size().columns - 1
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


# --- the prefetch -------------------------------------------------------------------------------


def prefetch(
    requests: Iterable[SnapshotRequest],
    fetch: Callable[[SnapshotRequest], Snapshot],
    display: Display,
    *,
    workers: int = DEFAULT_WORKERS,
) -> PrefetchResult:
    """Run ``fetch`` for every distinct request, up to ``workers`` repos at once, reporting on ``display``.

    ``fetch`` must be safe to call from several threads for different repos (``materialize`` and
    the plugin's ``fetch_snapshot`` are). An exception it raises becomes that request's outcome.
    """
    unique = list(dict.fromkeys(requests))
    total = len(unique)
    started = time.monotonic()
    if not unique:
        return PrefetchResult((), 0.0)
    groups: dict[tuple[str, str], list[SnapshotRequest]] = {}
    for request in unique:
        groups.setdefault((request.repo_type, request.repo_id), []).append(request)
    parallel = max(1, min(workers, len(groups)))
    display.line(
        f"hfsnapshot: prefetching {_count(total, 'snapshot')} of {_count(len(groups), 'repo')}, {parallel} at a time"
    )
    finished: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
    active: dict[SnapshotRequest, None] = {}
    active_lock = threading.Lock()

    def work(group: list[SnapshotRequest]) -> None:
        for request in group:
            with active_lock:
                active[request] = None
            began = time.monotonic()
            try:
                outcome = Outcome(request, fetch(request), None, time.monotonic() - began)
            except Exception as error:
                outcome = Outcome(request, None, error, time.monotonic() - began)
            finally:
                with active_lock:
                    active.pop(request, None)
            finished.put(outcome)

    done: dict[SnapshotRequest, Outcome] = {}
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="hfsnapshot-prefetch")
    try:
        with _no_client_progress_bars():
            futures = [pool.submit(work, group) for group in groups.values()]
            while len(done) < total:
                try:
                    outcome = finished.get(timeout=_TICK)
                except queue.Empty:
                    _raise_if_lost(futures, finished)
                else:
                    done[outcome.request] = outcome
                    display.line(progress_line(len(done), total, outcome))
                if display.status is not None and len(done) < total:
                    with active_lock:
                        flying = [request.label for request in active]
                    elapsed = time.monotonic() - started
                    display.status(
                        f"hfsnapshot: [{len(done)}/{total}] working on {', '.join(flying) or '...'} ({elapsed:.1f}s)"
                    )
    finally:
        # On Ctrl-C nothing new starts; the transfers already running end on their own.
        pool.shutdown(wait=True, cancel_futures=True)
    return PrefetchResult(tuple(done[request] for request in unique), time.monotonic() - started)


def _raise_if_lost(futures: list[Future[None]], finished: queue.SimpleQueue[Outcome]) -> None:
    # A worker can only end without reporting through a BaseException; surface it, never hang.
    if finished.empty() and all(future.done() for future in futures):
        for future in futures:
            future.result()
        raise RuntimeError("hfsnapshot: a prefetch worker ended without reporting its outcome")


@contextlib.contextmanager
def _no_client_progress_bars() -> Iterator[None]:
    # huggingface_hub's own bars, from several threads at once, would scramble our lines; a user's
    # explicit HF_HUB_DISABLE_PROGRESS_BARS=0 wins (the client would only warn).
    if are_progress_bars_disabled() or hf_constants.HF_HUB_DISABLE_PROGRESS_BARS is False:
        yield
        return
    disable_progress_bars()
    try:
        yield
    finally:
        enable_progress_bars()


def progress_line(position: int, total: int, outcome: Outcome) -> str:
    """``hfsnapshot: [2/5] org/tiny@main ready (download, 3 files, 12.3 KiB, 0.4s)`` and its failing twins."""
    head = f"hfsnapshot: [{position}/{total}] {label(outcome.request)}"
    snap = outcome.snapshot
    if snap is not None:
        return (
            f"{head} ready ({snap.source}, {_count(len(snap.files), 'file')}, {human_size(snap.size)}, "
            f"{outcome.seconds:.1f}s)"
        )
    if isinstance(outcome.error, AuthError):
        return f"{head} refused by the Hub ({outcome.error.reason})"
    return f"{head} FAILED ({type(outcome.error).__name__})"


_WILL = {"skip": "will be skipped", "xfail": "will be xfailed", "fail": "will fail"}


def report_lines(result: PrefetchResult, *, on_auth_error: str = "skip") -> list[str]:
    """What to print once the prefetch is done: the failure table, the refusals, a closing line."""
    lines: list[str] = []
    total = len(result.outcomes)
    width = max((len(label(o.request)) for o in result.outcomes), default=0)
    if result.failed:
        lines.append(f"hfsnapshot: {len(result.failed)} of {_count(total, 'snapshot')} could not be made ready:")
        for outcome in result.failed:
            message = str(outcome.error).strip().splitlines() or [""]
            lines.append(f"  {label(outcome.request).ljust(width)}  {type(outcome.error).__name__}: {message[0]}")
    if result.refused:
        token_set = _token_set()
        lines.append(
            f"hfsnapshot: the Hub refused {_count(len(result.refused), 'snapshot')}; the tests needing "
            f"{'it' if len(result.refused) == 1 else 'them'} {_WILL.get(on_auth_error, 'will be skipped')} "
            f"(--hf-on-auth-error={on_auth_error}):"
        )
        for outcome in result.refused:
            assert isinstance(outcome.error, AuthError)
            request = outcome.request
            hint = auth_message(
                outcome.error.reason,
                repo_id=request.repo_id,
                repo_type=request.repo_type,
                revision=request.revision,
                endpoint=hf_constants.ENDPOINT,
                token_set=token_set,
            )
            lines.append(f"  {label(request).ljust(width)}  {outcome.error.reason}: {hint}")
    ready = f"{_count(len(result.ready), 'snapshot')} ready in {result.seconds:.1f}s"
    if result.ok(on_auth_error):
        refused = f", {len(result.refused)} refused" if result.refused else ""
        lines.append(f"hfsnapshot: {ready}{refused}")
    else:
        lines.append(f"hfsnapshot: prefetch FAILED: {ready}, {len(result.outcomes) - len(result.ready)} not ready")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _token_set() -> bool:
    # get_token can raise (a failed OIDC exchange); for a hint that just means "no token".
    try:
        return get_token() is not None
    except Exception:
        return False


# --- declarations -------------------------------------------------------------------------------


def parse_spec(text: str) -> SnapshotRequest:
    """``org/name[@revision]``, ``datasets/org/name[@revision]``, or a JSON object of the factory's arguments."""
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except ValueError as error:
            raise InvalidRequestError(f"not valid JSON ({error}): {text}") from None
        unknown = sorted(set(spec) - set(_MARKER_KWARGS))
        if unknown:
            raise InvalidRequestError(f"unknown key(s) {', '.join(unknown)}; use {', '.join(_MARKER_KWARGS)}: {text}")
        if "repo_id" not in spec:
            raise InvalidRequestError(f"a repo_id is required: {text}")
        return SnapshotRequest.build(spec.pop("repo_id"), **spec)
    repo_id, at, revision = text.partition("@")
    repo_type = "model"
    prefix, _, rest = repo_id.partition("/")
    if rest.count("/") == 1 and prefix.endswith("s") and prefix[:-1] in REPO_TYPES:
        repo_type, repo_id = prefix[:-1], rest
    return SnapshotRequest.build(repo_id, revision=revision if at else "main", repo_type=repo_type)


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


# --- the pytest run -----------------------------------------------------------------------------

_RESULT_KEY = pytest.StashKey[PrefetchResult]()
_DIST_OFF_KEY = pytest.StashKey[bool]()


def keep_in_process(config: pytest.Config) -> None:
    """For ``--hf-prefetch-only``, switch xdist's distribution off (call from ``pytest_cmdline_main``)."""
    option = config.option
    if getattr(option, "dist", "no") == "no" and not getattr(option, "tx", None):
        return
    option.dist = "no"
    option.tx = []
    option.numprocesses = 0
    config.stash[_DIST_OFF_KEY] = True


def run_in_session(session: pytest.Session) -> bool | None:
    """``pytest_runtestloop`` of a ``--hf-prefetch-only`` run: prefetch instead of running tests.

    Returns None, leaving the loop to pytest, when it has something else to say: errors during
    collection, or ``--collect-only``.
    """
    config = session.config
    if config.option.collectonly or (session.testsfailed and not config.option.continue_on_collection_errors):
        return None
    options = get_options(config)
    requests = list(dict.fromkeys([*requests_for_items(session.items), *declared(config)]))
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
    result = prefetch(requests, lambda request: fetch_snapshot(config, request), display)
    for text in report_lines(result, on_auth_error=options.on_auth_error):
        display.line(text)
    config.stash[_RESULT_KEY] = result
    return True


def finish_session(session: pytest.Session) -> None:
    """Set the exit status of a prefetch run (call from the controller's ``pytest_sessionfinish``)."""
    result = session.config.stash.get(_RESULT_KEY, None)
    if result is None or session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return
    if not result.ok(get_options(session.config).on_auth_error):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif result.outcomes:
        session.exitstatus = pytest.ExitCode.OK


__all__ = [
    "DEFAULT_WORKERS",
    "Display",
    "Outcome",
    "PrefetchResult",
    "declared",
    "finish_session",
    "keep_in_process",
    "parse_spec",
    "prefetch",
    "progress_line",
    "report_lines",
    "run_in_session",
    "stream_display",
    "terminal_display",
]
