"""Our records in the cache: verifications, branch resolutions, refusals, shared failures, lock holders.

Every write is atomic; a missing or foreign file reads as None, as each fact is checked again before use."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...errors import HfSnapshotError
from ...request import SnapshotRequest, is_commit
from .layout import RepoCache, atomic_write_json, failure_memory_file, read_json
from .verify import ExpectedFile

#: The format of verification records; a record of another format is ignored (one verification pass).
RECORD_VERSION = 2
#: Resolutions of test sessions older than this are pruned when a new session starts writing.
SESSION_MAX_AGE = 3 * 24 * 3600
# Branch resolutions made by this process when no test session shares them.
_resolved_here: dict[tuple[str, str, str, str], str] = {}


# --- records ------------------------------------------------------------------------------------


def record_path(repo: RepoCache, request: SnapshotRequest, commit: str) -> Path:
    return repo.record_path(commit, request.selection_key())


def read_record(repo: RepoCache, request: SnapshotRequest, commit: str) -> list[ExpectedFile] | None:
    """The files a record says were verified for ``request`` at ``commit``, or None."""
    data = read_json(record_path(repo, request, commit))
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or data.get("commit") != commit:
        return None
    try:
        return [ExpectedFile.from_json(raw) for raw in data["files"]]
    except (KeyError, TypeError, ValueError):
        return None


def vouched(repo: RepoCache, commit: str) -> dict[str, ExpectedFile]:
    """Every file that a record of ``commit`` (of any selection) says was verified, by path.

    For reading another cache (a read-only layer): one selection's record vouches for the files
    it lists whatever selection asks for them now. An OSError listing the records propagates.
    """
    out: dict[str, ExpectedFile] = {}
    for path in repo.record_paths(commit):
        data = read_json(path)
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or data.get("commit") != commit:
            continue
        try:
            files = [ExpectedFile.from_json(raw) for raw in data["files"]]
        except (KeyError, TypeError, ValueError):
            continue
        for f in files:
            out.setdefault(f.path, f)
    return out


def write_record(repo: RepoCache, request: SnapshotRequest, commit: str, files: Iterable[ExpectedFile]) -> None:
    """Record that ``files`` were verified for ``request`` at ``commit``."""
    atomic_write_json(
        record_path(repo, request, commit),
        {
            "version": RECORD_VERSION,
            "repo_id": request.repo_id,
            "repo_type": request.repo_type,
            "commit": commit,
            "selection": {
                "allow_patterns": request.allow_patterns,
                "ignore_patterns": request.ignore_patterns,
                "metadata_only": request.metadata_only,
            },
            "files": [f.to_json() for f in files],
            "verified_at": time.time(),
        },
        root=repo.cache_dir,
        repo_id=repo.repo_id,
    )


# --- resolutions --------------------------------------------------------------------------------


def _memo_key(repo: RepoCache, request: SnapshotRequest) -> tuple[str, str, str, str]:
    return (str(repo.cache_dir), request.repo_type, request.repo_id, request.revision)


def resolved(repo: RepoCache, request: SnapshotRequest, session: str | None) -> str | None:
    """The commit this session (or, without one, this process) resolved ``request``'s revision to."""
    if session is None:
        return _resolved_here.get(_memo_key(repo, request))
    data = read_json(repo.resolution_path(session, request.revision))
    commit = data.get("commit") if isinstance(data, dict) else None
    return commit if isinstance(commit, str) and is_commit(commit) else None


def remember_resolution(repo: RepoCache, request: SnapshotRequest, session: str | None, commit: str) -> None:
    """Keep what ``request``'s revision resolved to, for the rest of the session (or process)."""
    if session is None:
        _resolved_here[_memo_key(repo, request)] = commit
        return
    path = repo.resolution_path(session, request.revision)
    if not path.parent.exists():
        _prune_sessions(repo.make_folders(path.parent.parent))
    atomic_write_json(
        path,
        {"commit": commit, "revision": request.revision, "at": time.time()},
        root=repo.cache_dir,
        repo_id=repo.repo_id,
    )


def _prune_sessions(resolutions: Path) -> None:
    """Drop branch resolutions of test sessions that ended days ago (tiny files, our own folder)."""
    # The cache path is resolved, so a difference means a symlink on the way: it leads out of our
    # own folder, and what is there is not ours to delete.
    if os.path.realpath(resolutions) != str(resolutions):
        return
    try:
        entries = list(os.scandir(resolutions))
    except OSError:
        return
    cutoff = time.time() - SESSION_MAX_AGE
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                for child in os.scandir(entry.path):
                    if child.is_file(follow_symlinks=False):
                        os.unlink(child.path)
                os.rmdir(entry.path)


# --- refusals -----------------------------------------------------------------------------------


def remember_refusal(repo: RepoCache, *, reason: str, message: str, token_set: bool) -> None:
    """Keep why the Hub refused the repo; whether a token was set, never the token or anything of it.

    Best effort: a cache where this cannot be written must still report the refusal itself.
    """
    with contextlib.suppress(OSError, HfSnapshotError):
        atomic_write_json(
            repo.refusal_path,
            {"reason": reason, "message": message, "token_set": token_set, "at": time.time()},
            root=repo.cache_dir,
            repo_id=repo.repo_id,
        )


def remember_implicit_refusal(repo: RepoCache, *, code: str, token_set: bool) -> None:
    """Keep that the Hub refused an implicit load of the repo (its ``X-Error-Code``) and whether a
    token was set; best effort, as :func:`remember_refusal`."""
    with contextlib.suppress(OSError, HfSnapshotError):
        atomic_write_json(
            repo.implicit_refusal_path,
            {"code": code, "token_set": token_set, "at": time.time()},
            root=repo.cache_dir,
            repo_id=repo.repo_id,
        )


def recalled_implicit_refusal(repo: RepoCache) -> dict[str, Any] | None:
    """The last implicit refusal kept for the repo (``code``, ``token_set``, ``at``), or None."""
    data = read_json(repo.implicit_refusal_path)
    return data if isinstance(data, dict) else None


def recalled_refusal(repo: RepoCache) -> dict[str, Any] | None:
    """The last refusal kept for the repo (``reason``, ``message``, ``token_set``, ``at``), or None."""
    data = read_json(repo.refusal_path)
    return data if isinstance(data, dict) else None


def forget_refusal(repo: RepoCache) -> None:
    """The Hub served the repo: an old refusal no longer stands."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(repo.refusal_path)


def remember_open(repo: RepoCache) -> None:
    """Keep that the Hub served the repo's files with no token (best effort, as :func:`remember_refusal`)."""
    with contextlib.suppress(OSError, HfSnapshotError):
        atomic_write_json(
            repo.openness_path, {"open": True, "at": time.time()}, root=repo.cache_dir, repo_id=repo.repo_id
        )


def known_open(repo: RepoCache) -> bool:
    """Whether the Hub once served the repo's files with no token (see :func:`remember_open`)."""
    data = read_json(repo.openness_path)
    return isinstance(data, dict) and data.get("open") is True


# --- failure memory -----------------------------------------------------------------------------


class FailureMemory:
    """Failures shared by the processes of one test session, so each failing request is asked of the Hub once.

    A failure is a small JSON object in a file of the cache's own folder, one folder per session.
    Sharing is best effort: a read-only cache just means each process finds out for itself. The
    controller removes the session's folders at the end, those its workers wrote included.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        #: Every folder written to in this session (this process's and, in the controller, the workers').
        self.folders: set[str] = set()

    def share(self, cache_dir: Path, key: str, failure: Mapping[str, Any]) -> None:
        """Write ``failure`` (plain JSON data) for the other processes; silently skipped when impossible."""
        path = self._path(cache_dir, key)
        try:
            atomic_write_json(path, dict(failure), root=cache_dir)
        except (OSError, HfSnapshotError):
            return
        self.folders.add(str(path.parent))

    def recall(self, cache_dir: Path, key: str) -> dict[str, Any] | None:
        """The failure another process shared under ``key``, or None."""
        data = read_json(self._path(cache_dir, key))
        return data if isinstance(data, dict) else None

    def adopt(self, folders: Iterable[str]) -> None:
        """Take over the cleanup of folders another process wrote to."""
        self.folders.update(folders)

    def remove(self) -> None:
        """Delete every folder of the session (the controller, once every worker is done)."""
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _path(self, cache_dir: Path, key: str) -> Path:
        return failure_memory_file(cache_dir, self.session_id, key)


# --- lock holder --------------------------------------------------------------------------------


def write_holder(repo: RepoCache, mode: str, *, pid: int | None = None, host: str | None = None) -> None:
    """Record who holds ``repo``'s lock (this process on this host unless told) for waiters' messages.

    The one writer of the holder record ``{pid, host, since, since_iso, mode, repo}``, which
    :func:`read_holder` reads.
    """
    now = time.time()
    atomic_write_json(
        repo.holder_path,
        {
            "pid": os.getpid() if pid is None else pid,
            "host": socket.gethostname() if host is None else host,
            "since": now,
            "since_iso": datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "mode": mode,
            "repo": f"{repo.repo_type}:{repo.repo_id}",
        },
        root=repo.cache_dir,
        repo_id=repo.repo_id,
    )


def read_holder(repo: RepoCache) -> dict[str, Any]:
    """The holder record of ``repo``'s lock, or an empty dict."""
    record = read_json(repo.holder_path)
    return record if isinstance(record, dict) else {}


__all__ = [
    "RECORD_VERSION",
    "SESSION_MAX_AGE",
    "FailureMemory",
    "forget_refusal",
    "read_holder",
    "read_record",
    "recalled_refusal",
    "remember_refusal",
    "remember_resolution",
    "resolved",
    "vouched",
    "write_holder",
    "write_record",
]
