"""Checking cached files against the Hub's listing: cheap stat checks and streamed hashes.

Hashes are streamed in 1 MiB reads (memory stays flat for any file size) and spread over a
thread pool: hashlib releases the GIL on large updates, so files hash on every core at once.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .layout import XET_HASH_RE, RepoCache

if TYPE_CHECKING:
    from hashlib import _Hash

#: Read size of every streamed hash: memory stays flat for any file size.
CHUNK = 1 << 20


@dataclass(frozen=True)
class ExpectedFile:
    """One file of the Hub listing: its path, size, content hash, and the blob it is cached as.

    ``etag`` is the sha256 for LFS files and the git blob sha1 otherwise: the hash the contents
    must have, and the blob name the Hub's ETag gives. ``blob`` is set only when a server's ETag
    made the client name the blob otherwise (the contents were hashed and found right).
    ``xet`` is the file's Xet hash when the listing gives one: the name of its shared-store file.
    """

    path: str
    size: int
    etag: str
    lfs: bool
    blob: str = ""
    xet: str = ""

    @property
    def blob_name(self) -> str:
        return self.blob or self.etag

    def to_json(self) -> list[object]:
        return [self.path, self.size, self.etag, self.lfs, self.blob, self.xet]

    @classmethod
    def from_json(cls, raw: object) -> ExpectedFile:
        if not isinstance(raw, list) or len(raw) != 6:
            raise ValueError(f"bad record entry: {raw!r}")
        path, size, etag, lfs, blob, xet = raw
        if not all(isinstance(v, str) for v in (path, etag, blob, xet)) or not isinstance(size, int):
            raise ValueError(f"bad record entry: {raw!r}")
        if blob and not _BLOB_NAME.fullmatch(blob):
            raise ValueError(f"bad blob name in record: {blob!r}")
        if xet and not XET_HASH_RE.fullmatch(xet):
            raise ValueError(f"bad xet hash in record: {xet!r}")
        return cls(path, size, etag, bool(lfs), blob, xet)


_BLOB_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def new_digest(*, lfs: bool, size: int) -> _Hash:
    """The running hash a file of ``size`` bytes must end with its etag in: sha256 (LFS) or git blob sha1."""
    if lfs:
        return hashlib.sha256()
    digest = hashlib.sha1()
    digest.update(b"blob %d\0" % size)
    return digest


def content_hash(path: str | os.PathLike[str], *, lfs: bool) -> str:
    """sha256 of the file (LFS) or its git blob sha1 (regular files), streamed."""
    digest = new_digest(lfs=lfs, size=os.path.getsize(path))
    with open(path, "rb", buffering=0) as handle:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        while True:
            n = handle.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


def hash_mismatches(files: Iterable[tuple[ExpectedFile, Path]], workers: int | None = None) -> list[str]:
    """Paths (as listed) whose contents do not hash to their etag; unreadable files count as mismatches."""
    items = list(files)
    if not items:
        return []

    def check(item: tuple[ExpectedFile, Path]) -> str | None:
        expected, blob = item
        try:
            return None if content_hash(blob, lfs=expected.lfs) == expected.etag else expected.path
        except OSError:
            return expected.path

    workers = workers or min(len(items), os.cpu_count() or 1)
    if workers <= 1:
        results = [check(item) for item in items]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hfsnapshot-hash") as pool:
            results = list(pool.map(check, items))
    return sorted(path for path in results if path is not None)


def link_target(relpath: str, etag: str) -> str:
    """The relative symlink target huggingface_hub writes for ``snapshots/<commit>/<relpath>``."""
    return "../" * (relpath.count("/") + 2) + "blobs/" + etag


def linked_blob_name(snapshot_dir: str, relpath: str) -> str | None:
    """The name of the blob a snapshot link points at, when it is a plain ``blobs/<name>`` link."""
    try:
        target = os.readlink(os.path.join(snapshot_dir, relpath))
    except OSError:
        return None
    prefix = link_target(relpath, "")
    name = target[len(prefix) :] if target.startswith(prefix) else ""
    if not _BLOB_NAME.fullmatch(name) or name.endswith(".incomplete"):
        return None
    return name


def check_file(repo: RepoCache, snapshot_dir: str, expected: ExpectedFile) -> str | None:
    """Cheap check of one snapshot entry: None when fine, else why it is not.

    The link must point at ``blobs/<etag>`` (so it cannot lead out of the cache). That blob is a
    regular file, or, for a Xet file, a link into the shared blob store whose file is regular;
    either way of the listed size. Caches on filesystems without symlinks hold plain files
    instead; those only get the size check.
    """
    link = os.path.join(snapshot_dir, expected.path)
    st = _lstat(link, missing="missing", unreadable="unreadable")
    if isinstance(st, str):
        return st
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(link)
        except OSError:
            return "unreadable link"
        blobs_dir = str(repo.blobs)
        blob = os.path.join(blobs_dir, expected.blob_name)
        if target != link_target(expected.path, expected.blob_name) and os.path.normpath(
            os.path.join(os.path.dirname(link), target)
        ) != os.path.normpath(blob):
            return f"link points at {target!r} instead of blobs/{expected.blob_name}"
        st = _lstat(blob, missing="dangling link (blob missing)", unreadable="unreadable blob")
        if isinstance(st, str):
            return st
        if stat.S_ISLNK(st.st_mode):
            store = repo.store_target(expected.blob_name)
            if store is None:
                return "blob is a link that does not lead into the shared blob store"
            if expected.xet and store.name != expected.xet:
                return f"blob links to the store file {store.name[:12]} instead of {expected.xet[:12]}"
            st = _lstat(store, missing="dangling link (store file missing)", unreadable="unreadable store file")
            if isinstance(st, str):
                return st
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size != expected.size:
        return f"size {st.st_size} instead of {expected.size}"
    return None


def _lstat(path: str | os.PathLike[str], *, missing: str, unreadable: str) -> os.stat_result | str:
    """``os.lstat(path)``, or why it failed: ``missing``, or ``unreadable`` with the system's reason."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return missing
    except OSError as error:
        return f"{unreadable} ({error.strerror})"
