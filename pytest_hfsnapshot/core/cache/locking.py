"""One cross-process lock per repo, so one process at a time materializes a snapshot into a cache.

The kernel's ``flock`` where it works (a killed holder frees it); elsewhere filelock's lease, taken
over once its holder stops renewing it, so a holder checks it before each write step."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from filelock import BaseFileLock, FileLock, LeaseSettingsMismatch, SoftFileLease, Timeout

from ...errors import InvalidRequestError, LockLostError, LockTimeoutError
from ...settings import LOCK_LEASE_ENV, lock_lease_from_env, say
from .layout import RepoCache, flock_probe, is_within, store_file
from .state import read_holder, write_holder
from .watch import FolderWatch, wake

log = logging.getLogger("pytest_hfsnapshot")

MODE_ENV = "HFSNAPSHOT_LOCK_MODE"
#: The mechanisms, and the other names they are asked for by.
MODES = ("kernel", "lease")
_ALIASES = {"soft": "lease"}
_NO_FLOCK_ERRNOS = {errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL}
#: filelock's markers are at most this long; anything longer is not one.
_MARKER_MAX = 1024
_flock_support: dict[str, bool] = {}
T = TypeVar("T")


def flock_works(folder: Path) -> bool:
    """Whether ``flock`` works in ``folder`` (probed once per folder per process)."""
    key = str(folder)
    if key not in _flock_support:
        try:
            import fcntl
        except ImportError:  # Windows: filelock uses msvcrt locking, which the kernel also frees
            _flock_support[key] = True
            return True
        probe = flock_probe(folder)
        fd = os.open(probe, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o664)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            _flock_support[key] = True
        except OSError as error:
            # EWOULDBLOCK means flock works and someone else probes right now.
            _flock_support[key] = error.errno not in _NO_FLOCK_ERRNOS
        finally:
            os.close(fd)
    return _flock_support[key]


def lock_mode(folder: Path) -> str:
    """``kernel`` or ``lease`` for locks in ``folder``, honouring ``HFSNAPSHOT_LOCK_MODE``.

    - **kernel** (``flock``, where it works): deleting its file would let a second process lock a
      new inode while the first still holds the old one.
    - **lease** (``soft`` is another name): filelock's :class:`~filelock.SoftFileLease`. Its marker
      names the holder's pid and host and the lease length; the holder renews it from a thread
      every third of the lease. A dead holder on this host is taken over at once; a claim not
      renewed for the lease length is taken over from any host, even while its holder still runs,
      which then stops with :class:`~pytest_hfsnapshot.errors.LockLostError`. Every host sharing
      the cache must use the same lease length.
    """
    forced = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    forced = _ALIASES.get(forced, forced)
    if forced not in ("auto", *MODES):
        raise InvalidRequestError(
            f"{MODE_ENV}={forced!r} is not valid: use auto (kernel where flock works, else lease), kernel or lease."
        )
    if forced != "auto":
        return forced
    return "kernel" if flock_works(folder) else "lease"


def describe_holder(holder: dict[str, Any]) -> str:
    """``pid 123 on host ci-7 since 2026-11-30T03:20:01Z`` (whatever parts are known)."""
    parts = [f"pid {holder.get('pid', '?')}", f"on host {holder.get('host', '?')}"]
    if holder.get("since_iso"):
        parts.append(f"since {holder['since_iso']}")
    return " ".join(parts)


class HeldCheck(Protocol):
    """The check before each write step under the repo lock (:meth:`RepoLock.ensure_held`)."""

    def __call__(self, then: Callable[[], None] | None = None) -> None: ...


#: How often a waiter asks ``done`` while the kernel lock is held, where no folder watch wakes it
#: (see ``watch``): the longest delay between a holder's record and its waiters' return.
KERNEL_POLL = 0.02
#: How often a waiter tries the kernel lock itself: how soon it learns that a holder died. A holder
#: that lets go wakes the waiters watching the folder (see ``watch``) at once; a killed one cannot,
#: and neither can any holder where inotify is missing. A waiter with nothing to do sleeps; once a
#: second bounds a takeover from a killed holder without waking it more often.
KERNEL_TRY = 1.0
#: For a lease, both at once: each round reads the marker, over the network on a shared cache.
LEASE_POLL = 0.05


class RepoLock(Generic[T]):
    """The per-repo lock. Use as a context manager; ``wait`` is how long acquiring took.

    ``done``, when given, is asked every ``poll_every`` seconds (default: :data:`KERNEL_POLL` for
    the kernel lock, :data:`LEASE_POLL` for a lease) while another process holds the
    lock: when it returns something (the snapshot that process just finished), waiting stops
    without taking the lock and the value is left in ``early``. Without it, seven xdist workers
    queue for the lock one by one only to read what the first one wrote. The lock itself is tried
    every ``try_every`` seconds (default: :data:`KERNEL_TRY` for the kernel lock; a lease is tried
    at every round), so ``done`` must be cheap while its answer is None.

    ``watch``: the folder where what ``done`` looks for is written. Waiting for the kernel lock, a
    waiter then sleeps until a file is written there or its next try is due, instead of waking
    every ``poll_every`` (see :class:`~pytest_hfsnapshot.core.cache.watch.FolderWatch`; where inotify
    is missing it polls). A holder of the kernel lock wakes that folder's waiters when it lets
    go, so they try the lock at once. The folder is created if missing. A lease is polled as
    before: another host's writes wake nothing.

    ``lease``: the lease length in seconds when the lock is a lease (default:
    ``HFSNAPSHOT_LOCK_LEASE``, else 60). ``took_over_from`` is, once acquired, the host whose
    expired lease this process took over (None when the lock was free or its holder died here).

    Making one creates the lock folder and settles ``mode`` (``kernel`` or ``lease``, see
    :func:`lock_mode`).
    """

    def __init__(
        self,
        repo: RepoCache,
        *,
        timeout: float,
        lease: float | None = None,
        log_every: float = 10.0,
        done: Callable[[], T | None] | None = None,
        poll_every: float | None = None,
        try_every: float | None = None,
        watch: Path | None = None,
    ) -> None:
        self.repo = repo
        self.timeout = timeout
        self.lease = lock_lease_from_env() if lease is None else lease
        self.log_every = log_every
        self.done = done
        self.watch = watch
        self.wait = 0.0
        self.early: T | None = None
        self.took_over_from: str | None = None
        self._lock: BaseFileLock | None = None
        #: One lease check at a time, with the step it lets start (see ensure_held).
        self._checking = threading.Lock()
        #: Once learned: the loss's message and who took the lease.
        self._lost: tuple[str, dict[str, object]] | None = None
        folder = repo.lock_path.parent
        repo.make_folders(folder)
        self.mode = lock_mode(folder)
        kernel = self.mode == "kernel"
        self.poll_every = poll_every if poll_every is not None else KERNEL_POLL if kernel else LEASE_POLL
        self.try_every = try_every if try_every is not None else KERNEL_TRY if kernel else self.poll_every

    def _make_lock(self) -> BaseFileLock:
        if self.mode == "lease":
            # Not thread-local: the checks before each transfer run on the transfer threads.
            return SoftFileLease(
                str(self.repo.soft_lock_path),
                lease_duration=self.lease,
                on_compromise=self._compromised,
                is_singleton=False,
                thread_local=False,
            )
        return FileLock(str(self.repo.lock_path), is_singleton=False)

    def holder(self) -> dict[str, Any]:
        """Who holds (or last held) the lock, from our holder record and the lease marker.

        For a lease, ``lease`` (its length) and ``renewed`` (when its marker was last renewed,
        epoch seconds) are added when the marker says.
        """
        holder: dict[str, Any] = read_holder(self.repo)
        if self.mode == "lease":
            marker = _read_marker(self.repo.soft_lock_path)
            if marker is not None:
                if marker.get("pid") != holder.get("pid"):
                    holder = {k: v for k, v in marker.items() if k in ("pid", "host")}
                holder.update({k: v for k, v in marker.items() if k in ("lease", "renewed")})
        return holder

    def __enter__(self) -> RepoLock[T]:
        lock = self._make_lock()
        start = time.monotonic()
        deadline = start + self.timeout
        next_log = start + self.log_every
        lease = isinstance(lock, SoftFileLease)
        # A lease is watched at every poll: its expiry, and whose it was, decide what a takeover cleans up.
        # Polling, each round is a look at ``done`` then a sleep, and a try of the lock first when
        # ``try_every`` has passed since the last one.
        polling = self.done is not None or lease
        lease_watch = _LeaseWatch()
        next_try = start
        with self._folder_watch(polling and not lease) as written:
            while True:
                now = time.monotonic()
                if lease:
                    lease_watch.look(self.repo.soft_lock_path)
                    self._break_unwritten_marker()
                try:
                    if not polling:
                        lock.acquire(timeout=max(0.0, min(deadline, next_log) - now), poll_interval=self.poll_every)
                        break
                    if now >= min(next_try, deadline):
                        next_try = now + self.try_every
                        lock.acquire(blocking=False)
                        break
                except Timeout:
                    pass
                except LeaseSettingsMismatch as mismatch:
                    raise self._mismatch_error(str(mismatch)) from None
                now = time.monotonic()
                if self.done is not None:
                    self.early = self.done()
                    if self.early is not None:
                        self.wait = now - start
                        return self
                if now >= deadline:
                    raise self._timeout_error(self.holder(), now - start) from None
                if now >= next_log:
                    next_log = now + self.log_every
                    log.warning(
                        "hfsnapshot: waiting %.0fs for the lock on %s held by %s",
                        now - start,
                        self.repo.repo_id,
                        describe_holder(self.holder()),
                    )
                if written is not None and written.active:
                    if written.wait(min(next_try, next_log, deadline) - now):
                        next_try = now  # a record, or a holder letting go: try the lock too
                elif polling:
                    time.sleep(max(0.0, min(self.poll_every, deadline - now)))
        self._lock = lock
        self._lost = None
        self.wait = time.monotonic() - start
        write_holder(self.repo, self.mode)
        if lease:
            self._after_takeover(lease_watch)
        return self

    def _folder_watch(self, wanted: bool) -> contextlib.AbstractContextManager[FolderWatch | None]:
        if not wanted or self.watch is None:
            return contextlib.nullcontext()
        self.repo.make_folders(self.watch)
        return FolderWatch(self.watch)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            if self.watch is not None and self.mode == "kernel":
                wake(self.watch)

    # --- the lease ------------------------------------------------------------------------------
    def ensure_held(self, then: Callable[[], None] | None = None) -> None:
        """Raise :class:`LockLostError` when this process's lease has been taken over; call it before
        each write step. The kernel lock cannot be lost while its holder runs: nothing to check.

        ``then``, where given, is called once the check passed, before any other thread checks: so a
        step it starts (and says it starts) comes before any loss another thread learns of, even in
        a process paused between the two. Once learned, a loss stays: every later check raises.
        """
        lock = self._lock
        if not isinstance(lock, SoftFileLease):
            if then is not None:
                then()
            return
        with self._checking:
            if self._lost is None and not self._lease_is_mine(lock):
                self._lost = self._loss()
            if self._lost is not None:
                raise LockLostError(
                    self._lost[0],
                    lock_file=str(self.repo.soft_lock_path),
                    taken_by=dict(self._lost[1]),
                    lease=self.lease,
                    repo_id=self.repo.repo_id,
                )
            if then is not None:
                then()

    def _loss(self) -> tuple[str, dict[str, object]]:
        """The message of a loss just learned, and who took the lease (logged once)."""
        marker = _read_marker(self.repo.soft_lock_path)
        # Once the new holder has released the lease its marker is gone; its holder record stays.
        record = marker or read_holder(self.repo)
        taken_by: dict[str, object] = {k: record[k] for k in ("pid", "host") if k in record}
        if taken_by and (taken_by.get("pid"), taken_by.get("host")) != (os.getpid(), socket.gethostname()):
            who = f"host {taken_by.get('host', '?')} (pid {taken_by.get('pid', '?')}) took it over"
            who += "" if marker else " (and has released it since)"
        else:
            taken_by = {}
            who = "its marker is gone (removed by hand, or by another host)"
        log.warning("hfsnapshot: lost the lock on %s: %s; writing nothing more", self.repo.repo_id, who)
        message = (
            f"Lost the hfsnapshot lock on {self.repo.repo_type} {self.repo.repo_id!r} "
            f"({self.repo.soft_lock_path}): {who} after this process had not renewed its "
            f"{self.lease:g}s lease in time (it was paused, suspended or cut off from the cache's storage). "
            "This process stopped before writing anything more. Run again to use the snapshot the new "
            f"holder makes; if pauses this long are expected, raise {say('lock_lease', with_env=True)} "
            "to the same value on every host."
        )
        return message, taken_by

    def _lease_is_mine(self, lock: SoftFileLease) -> bool:
        if lock.compromise is not None:
            return False
        for attempt in range(2):
            owner = lock.owner
            if owner is not None and lock.token is not None and owner.token == lock.token:
                return True
            # A contender whose takeover fails puts our marker back after swapping it aside for a
            # moment (filelock's exchange): a second look tells that from a real loss.
            if attempt == 0:
                time.sleep(self.poll_every)
        return False

    def _compromised(self, compromise: object) -> None:
        # Called on filelock's heartbeat thread: the writing thread learns of it at its next check.
        log.warning("hfsnapshot: the lease on %s is no longer ours (%s)", self.repo.repo_id, compromise)

    def _break_unwritten_marker(self) -> None:
        """Remove our lease marker when it has stayed empty for a whole lease.

        filelock creates the marker, then writes its holder's record into it: a holder killed in
        between leaves an empty file that names nobody, which filelock never breaks, so every
        waiter would sit out the lock timeout. A live holder writes its record at once; one lease
        of nothing written means nobody will.
        """
        path = self.repo.soft_lock_path
        if _unwritten_for(path) < self.lease:
            return
        with contextlib.suppress(OSError):
            if _unwritten_for(path) >= self.lease:
                os.unlink(path)
                log.warning(
                    "hfsnapshot: removed the lease marker %s of %s, left empty for more than its %gs lease "
                    "(a holder killed while taking it)",
                    path,
                    self.repo.repo_id,
                    self.lease,
                )

    def _after_takeover(self, watch: _LeaseWatch) -> None:
        """After acquiring a lease: if it was another host's expired claim, clean up what that host left."""
        previous = watch.expired(self.lease)
        mine = _read_marker(self.repo.soft_lock_path)
        if previous is None or mine is None or previous.get("host") == mine.get("host"):
            return
        host = str(previous.get("host"))
        self.took_over_from = host
        # Where flock works the client's lock files are flock files, empty by design. That host
        # stopped renewing at least two thirds of a lease ago: half a lease bounds what it left.
        markers = not flock_works(self.repo.lock_path.parent)
        removed = clear_client_markers(self.repo, host, unwritten_after=self.lease / 2 if markers else None)
        log.warning(
            "hfsnapshot: took over the lock on %s from pid %s on host %s, whose %gs lease ran out; "
            "removed %d huggingface_hub lock marker(s) that host left",
            self.repo.repo_id,
            previous.get("pid", "?"),
            host,
            self.lease,
            len(removed),
        )

    # --- errors ---------------------------------------------------------------------------------
    def _mismatch_error(self, detail: str) -> InvalidRequestError:
        marker = _read_marker(self.repo.soft_lock_path) or {}
        theirs = marker.get("lease")
        held = f"is held by {describe_holder(marker)}" if marker else "was held"
        if isinstance(theirs, float):
            differ = f"with a lease of {theirs:g}s, but this process uses {self.lease:g}s"
            example = f"{LOCK_LEASE_ENV}={theirs:g}"
        else:
            differ = f"under another lease length than this process's {self.lease:g}s ({detail})"
            example = f"the same {LOCK_LEASE_ENV}"
        return InvalidRequestError(
            f"The hfsnapshot lock on {self.repo.repo_type} {self.repo.repo_id!r} ({self.repo.soft_lock_path}) "
            f"{held} {differ}. Hosts that share a cache must use the same lease length, or a holder could be "
            f"taken over while it works: set {say('lock_lease', with_env=True)} "
            f"to one value on every host, e.g. {example}.",
            repo_id=self.repo.repo_id,
            setting="lock_lease",
            limit=self.lease,
        )

    def _timeout_error(self, holder: dict[str, Any], waited: float) -> LockTimeoutError:
        lease, renewed = holder.get("lease"), holder.get("renewed")
        if self.mode == "lease" and isinstance(lease, float) and isinstance(renewed, float):
            runs_out = datetime.fromtimestamp(renewed + lease, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            ago = max(0.0, time.time() - renewed)
            how = (
                f"This lock is a lease (flock does not work in that folder, or {MODE_ENV}=lease) that its "
                f"holder renews every {lease / 3:.3g}s. It was last renewed {ago:.0f}s ago; its lease runs "
                f"out at {runs_out} unless renewed again, and a waiter on any host then takes it over. If that "
                f"process is gone, wait longer than the {lease:g}s lease: raise {say('lock_timeout')}."
            )
        elif self.mode == "lease" and _read_marker(self.repo.soft_lock_path) is not None:
            how = (
                f"Its marker {self.repo.soft_lock_path} is a soft lock without a lease (an older "
                "pytest-hfsnapshot), which a holder on another host never loses: if that process is gone, "
                f"remove the marker by hand. Raise {say('lock_timeout')} to wait longer."
            )
        elif self.mode == "lease":
            how = "This lock is a lease, which its holder released just now: run again."
        else:
            how = (
                "The kernel frees this lock when its holder exits, so that process is still running: "
                f"let it finish or stop it. Raise {say('lock_timeout')} to wait longer."
            )
        return LockTimeoutError(
            f"Timed out after {waited:.0f}s waiting for the hfsnapshot lock on {self.repo.repo_type} "
            f"{self.repo.repo_id!r}, held by {describe_holder(holder)} ({self.repo.lock_path.parent}). {how}",
            holder=holder,
            timeout=self.timeout,
            repo_id=self.repo.repo_id,
        )


class _LeaseWatch:
    """What a waiter saw of the lease marker: its holder, and since when it was left unrenewed."""

    def __init__(self) -> None:
        self.marker: dict[str, Any] | None = None
        self._key: tuple[object, ...] = ()
        self._since = 0.0

    def look(self, path: Path) -> None:
        marker = _read_marker(path)
        if marker is None:
            # Gone for a moment: released, or broken by a takeover (filelock before 4 breaks an
            # expired marker in one attempt and claims the path in the next). What it was decides.
            return
        key = (marker.get("token"), marker.get("renewed"), marker.get("inode"))
        if key != self._key:
            self._key, self._since = key, time.monotonic()
        self.marker = marker

    def expired(self, lease: float) -> dict[str, Any] | None:
        """The marker last seen, if it had gone ``lease`` seconds unrenewed (on this host's clock, or
        by its modification time as the filelock releases before 4 judge it), else None."""
        marker = self.marker
        if marker is None or not isinstance(renewed := marker.get("renewed"), float):
            return None
        if time.monotonic() - self._since >= lease or time.time() - renewed >= lease:
            return marker
        return None


def wait_for_client_lock(repo: RepoCache, etag: str, filename: str, timeout: float) -> None:
    """Return once huggingface_hub's per-blob lock of ``etag`` is free; LockTimeoutError after ``timeout``.

    The client waits for that lock without a timeout, logging every ten seconds: behind a process
    that keeps it (paused, hung, or on a host that stopped without releasing it) a download would
    wait for good. So the lock is taken and given back first, here, with the lock timeout; the
    client then takes it at once, or after a live downloader of the same file.
    """
    path = repo.blob_lock(etag)
    repo.make_folders(path.parent)
    started = time.monotonic()
    # The client's own mode, so that every user of a shared cache can take it too.
    lock = FileLock(str(path), mode=0o664, timeout=timeout, is_singleton=False)
    try:
        with lock:
            pass
    except Timeout:
        raise LockTimeoutError(
            f"Timed out after {time.monotonic() - started:.0f}s waiting for huggingface_hub's lock on {filename} "
            f"of {repo.repo_type} {repo.repo_id!r} ({path}): another process is downloading that file and has "
            "not let go of it (a paused or hung process keeps it). Stop that process, or raise "
            f"{say('lock_timeout')} to wait longer.",
            timeout=timeout,
            repo_id=repo.repo_id,
        ) from None


def clear_client_markers(repo: RepoCache, host: str, *, unwritten_after: float | None = None) -> list[Path]:
    """Remove huggingface_hub's lock markers of ``repo`` that ``host`` left; the paths removed.

    Where ``flock`` fails, the client locks each blob with a marker file (``.locks/<repo>/<etag>.lock``)
    and each shared-store entry with ``blobs/<xx>/<xet hash>.lock.soft``, naming the holder's pid
    and host; a marker of another host is never broken, so one left by a dead host blocks every
    download of that file for good. Only markers that name ``host`` go, only of this repo's files
    (the blob locks of its lock folder, the store entries of the Xet hashes the cache knows for
    it), never through a symlink. Call it holding the repo's lease taken over from ``host``: that
    host's holder wrote those markers.

    A marker is created empty and its holder's record written into it next: a holder stopped in
    between leaves an empty marker, which filelock never breaks either. With
    ``unwritten_after`` (only where the client's locks are markers: elsewhere its lock files
    are empty by design), empty ones unchanged for that many seconds go too: no writer takes that
    long between the two steps.
    """
    candidates: list[Path] = []
    if is_within(repo.client_locks, repo.cache_dir):
        with contextlib.suppress(OSError):
            candidates += sorted(Path(e.path) for e in os.scandir(repo.client_locks) if e.name.endswith(".lock"))
    for xet in sorted(repo.store.xet_hashes()):
        store = store_file(repo.cache_dir, xet)
        if is_within(store.parent, repo.cache_dir):
            candidates += [repo.store.lock(store), repo.store.soft_lock(store)]
    removed = []
    for path in candidates:
        marker = _read_marker(path)
        if marker is not None:
            stale = marker.get("host") == host
        else:
            stale = unwritten_after is not None and _unwritten_for(path) >= unwritten_after
        if stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
    return removed


def _unwritten_for(path: Path) -> float:
    """Seconds an empty regular file (not a symlink) has gone unchanged; -1 for anything else."""
    try:
        st = os.lstat(path)
    except OSError:
        return -1.0
    if not stat.S_ISREG(st.st_mode) or st.st_size:
        return -1.0
    return time.time() - st.st_mtime


def _read_marker(path: Path) -> dict[str, Any] | None:
    """The holder a filelock marker names: ``pid`` and ``host``; for a lease also ``token``, ``lease``
    (its length) and ``renewed`` (its modification time); ``inode``. None for anything else
    (missing, a symlink, empty, too long, not a marker)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        data = os.read(fd, _MARKER_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MARKER_MAX:
        return None
    try:
        parsed = _parse_marker(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    if parsed is not None:
        parsed["inode"] = st.st_ino
        if "lease" in parsed:
            parsed["renewed"] = st.st_mtime
    return parsed


def _parse_marker(text: str) -> dict[str, Any] | None:
    """Read a filelock marker: ``filelock/2`` (``key=value`` lines; a lease adds its token and
    duration) or the older ``pid\\nhost\\n[start]\\n``."""
    if not text.endswith("\n"):
        return None  # still being written
    lines = text.strip().splitlines()
    if not lines:
        return None
    out: dict[str, Any] = {}
    if lines[0].startswith("filelock/"):
        fields = dict(line.partition("=")[::2] for line in lines[1:])
        pid, host = fields.get("pid"), fields.get("host")
        if fields.get("mode") == "lease" and fields.get("token"):
            out["token"] = fields["token"]
            with contextlib.suppress(ValueError):
                out["lease"] = float(fields.get("duration", ""))
    elif len(lines) in (2, 3):
        pid, host = lines[0], lines[1]
    else:
        return None
    if not (pid and pid.isdigit() and host):
        return None
    out.update(pid=int(pid), host=host)
    return out


def read_marker(path: Path) -> dict[str, Any] | None:
    """The holder a filelock marker file names, as :func:`_read_marker` reads it (``doctor`` judges it)."""
    return _read_marker(path)
