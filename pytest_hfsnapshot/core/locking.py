"""One cross-process lock per (repo_type, repo_id), in our own ``locks`` folder of the cache (see ``layout``).

Every process that shares the cache (xdist workers, parallel CI jobs, other users of the
host) takes the same lock, so one snapshot is materialized by one process at a time while
unrelated repos never wait for each other.

Two mechanisms, chosen per lock folder:

- **kernel** (``flock``, the default where it works): a killed holder frees the lock at once;
  the lock file is never deleted (deleting it lets a second process lock a new inode while
  the first still holds the old one).
- **soft** (filesystems without ``flock``, e.g. some NFS mounts): filelock's
  :class:`~filelock.SoftFileLock`, whose marker records pid and host. A dead holder on this
  host is taken over at once; a holder on another host is never broken: we wait up to the
  timeout and then name it.

We never proceed unlocked. ``HFSNAPSHOT_LOCK_MODE=kernel|soft`` forces a mechanism.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from filelock import BaseFileLock, FileLock, SoftFileLock, Timeout

from ..errors import InvalidRequestError, LockTimeoutError
from .layout import RepoCache, flock_probe
from .state import read_holder, write_holder

log = logging.getLogger("pytest_hfsnapshot")

MODE_ENV = "HFSNAPSHOT_LOCK_MODE"
_NO_FLOCK_ERRNOS = {errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL}
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
    """``kernel`` or ``soft`` for locks in ``folder``, honouring ``HFSNAPSHOT_LOCK_MODE``."""
    forced = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if forced not in ("auto", "kernel", "soft"):
        raise InvalidRequestError(f"{MODE_ENV}={forced!r} is not valid: use auto, kernel or soft.")
    if forced != "auto":
        return forced
    return "kernel" if flock_works(folder) else "soft"


def describe_holder(holder: dict[str, Any]) -> str:
    """``pid 123 on host ci-7 since 2026-11-30T03:20:01Z`` (whatever parts are known)."""
    parts = [f"pid {holder.get('pid', '?')}", f"on host {holder.get('host', '?')}"]
    if holder.get("since_iso"):
        parts.append(f"since {holder['since_iso']}")
    return " ".join(parts)


class RepoLock(Generic[T]):
    """The per-repo lock. Use as a context manager; ``wait`` is how long acquiring took.

    ``done``, when given, is asked every ``poll_every`` seconds while another process holds the
    lock: when it returns something (the snapshot that process just finished), waiting stops
    without taking the lock and the value is left in ``early``. Without it, seven xdist workers
    queue for the lock one by one only to read what the first one wrote.

    Making one creates the lock folder and settles ``mode`` (``kernel`` or ``soft``, see
    :func:`lock_mode`).
    """

    def __init__(
        self,
        repo: RepoCache,
        *,
        timeout: float,
        log_every: float = 10.0,
        done: Callable[[], T | None] | None = None,
        poll_every: float = 0.05,
    ) -> None:
        self.repo = repo
        self.timeout = timeout
        self.log_every = log_every
        self.done = done
        self.poll_every = poll_every
        self.wait = 0.0
        self.early: T | None = None
        self._lock: BaseFileLock | None = None
        folder = repo.lock_path.parent
        repo.make_folders(folder)
        self.mode = lock_mode(folder)

    def _make_lock(self) -> BaseFileLock:
        if self.mode == "soft":
            return SoftFileLock(str(self.repo.soft_lock_path), is_singleton=False)
        return FileLock(str(self.repo.lock_path), is_singleton=False)

    def holder(self) -> dict[str, Any]:
        """Who holds (or last held) the lock, from our holder record or the soft marker."""
        holder: dict[str, Any] = read_holder(self.repo)
        if self.mode == "soft":
            with contextlib.suppress(OSError, UnicodeDecodeError):
                marker = self.repo.soft_lock_path.read_text(encoding="utf-8")
                parsed = _parse_marker(marker)
                if parsed and parsed.get("pid") != holder.get("pid"):
                    holder = parsed
        return holder

    def __enter__(self) -> RepoLock[T]:
        lock = self._make_lock()
        start = time.monotonic()
        deadline = start + self.timeout
        next_log = start + self.log_every
        step = self.poll_every if self.done is not None else self.log_every
        while True:
            now = time.monotonic()
            try:
                lock.acquire(timeout=max(0.0, min(step, deadline - now, next_log - now)))
                break
            except Timeout:
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
        self._lock = lock
        self.wait = time.monotonic() - start
        write_holder(self.repo, self.mode)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _timeout_error(self, holder: dict[str, Any], waited: float) -> LockTimeoutError:
        if self.mode == "soft":
            how = (
                f"This is a soft lock (no flock on this filesystem, or {MODE_ENV}=soft). If that process is "
                f"gone, remove {self.repo.soft_lock_path} by hand; a holder on another host is never "
                "broken automatically."
            )
        else:
            how = (
                "The kernel frees this lock when its holder exits, so that process is still running: "
                "let it finish or stop it."
            )
        return LockTimeoutError(
            f"Timed out after {waited:.0f}s waiting for the hfsnapshot lock on {self.repo.repo_type} "
            f"{self.repo.repo_id!r}, held by {describe_holder(holder)} ({self.repo.lock_path.parent}). "
            f"{how} Raise --hf-lock-timeout to wait longer.",
            holder=holder,
            repo_id=self.repo.repo_id,
        )


def _parse_marker(text: str) -> dict[str, Any] | None:
    """Read pid and host from a soft lock marker (filelock's ``filelock/2`` or legacy format)."""
    lines = text.strip().splitlines()
    if not lines:
        return None
    if lines[0].startswith("filelock/"):
        fields = dict(line.partition("=")[::2] for line in lines[1:])
        pid, host = fields.get("pid"), fields.get("host")
    elif len(lines) in (2, 3):
        pid, host = lines[0], lines[1]
    else:
        return None
    if not (pid and pid.isdigit()):
        return None
    return {"pid": int(pid), "host": host}
