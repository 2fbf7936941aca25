"""Checks of cached files against the Hub's listing: cheap stat checks, and hashes streamed on every core."""

from __future__ import annotations

import enum
import hashlib
import mmap
import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..own_work import own_thread
from .layout import XET_HASH_RE, RepoCache

if TYPE_CHECKING:
    from hashlib import _Hash

#: Read size of every streamed hash: memory stays flat for any file size.
CHUNK = 1 << 20


def read_buffer(size: int = CHUNK) -> memoryview:
    """A buffer for ``readinto`` that starts on a page (anonymous ``mmap``).

    The kernel copies a read into a destination that is not on a cache line at several times the
    CPU, and a 1 MiB ``bytearray`` starts 16 bytes past a page (malloc's header): docs/benchmarks.md.
    """
    return memoryview(mmap.mmap(-1, size))


class ExpectedFile(NamedTuple):
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
        if type(raw) is not list or len(raw) != 6:
            raise ValueError(f"bad record entry: {raw!r}")
        path, size, etag, lfs, blob, xet = raw
        # Exact types (what json gives): one record holds thousands of entries, read on every warm call.
        if not (type(path) is type(etag) is type(blob) is type(xet) is str) or type(size) is not int:
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
        view = read_buffer()
        while True:
            n = handle.readinto(view)
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
        from concurrent.futures import ThreadPoolExecutor  # a run that hashes in parallel pays for importing it

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hfsnapshot-hash", initializer=own_thread)
        with pool:
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


class ProblemKind(enum.Enum):
    """Why a cached file cannot be served as it is; the decisions of repair and the engine hang on these."""

    #: Nothing at the snapshot path.
    MISSING = "missing"
    #: An entry on the way (the link, the blob, the store file) could not be read: see ``Problem.at``.
    UNREADABLE = "unreadable"
    #: The snapshot link points at another blob of the repo (a server's ETag may have named it so).
    OTHER_BLOB = "other blob"
    #: The snapshot link leads outside the repo's ``blobs/`` (out of the cache, or to another of its folders).
    LINK_OUTSIDE = "link outside the cache"
    #: The link's blob, or the store file the blob links to, is gone: see ``Problem.at``.
    DANGLING_LINK = "dangling link"
    #: The repo's blob is a link leading neither into the cache's shared blob store nor into a
    #: configured layer's copy of the file.
    BLOB_LINK_OUTSIDE = "blob link outside the cache"
    #: The repo's blob links to a store file other than the listing's Xet hash names.
    OTHER_STORE_FILE = "other store file"
    #: What the path leads to is not a regular file (a folder, a device, ...).
    NOT_REGULAR = "not a regular file"
    #: A regular file of another size than listed.
    WRONG_SIZE = "wrong size"
    #: The contents do not hash to the listing's sha256 (LFS) or git blob sha1.
    WRONG_HASH = "wrong hash"
    #: An unfinished download (``<blob>.<8 hex>.incomplete``) lies beside the file's blob (in a
    #: read-only layer, where nobody can clean it up, the file is not served from there).
    INCOMPLETE_LEFT = "incomplete left"


class Entry(enum.Enum):
    """The entries a snapshot file is reached through, in order (the value names it in messages)."""

    #: The snapshot path itself, whatever is there.
    PATH = ""
    #: The symlink at the snapshot path, read as a link.
    LINK = "link"
    BLOB = "blob"
    STORE = "store file"
    #: The file holding the bytes in a read-only cache layer (see :mod:`pytest_hfsnapshot.core.cache.layers`).
    LAYER = "layer file"


class Problem(NamedTuple):
    """What is wrong with one file of a snapshot (``path`` as listed); :meth:`describe` gives its words.

    ``at`` is the entry the problem was met at; ``found`` / ``wanted`` what is there and what should
    be (a link target, a blob or store name, a size); ``reason`` the system's words for an error.
    """

    kind: ProblemKind
    path: str
    at: Entry = Entry.PATH
    found: str = ""
    wanted: str = ""
    reason: str = ""

    def describe(self) -> str:
        """The words users read for this problem (the one place they are made)."""
        kind = self.kind
        if kind is ProblemKind.UNREADABLE:
            where = f" {self.at.value}" if self.at.value else ""
            return f"unreadable{where} ({self.reason})"
        if kind in (ProblemKind.OTHER_BLOB, ProblemKind.LINK_OUTSIDE):
            return f"link points at {self.found!r} instead of blobs/{self.wanted}"
        if kind is ProblemKind.DANGLING_LINK:
            return f"dangling link ({self.at.value} missing)"
        if kind is ProblemKind.BLOB_LINK_OUTSIDE:
            return "blob is a link that does not lead into the shared blob store or a cache layer"
        if kind is ProblemKind.OTHER_STORE_FILE:
            return f"blob links to the store file {self.found[:12]} instead of {self.wanted[:12]}"
        if kind is ProblemKind.WRONG_SIZE:
            return f"size {self.found} instead of {self.wanted}"
        if kind is ProblemKind.WRONG_HASH:
            return f"{self.wanted} mismatch"
        if kind is ProblemKind.INCOMPLETE_LEFT:
            return f"an unfinished download {self.found} lies beside its blob"
        return str(kind.value)

    @property
    def blob_damaged(self) -> bool:
        """Whether the bytes the link leads to must go too, not only the link (see :meth:`.repair.Repairer.remove`)."""
        return self.kind not in (ProblemKind.MISSING, ProblemKind.OTHER_BLOB, ProblemKind.LINK_OUTSIDE)


def hash_problem(expected: ExpectedFile) -> Problem:
    """The problem of a file whose contents do not hash to the listing's etag."""
    return Problem(ProblemKind.WRONG_HASH, expected.path, wanted="sha256" if expected.lfs else "git-sha1")


def check_file(
    repo: RepoCache, snapshot_dir: str, expected: ExpectedFile, layers: Sequence[Path] = ()
) -> Problem | None:
    """Cheap check of one snapshot entry: None when fine, else the problem.

    The link must point at ``blobs/<etag>`` (so it cannot lead out of the cache). That blob is a
    regular file, or, for a Xet file, a link into the shared blob store whose file is regular;
    either way of the listed size. Caches on filesystems without symlinks hold plain files
    instead; those only get the size check.

    ``layers``: the read-only cache layers in use. The blob may then also be an absolute link to
    one of the places a layer keeps this file's bytes (:meth:`RepoCache.bytes_in`), whose file is
    regular and of the listed size: the one way a link may leave the cache.
    """
    path = expected.path
    link = os.path.join(snapshot_dir, path)
    st = _lstat(link, path, Entry.PATH)
    if isinstance(st, Problem):
        return st
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(link)
        except OSError as error:
            return Problem(ProblemKind.UNREADABLE, path, Entry.LINK, reason=str(error.strerror))
        blobs_dir = str(repo.blobs)
        blob = os.path.join(blobs_dir, expected.blob_name)
        resolved = os.path.normpath(os.path.join(os.path.dirname(link), target))
        if target != link_target(path, expected.blob_name) and resolved != os.path.normpath(blob):
            kind = ProblemKind.OTHER_BLOB if os.path.dirname(resolved) == blobs_dir else ProblemKind.LINK_OUTSIDE
            return Problem(kind, path, found=target, wanted=expected.blob_name)
        st = _lstat(blob, path, Entry.BLOB)
        if isinstance(st, Problem):
            return st
        if stat.S_ISLNK(st.st_mode):
            store = repo.store.target(expected.blob_name)
            if store is None:
                return _check_layer_link(repo, blob, expected, layers)
            if expected.xet and store.name != expected.xet:
                return Problem(ProblemKind.OTHER_STORE_FILE, path, Entry.BLOB, found=store.name, wanted=expected.xet)
            st = _lstat(store, path, Entry.STORE)
            if isinstance(st, Problem):
                return st
    if not stat.S_ISREG(st.st_mode):
        return Problem(ProblemKind.NOT_REGULAR, path)
    if st.st_size != expected.size:
        return Problem(ProblemKind.WRONG_SIZE, path, found=str(st.st_size), wanted=str(expected.size))
    return None


def all_fine(repo: RepoCache, snapshot_dir: str, files: Iterable[ExpectedFile], layers: Sequence[Path] = ()) -> bool:
    """True when :func:`check_file` finds no problem with any of ``files``: the warm path's check.

    The common entry, a link written as huggingface_hub writes it to a regular blob of the listed
    size, costs one ``readlink`` and one ``lstat``; any other entry gets the whole check.
    """
    blobs = str(repo.blobs) + "/"
    prefix = snapshot_dir + "/"
    readlink, lstat, is_regular = os.readlink, os.lstat, stat.S_ISREG
    for expected in files:
        name = expected.blob or expected.etag
        path = expected.path
        try:
            fast = readlink(prefix + path) == "../" * (path.count("/") + 2) + "blobs/" + name
            if fast:
                st = lstat(blobs + name)
                fast = is_regular(st.st_mode) and st.st_size == expected.size
        except OSError:
            fast = False
        if not fast and check_file(repo, snapshot_dir, expected, layers) is not None:
            return False
    return True


def _check_layer_link(repo: RepoCache, blob: str, expected: ExpectedFile, layers: Sequence[Path]) -> Problem | None:
    """The check of a repo blob that is a link out of the cache: legal only into a layer's copy of the file."""
    path = expected.path
    try:
        target = os.readlink(blob)
    except OSError as error:
        return Problem(ProblemKind.UNREADABLE, path, Entry.BLOB, reason=str(error.strerror))
    allowed = {str(p) for layer in layers for p in repo.bytes_in(layer, expected.blob_name, expected.xet)}
    if target not in allowed:
        return Problem(ProblemKind.BLOB_LINK_OUTSIDE, path, Entry.BLOB, found=target)
    st = _lstat(target, path, Entry.LAYER)
    if isinstance(st, Problem):
        return st
    if not stat.S_ISREG(st.st_mode):
        return Problem(ProblemKind.NOT_REGULAR, path, Entry.LAYER)
    if st.st_size != expected.size:
        return Problem(ProblemKind.WRONG_SIZE, path, Entry.LAYER, found=str(st.st_size), wanted=str(expected.size))
    return None


def _lstat(path: str | os.PathLike[str], listed: str, at: Entry) -> os.stat_result | Problem:
    """``os.lstat(path)``, or the problem of the file ``listed`` when the entry ``at`` cannot be stat'ed."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return Problem(ProblemKind.MISSING if at is Entry.PATH else ProblemKind.DANGLING_LINK, listed, at)
    except OSError as error:
        return Problem(ProblemKind.UNREADABLE, listed, at, reason=str(error.strerror))
