"""Lock files whose holder is gone (a dead local process, a lease left unrenewed), judged offline."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..cache.formats import human_age
from ..cache.layout import OWN_DIR, list_names, repo_of_folder

_INITIAL_PID_NAMESPACE = 0xEFFFFFFC


@dataclasses.dataclass(frozen=True)
class StaleLock:
    """A lock file whose holder is gone: ``kind`` (``stale-lock`` or ``stale-lease``), the repo folder
    name it is about (empty for the shared store or a name of no repo) and why."""

    path: Path
    kind: str
    folder: str
    reason: str


def stale_locks(root: Path, now: float, wanted: set[str] | None) -> list[StaleLock]:
    """The plugin's leases (``stale-lease``) and locks of the cache ``root``, then huggingface_hub's
    per-blob lock markers (``stale-lock``); ``wanted``: the repo folder names to judge (None: all).

    A host whose lease on a repo ran out holds the repo's blob locks on record only: those are stale too
    (what a new holder of the lease would clear).
    """
    found: list[StaleLock] = []
    gone_hosts: dict[str, str] = {}
    own = root / OWN_DIR / "locks"
    for name in list_names(own):
        folder_name, _, suffix = name.rpartition(".")
        if wanted is not None and folder_name not in wanted:
            continue
        if suffix == "softlock":
            judged = _judge(own / name, now)
            if judged is not None:
                found.append(StaleLock(own / name, "stale-lease", folder_name, judged[0]))
                gone_hosts[folder_name] = str(judged[1].get("host"))
        elif suffix == "lock":
            found += stale_marker(own / name, "stale-lock", now, folder_name)
    locks = root / ".locks"
    for folder_name in list_names(locks):
        if repo_of_folder(folder_name) is None or (wanted is not None and folder_name not in wanted):
            continue
        for path in _client_lock_files(locks / folder_name):
            found += stale_marker(path, "stale-lock", now, folder_name, gone_hosts.get(folder_name))
    return found


def stale_marker(path: Path, kind: str, now: float, folder: str = "", gone_host: str | None = None) -> list[StaleLock]:
    """The lock file ``path`` as a :class:`StaleLock` when it holds a marker whose holder is gone, else
    nothing. ``gone_host``: a host whose lease on the repo ran out (its markers are stale too)."""
    judged = _judge(path, now, gone_host)
    return [] if judged is None else [StaleLock(path, kind, folder, judged[0])]


def holder_gone(marker: dict[str, Any], now: float) -> str | None:
    """Why the holder a lock marker names is gone, or None while it may live.

    Gone: its pid is not running on this host, or it holds a lease on another host left unrenewed
    past its length. A marker of another host without a lease is never judged (nothing tells).
    """
    pid, host = marker.get("pid"), str(marker.get("host"))
    if host in this_host_names():
        if isinstance(pid, int) and not _alive(pid):
            return f"held on record by pid {pid} on this host ({host}), which is not running"
        return None
    lease, renewed = marker.get("lease"), marker.get("renewed")
    if isinstance(lease, float) and isinstance(renewed, float) and now - renewed > lease:
        unrenewed = human_age(now - renewed)
        return f"the lease of pid {pid} on host {host} went unrenewed for {unrenewed} (its length: {lease:g}s)"
    return None


@functools.lru_cache(maxsize=1)
def this_host_names() -> frozenset[str]:
    """The names a lock marker written on this host carries: the hostname, and filelock's form of it
    inside a PID namespace (a container)."""
    name = socket.gethostname()
    names = {name}
    with contextlib.suppress(OSError):
        namespace = os.stat("/proc/self/ns/pid").st_ino
        if namespace != _INITIAL_PID_NAMESPACE:
            names.add(f"{name}?pidns-{namespace:x}")
    return frozenset(names)


def lock_held(path: Path, now: float) -> bool:
    """Whether a live process holds huggingface_hub's lock file ``path`` (a flock, or a marker), probed
    without creating or changing anything."""
    from ..cache.locking import read_marker

    marker = read_marker(path)
    if marker is not None:
        return holder_gone(marker, now) is None
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _judge(path: Path, now: float, gone_host: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """Why the holder the marker in ``path`` names is gone, and the marker; None when it names none or
    its holder may live."""
    with contextlib.suppress(OSError):
        if os.lstat(path).st_size == 0:
            return None  # an empty lock file names no holder: no need to load the locks (filelock)
    from ..cache.locking import read_marker

    marker = read_marker(path)
    if marker is None:
        return None
    why = holder_gone(marker, now)
    if why is None and gone_host is not None and str(marker.get("host")) == gone_host:
        why = f"held on record by pid {marker.get('pid')} on host {gone_host}, whose lease on the repo ran out"
    return None if why is None else (why, marker)


def _client_lock_files(folder: Path) -> Iterator[Path]:
    """huggingface_hub's lock files in ``folder`` that are not empty, in the filesystem's order."""
    try:
        with os.scandir(folder) as entries:
            listed = list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in listed:
        # Where flock works the client's lock files are empty: only a marker names a holder.
        if not entry.name.endswith(".lock"):
            continue
        try:
            size = entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        if size:
            yield Path(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True


__all__ = ["StaleLock", "holder_gone", "lock_held", "stale_locks", "stale_marker", "this_host_names"]
