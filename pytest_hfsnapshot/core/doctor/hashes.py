"""The contents check of ``doctor --sha256``: each blob read once, largest first, on every core."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ..cache.formats import human_size
from ..cache.layers import DEAD_ERRNOS
from ..cache.verify import ExpectedFile, read_buffer

#: What the caller keeps of each snapshot file (the doctor: its repo and commit).
U = TypeVar("U")


@dataclasses.dataclass(frozen=True)
class Failure(Generic[U]):
    """A snapshot file whose bytes at ``path`` are unreadable (``error``: why) or do not match its
    listing's digest (``error`` None)."""

    path: str
    file: ExpectedFile
    user: U
    error: str | None


@dataclasses.dataclass
class _Job(Generic[U]):
    size: int
    #: The listing's entry and the caller's ``user`` of every snapshot file whose bytes these are.
    users: list[tuple[ExpectedFile, U]]


class Hasher(Generic[U]):
    """The files to hash, each with the snapshot files whose bytes it holds; :meth:`run` reads them."""

    def __init__(self) -> None:
        self.jobs: dict[str, _Job[U]] = {}

    def add(self, path: str, f: ExpectedFile, user: U) -> None:
        """Check the snapshot file ``f`` against the bytes at ``path`` (read once for all its users)."""
        job = self.jobs.get(path)
        if job is None:
            job = self.jobs[path] = _Job(f.size, [])
        job.users.append((f, user))

    def run(self, progress: Callable[[str], None]) -> tuple[int, list[Failure[U]]]:
        """Hash every file once, largest first, on every core, a status line to ``progress`` as it goes:
        the bytes read, and each snapshot file that failed, in the order of the files then of :meth:`add`.
        A dead mount's OSError is raised."""
        jobs = sorted(self.jobs.items(), key=lambda item: -item[1].size)
        total = sum(job.size for _, job in jobs)
        done = [0]
        lock = threading.Lock()
        local = threading.local()

        def work(item: tuple[str, _Job[U]]) -> tuple[dict[bool, str], str | None]:
            path, job = item
            buffer = getattr(local, "buffer", None)
            if buffer is None:
                buffer = local.buffer = read_buffer()
            kinds = {f.lfs for f, _ in job.users}
            try:
                return _digests(path, job.size, kinds, buffer, done, lock), None
            except OSError as error:
                if error.errno in DEAD_ERRNOS:
                    raise
                return {}, str(error.strerror)

        workers = max(1, min(len(jobs), _cores()))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hfsnapshot-doctor") as pool:
            futures = {pool.submit(work, item): item for item in jobs}
            pending = set(futures)
            while pending:
                _, pending = concurrent.futures.wait(pending, timeout=0.2)
                progress(
                    f"hfsnapshot doctor: hashing {human_size(done[0])} of {human_size(total)} "
                    f"({100 * done[0] // max(total, 1)}%)"
                )
        failed = []
        for future, (path, job) in futures.items():
            digests, error = future.result()
            for f, user in job.users:
                if error is not None or digests.get(f.lfs) != f.etag:
                    failed.append(Failure(path, f, user, error))
        return done[0], failed


def _digests(
    path: str, size: int, kinds: set[bool], buffer: memoryview, done: list[int], lock: threading.Lock
) -> dict[bool, str]:
    """The file's sha256 (``True`` in ``kinds``) and git blob sha1 (``False``), in one read."""
    sha256 = hashlib.sha256() if True in kinds else None
    sha1 = None
    if False in kinds:
        sha1 = hashlib.sha1()
        sha1.update(b"blob %d\0" % size)
    with open(path, "rb", buffering=0) as handle:
        while True:
            n = handle.readinto(buffer)
            if not n:
                break
            chunk = buffer[:n]
            if sha256 is not None:
                sha256.update(chunk)
            if sha1 is not None:
                sha1.update(chunk)
            with lock:
                done[0] += n
    out = {}
    if sha256 is not None:
        out[True] = sha256.hexdigest()
    if sha1 is not None:
        out[False] = sha1.hexdigest()
    return out


def _cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


__all__ = ["Failure", "Hasher"]
