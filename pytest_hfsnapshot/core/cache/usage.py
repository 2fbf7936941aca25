"""The last use of each snapshot (a file's mtime), so ``doctor --prune-unused`` knows what no test used.

Best effort and throttled per process: the warm path pays nothing, and a snapshot with no recorded
use is never pruned."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time

from ...errors import HfSnapshotError
from .layout import PRIVATE_MODE, RepoCache

#: Seconds during which a process does not record the same snapshot again (prune counts in days).
THROTTLE = 600.0

_recorded: dict[tuple[str, str, str, str], float] = {}
_lock = threading.Lock()


def record_use(
    cache_dir: str | os.PathLike[str], repo_type: str, repo_id: str, commit: str, when: float | None = None
) -> None:
    """Record that a snapshot of ``commit`` of the repo was used now (or at ``when``, epoch seconds).

    A recorded use later than ``when`` is kept. Never raises for a cache it cannot write to.
    """
    now = time.time() if when is None else when
    key = (os.fspath(cache_dir), repo_type, repo_id, commit)
    with _lock:
        if when is None and now - _recorded.get(key, float("-inf")) < THROTTLE:
            return
        _recorded[key] = now
    with contextlib.suppress(OSError, HfSnapshotError):
        _touch(RepoCache(cache_dir, repo_id, repo_type), commit, now)


def last_use(repo: RepoCache, commit: str) -> float | None:
    """When a snapshot of ``commit`` was last used (epoch seconds), or None when no use is recorded."""
    try:
        st = os.lstat(repo.usage_path(commit))
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def forget(repo: RepoCache, commit: str) -> None:
    """Drop the recorded use of ``commit`` (its snapshot was removed)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(repo.usage_path(commit))


def _touch(repo: RepoCache, commit: str, when: float) -> None:
    path = repo.usage_path(commit)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        repo.make_folders(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), PRIVATE_MODE)
        os.close(fd)
    else:
        if not stat.S_ISREG(st.st_mode) or st.st_mtime >= when:
            return  # a planted link is not followed; a later use stays
    os.utime(path, (when, when), follow_symlinks=False)


__all__ = ["THROTTLE", "forget", "last_use", "record_use"]
