"""Prefetch: a list of snapshots made ready, several repos at once, with progress; no pytest.

With a plan, the whole set is checked against free space first: when it does not fit, nothing
is transferred (a subset would fail the tests that need the rest just the same)."""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TextIO

from huggingface_hub import constants as hf_constants
from huggingface_hub.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

from ...errors import AuthError, DiskError
from ...request import SnapshotRequest
from ...settings import DEFAULT_AUTH_ACTION, AuthAction, say
from ...snapshot import Snapshot
from ..cache.formats import FailureRow, count, failure_groups, human_size, request_label
from ..hub.credentials import token_set
from ..hub.refusals import auth_message, skips
from ..own_work import own_thread
from . import space
from .specs import parse_spec

#: Repos worked on at once.
DEFAULT_WORKERS = 4
#: Seconds between redraws of the live status line.
_TICK = 0.2


# --- results ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RequestResult:
    """How one request ended: its snapshot, or the error that stopped it."""

    request: SnapshotRequest
    snapshot: Snapshot | None
    error: Exception | None
    seconds: float


@dataclasses.dataclass(frozen=True)
class PrefetchResult:
    """Every request's result, in request order, and the prefetch's wall time."""

    results: tuple[RequestResult, ...]
    seconds: float

    @property
    def ready(self) -> list[RequestResult]:
        return [r for r in self.results if r.snapshot is not None]

    @property
    def refused(self) -> list[RequestResult]:
        """Requests the Hub refused whose tests skip by design (gated, unauthorized, declared private)."""
        return [r for r in self.results if _skipped_refusal(r)]

    @property
    def failed(self) -> list[RequestResult]:
        """Requests that failed for any other reason: a repo the Hub does not show that is not
        declared ``private=True`` (a typo must never turn a run green) and a rejected token included."""
        return [r for r in self.results if r.error is not None and not _skipped_refusal(r)]

    def ok(self, on_auth_error: AuthAction = DEFAULT_AUTH_ACTION) -> bool:
        """True when nothing failed, refusals counting only when their tests will fail."""
        return not self.failed and not (on_auth_error == "fail" and self.refused)


def _skipped_refusal(result: RequestResult) -> bool:
    error = result.error
    return isinstance(error, AuthError) and skips(error.reason, private=result.request.private)


# --- progress display ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Display:
    """Where progress goes: ``line`` for lines that stay; ``status``, if set, redraws one line in place."""

    line: Callable[[str], None]
    status: Callable[[str], None] | None = None

    @property
    def live(self) -> bool:
        return self.status is not None


def stream_display(stream: TextIO) -> Display:
    """A display on a text stream (the command line's stdout), live when it is a terminal."""
    if not stream.isatty():
        return Display(lambda text: print(text, file=stream, flush=True))
    width = shutil.get_terminal_size().columns

    def line(text: str) -> None:
        print("\r" + text.ljust(width - 1), file=stream, flush=True)

    def status(text: str) -> None:
        print("\r" + fit(text).ljust(width - 1), end="", file=stream, flush=True)

    return Display(line, status)


def fit(text: str) -> str:
    """``text`` cut to one terminal row: a status line that wraps cannot be redrawn with "\\r"."""
    width = shutil.get_terminal_size().columns - 1
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


# --- the prefetch -------------------------------------------------------------------------------


def prefetch(
    requests: Iterable[SnapshotRequest],
    fetch: Callable[[SnapshotRequest], Snapshot],
    display: Display,
    *,
    workers: int = DEFAULT_WORKERS,
    plan: Callable[[SnapshotRequest], space.Need] | None = None,
) -> PrefetchResult:
    """Run ``fetch`` for every distinct request, up to ``workers`` repos at once, reporting on ``display``.

    ``fetch`` must be safe to call from several threads for different repos (``materialize`` and
    the plugin's ``fetch_snapshot`` are). An exception it raises becomes that request's result.
    With ``plan``, the set is first checked against the cache's free space (see the module
    docstring); None skips the check.
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
        f"hfsnapshot: prefetching {count(total, 'snapshot')} of {count(len(groups), 'repo')}, {parallel} at a time"
    )
    finished: queue.SimpleQueue[RequestResult] = queue.SimpleQueue()
    active: dict[SnapshotRequest, None] = {}
    active_lock = threading.Lock()
    refused = _space_refusals(unique, plan, parallel, display) if plan is not None else {}

    def work(group: list[SnapshotRequest]) -> None:
        for request in group:
            if request in refused:
                finished.put(RequestResult(request, None, refused[request], 0.0))
                continue
            with active_lock:
                active[request] = None
            began = time.monotonic()
            try:
                result = RequestResult(request, fetch(request), None, time.monotonic() - began)
            except Exception as error:
                result = RequestResult(request, None, error, time.monotonic() - began)
            finally:
                with active_lock:
                    active.pop(request, None)
            finished.put(result)

    done: dict[SnapshotRequest, RequestResult] = {}
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="hfsnapshot-prefetch", initializer=own_thread)
    try:
        with _no_client_progress_bars():
            futures = [pool.submit(work, group) for group in groups.values()]
            while len(done) < total:
                try:
                    result = finished.get(timeout=_TICK)
                except queue.Empty:
                    _raise_if_lost(futures, finished)
                else:
                    done[result.request] = result
                    display.line(progress_line(len(done), total, result))
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


def _space_refusals(
    requests: list[SnapshotRequest],
    plan: Callable[[SnapshotRequest], space.Need],
    parallel: int,
    display: Display,
) -> dict[SnapshotRequest, DiskError]:
    """The requests refused because the whole set does not fit, each with the one error saying so."""

    def safely(request: SnapshotRequest) -> space.Need | None:
        try:
            return plan(request)
        except Exception:
            return None  # its fetch meets the same failure and says what it is

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="hfsnapshot-plan", initializer=own_thread) as pool:
        planned = dict(zip(requests, pool.map(safely, requests), strict=True))
    fetching = {request: need for request, need in planned.items() if need is not None and need.blobs}
    needs = list(fetching.values())
    short = space.shortfall(needs)
    if short is None:
        return {}
    error = space.not_enough_space(needs, short)
    display.line(
        f"hfsnapshot: {count(len(needs), 'snapshot')} to fetch need {human_size(short.needed)} in "
        f"{short.cache_dir}, which has {human_size(short.free)} free: nothing is transferred"
    )
    return dict.fromkeys(fetching, error)


def _raise_if_lost(futures: list[Future[None]], finished: queue.SimpleQueue[RequestResult]) -> None:
    # A worker can only end without reporting through a BaseException; surface it, never hang.
    if finished.empty() and all(future.done() for future in futures):
        for future in futures:
            future.result()
        raise RuntimeError("hfsnapshot: a prefetch worker ended without reporting its result")


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


def progress_line(position: int, total: int, result: RequestResult) -> str:
    """``hfsnapshot: [2/5] org/tiny@main ready (download, 3 files, 12.3 KiB, 0.4s)`` and its failing twins."""
    head = f"hfsnapshot: [{position}/{total}] {request_label(result.request)}"
    snap = result.snapshot
    if snap is not None:
        return (
            f"{head} ready ({snap.source}, {count(len(snap.files), 'file')}, {human_size(snap.size)}, "
            f"{result.seconds:.1f}s)"
        )
    if isinstance(result.error, AuthError):
        return f"{head} refused by the Hub ({result.error.reason})"
    return f"{head} FAILED ({type(result.error).__name__})"


def failure_row(result: RequestResult) -> FailureRow:
    """A failed request as a row of the report (:func:`~pytest_hfsnapshot.core.cache.formats.failure_groups`)."""
    error = result.error
    cause = getattr(error, "cause", None)
    return (request_label(result.request), type(error).__name__, str(error), cause if isinstance(cause, str) else None)


_WILL: dict[AuthAction, str] = {"skip": "will be skipped", "xfail": "will be xfailed", "fail": "will fail"}


def report_lines(result: PrefetchResult, *, on_auth_error: AuthAction = DEFAULT_AUTH_ACTION) -> list[str]:
    """What to print once the prefetch is done: the failure table, the refusals, a closing line."""
    lines: list[str] = []
    total = len(result.results)
    width = max((len(request_label(r.request)) for r in result.results), default=0)
    if result.failed:
        lines.append(f"hfsnapshot: {len(result.failed)} of {count(total, 'snapshot')} could not be made ready:")
        # One line per cause: a full disk reads once, however many snapshots it stopped.
        for labels, text in failure_groups(failure_row(failed) for failed in result.failed):
            lines.append(f"  {labels.ljust(width)}  {text}")
    if result.refused:
        has_token = token_set()
        lines.append(
            f"hfsnapshot: the Hub refused {count(len(result.refused), 'snapshot')}; the tests needing "
            f"{'it' if len(result.refused) == 1 else 'them'} {_WILL[on_auth_error]} "
            f"({say('on_auth_error', value=on_auth_error)}):"
        )
        for refused in result.refused:
            assert isinstance(refused.error, AuthError)
            request = refused.request
            hint = auth_message(
                refused.error.reason,
                repo_id=request.repo_id,
                repo_type=request.repo_type,
                revision=request.revision,
                endpoint=hf_constants.ENDPOINT,
                token_set=has_token,
                private=request.private,
            )
            lines.append(f"  {request_label(request).ljust(width)}  {refused.error.reason}: {hint}")
    ready = f"{count(len(result.ready), 'snapshot')} ready in {result.seconds:.1f}s"
    if result.ok(on_auth_error):
        refused_note = f", {len(result.refused)} refused" if result.refused else ""
        lines.append(f"hfsnapshot: {ready}{refused_note}")
    else:
        lines.append(f"hfsnapshot: prefetch FAILED: {ready}, {len(result.results) - len(result.ready)} not ready")
    return lines


__all__ = [
    "DEFAULT_WORKERS",
    "Display",
    "PrefetchResult",
    "RequestResult",
    "failure_row",
    "fit",
    "parse_spec",
    "prefetch",
    "progress_line",
    "report_lines",
    "stream_display",
]
