"""Half-written Hugging Face cache states, reproduced on purpose, byte for byte (one function each)."""

from __future__ import annotations

import contextlib
import inspect
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Concatenate, Generic, ParamSpec

from ..core.cache.layout import RepoCache, is_within
from ..core.cache.state import write_holder
from ..request import SnapshotRequest
from ..settings import lock_lease_from_env

P = ParamSpec("P")

__all__ = [
    "HalfWritten",
    "corrupted_blob",
    "dangling_link",
    "empty_ref",
    "garbage_ref",
    "interrupted_download",
    "missing_file",
    "orphan_incomplete",
    "stale_lock",
    "truncated_blob",
]

# What a lease holder that dies without releasing leaves: filelock writes its own marker (pid,
# host as filelock names it, process start, token, lease length), then the process exits without
# unlinking it or renewing it again. Given a host, filelock is told it runs there (it asks
# socket.gethostname when it writes the marker), as a job on another machine would write it.
_DIE_HOLDING_LEASE = (
    "import os, socket, sys\n"
    "path, host, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])\n"
    "if host:\n"
    "    socket.gethostname = lambda: host\n"
    "from filelock import SoftFileLease\n"
    "held = SoftFileLease(path, lease_duration=lease, is_singleton=False)\n"
    "held.acquire(timeout=0)\n"
    "os._exit(0)\n"
)


def interrupted_download(
    cache_dir: str | os.PathLike[str], repo_id: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """A CI job SIGKILLed (timeout, OOM killer, cancelled run) while downloading the largest file.

    ``refs/`` and ``trees/`` are written before any file, so they stay; the largest file's link
    and blob are gone, and ``blobs/<etag>.<8 hex>.incomplete`` holds the first half of it. The
    client names that file per download and never resumes or deletes it.
    On the Xet path the client streams into the same ``.incomplete`` name and publishes to the
    shared blob store only once the file is complete, so a kill leaves no store file and no
    repo link to it: both are removed here too.
    Returns ``[link, ..., blob, orphan]`` (every link of the snapshot to that blob); with the
    shared store ``[link, ..., repo blob link, store manifest, store file, orphan]``.
    """
    repo, commit = _snapshot(cache_dir, repo_id, revision, repo_type)
    entries = []
    for folder, _, names in os.walk(repo.snapshot_dir(commit)):
        for name in names:
            relpath = Path(folder, name).relative_to(repo.snapshot_dir(commit)).as_posix()
            try:
                link, blob = _entry(repo, commit, relpath)
            except FileNotFoundError:
                continue  # already dangling: nothing left to interrupt
            entries.append((blob.stat().st_size, relpath, link, blob))
    if not entries:
        raise FileNotFoundError(f"No file of {_label(repo, revision)} is cached in {repo.snapshot_dir(commit)}.")
    _, relpath, _, blob = min(entries, key=lambda e: (-e[0], e[1]))
    orphan = _write_orphan(repo, commit, relpath, blob)
    # A blob serves every link to it: none of them had been made when the download died.
    links = sorted(link for _, _, link, other in entries if other == blob)
    for link in links:
        link.unlink()
    touched = [*links]
    etag = _etag(repo, commit, relpath, blob)
    repo_blob = repo.blob(etag)
    if repo_blob != blob and os.path.lexists(repo_blob):
        # The store's manifest gets a repo's line only when the client links it, after the download.
        manifest = repo.store.manifest(blob)
        dropped = repo.store.drop_reference(blob, etag)
        if dropped and not manifest.read_text(encoding="utf-8").strip():
            manifest.unlink()
        repo_blob.unlink()
        touched += [repo_blob, manifest] if dropped else [repo_blob]
    blob.unlink()
    return [*touched, blob, orphan]


def missing_file(
    cache_dir: str | os.PathLike[str], repo_id: str, filename: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """A worker read a half-written snapshot: the blob is in ``blobs/`` but its link is not made yet.

    The client moves a finished blob into place, then links it; a process killed in between, or
    a reader looking while others still link files, sees the file missing although its bytes
    are cached. Also what ``rm`` of one file in a snapshot folder leaves. Returns ``[link]``.
    """
    repo, commit = _snapshot(cache_dir, repo_id, revision, repo_type)
    link, _ = _entry(repo, commit, filename)
    link.unlink()
    return [link]


def truncated_blob(
    cache_dir: str | os.PathLike[str], repo_id: str, filename: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """A disk filled up (or a CI cache restore was cut short): the blob holds only its first half.

    The client never re-checks a cached blob, online or offline, so it serves it as is. Where the
    blob links into the shared blob store, the store file it resolves to is cut (every repo
    linking to it sees the damage). Returns ``[blob]`` (the file that was cut).
    """
    repo, commit = _snapshot(cache_dir, repo_id, revision, repo_type)
    _, blob = _entry(repo, commit, filename, need_bytes=True)
    with _writable(blob):
        os.truncate(blob, blob.stat().st_size // 2)
    return [blob]


def corrupted_blob(
    cache_dir: str | os.PathLike[str], repo_id: str, filename: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """Bit rot, a failing disk, or a proxy that altered a body: one byte flipped, size unchanged.

    Downloads are checked for length only and cached files never, so only a hash catches it.
    Where the blob links into the shared blob store, the store file is damaged.
    Returns ``[blob]`` (the file that was changed).
    """
    repo, commit = _snapshot(cache_dir, repo_id, revision, repo_type)
    _, blob = _entry(repo, commit, filename, need_bytes=True)
    middle = blob.stat().st_size // 2
    with _writable(blob), open(blob, "r+b") as handle:
        handle.seek(middle)
        byte = handle.read(1)[0]
        handle.seek(middle)
        handle.write(bytes([byte ^ 0xFF]))
    return [blob]


def dangling_link(
    cache_dir: str | os.PathLike[str], repo_id: str, filename: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """Someone freed disk space by deleting blobs (or a CI cache kept the links but not ``blobs/``).

    The link stays, pointing at nothing. Where the blob links into the shared blob store, the
    store file is what goes (``hf cache`` garbage collection or a hand clean-up of ``blobs/``),
    and the repo's link to it dangles. Returns ``[blob]`` (the file deleted).
    """
    repo, commit = _snapshot(cache_dir, repo_id, revision, repo_type)
    link, blob = _entry(repo, commit, filename)
    if not link.is_symlink():
        raise ValueError(f"{link} is a plain file (a cache made without symlinks): it has no link that could dangle.")
    blob.unlink()
    return [blob]


def orphan_incomplete(
    cache_dir: str | os.PathLike[str], repo_id: str, filename: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """A download of this file was killed once, and another process completed the file later.

    The killed one's ``blobs/<etag>.<8 hex>.incomplete`` (first half of the file) stays beside
    the complete snapshot forever: the client never cleans it up. Returns ``[orphan]``.
    """
    repo, commit = _snapshot(cache_dir, repo_id, revision, repo_type)
    _, blob = _entry(repo, commit, filename)
    return [_write_orphan(repo, commit, filename, blob)]


def empty_ref(
    cache_dir: str | os.PathLike[str], repo_id: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """A reader caught ``refs/<revision>`` mid-rewrite, or a crash hit it: the ref is empty.

    Clients before atomic ref writes truncated the file, then wrote the commit. Offline, the
    client then resolves the revision to the ``snapshots/`` folder itself. Returns ``[ref]``.
    """
    ref = _ref(cache_dir, repo_id, revision, repo_type)
    ref.write_bytes(b"")
    return [ref]


def garbage_ref(
    cache_dir: str | os.PathLike[str], repo_id: str, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    """A machine lost power just after the ref was rewritten: ``refs/<revision>`` holds 40 NUL bytes.

    Delayed allocation (ext4, xfs) can keep a file's new length but not its data. Offline, the
    client cannot find the snapshot although every file is cached. Returns ``[ref]``.
    """
    ref = _ref(cache_dir, repo_id, revision, repo_type)
    ref.write_bytes(b"\0" * 40)
    return [ref]


def stale_lock(
    cache_dir: str | os.PathLike[str], repo_id: str, *, repo_type: str = "model", host: str | None = None
) -> list[Path]:
    """A pytest-hfsnapshot process died (SIGKILL, OOM, power loss) holding the repo's lease lock.

    Leaves the plugin's holder record and the lease marker as that process wrote them, for a
    process that no longer exists: a short-lived child takes filelock's ``SoftFileLease`` (for
    the lease length ``HFSNAPSHOT_LOCK_LEASE`` gives, 60 s by default) and exits without
    releasing it. With ``host``, both name that host instead, as a job on another machine sharing
    the cache would leave them: its lease stands until it has gone unrenewed for its length. The
    kernel lock needs no such state: the kernel frees it when its holder dies.
    Returns ``[holder record, lease marker]``.
    """
    if host is not None and (not host or any(c in host for c in "\n\r\0")):
        raise ValueError(f"host={host!r} is not a host name.")
    repo = _repo(cache_dir, repo_id, repo_type, "main")
    for path in (repo.holder_path, repo.soft_lock_path):
        if path.is_symlink() or not is_within(path.parent, repo.cache_dir):
            raise ValueError(f"{path} resolves outside {repo.cache_dir}; refusing to write there.")
    repo.soft_lock_path.parent.mkdir(parents=True, exist_ok=True)
    lease = lock_lease_from_env()
    # Its pid, once it has exited and been reaped, names a process that does not exist.
    child = subprocess.Popen(
        [sys.executable, "-c", _DIE_HOLDING_LEASE, str(repo.soft_lock_path), host or "", repr(lease)]
    )
    if child.wait() != 0:
        raise RuntimeError(
            f"Could not take {repo.soft_lock_path} to leave it stale (status {child.returncode}): "
            "is a live process holding it right now?"
        )
    write_holder(repo, "lease", pid=child.pid, host=host)
    return [repo.holder_path, repo.soft_lock_path]


class _Bound(Generic[P]):
    """One of this module's functions as a method of :class:`HalfWritten`: ``cache_dir`` is the instance's."""

    def __init__(self, function: Callable[Concatenate[str | os.PathLike[str], P], list[Path]]) -> None:
        self.function = function
        self.__doc__ = f"See :func:`{function.__name__}`."
        signature = inspect.signature(function)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    def __get__(self, instance: HalfWritten, owner: type[HalfWritten]) -> Callable[P, list[Path]]:
        function = self.function

        def bound(*args: P.args, **kwargs: P.kwargs) -> list[Path]:
            return function(instance.cache_dir, *args, **kwargs)

        bound.__name__ = bound.__qualname__ = function.__name__
        bound.__doc__ = self.__doc__
        bound.__signature__ = self.signature  # type: ignore[attr-defined]
        return bound


class HalfWritten:
    """The functions of this module bound to one cache folder (what the ``half_written`` fixture gives)."""

    def __init__(self, cache_dir: str | os.PathLike[str]) -> None:
        self.cache_dir = Path(cache_dir)

    interrupted_download = _Bound(interrupted_download)
    missing_file = _Bound(missing_file)
    truncated_blob = _Bound(truncated_blob)
    corrupted_blob = _Bound(corrupted_blob)
    dangling_link = _Bound(dangling_link)
    orphan_incomplete = _Bound(orphan_incomplete)
    empty_ref = _Bound(empty_ref)
    garbage_ref = _Bound(garbage_ref)
    stale_lock = _Bound(stale_lock)


# --- finding what to damage, inside the cache only ------------------------------------------------


def _label(repo: RepoCache, revision: str) -> str:
    return f"{repo.repo_type} {repo.repo_id!r}@{revision}"


def _repo(cache_dir: str | os.PathLike[str], repo_id: str, repo_type: str, revision: str) -> RepoCache:
    # Request validation rejects "..", absolute ids and bad revisions (InvalidRequestError is a ValueError).
    SnapshotRequest.build(repo_id, revision=revision, repo_type=repo_type)
    repo = RepoCache(cache_dir, repo_id, repo_type)
    if not is_within(repo.root, repo.cache_dir):
        raise ValueError(f"{repo.root} resolves outside {repo.cache_dir}; refusing to touch it.")
    if not repo.root.is_dir():
        raise FileNotFoundError(f"The {repo_type} {repo_id!r} is not cached in {repo.cache_dir}.")
    return repo


def _ref(cache_dir: str | os.PathLike[str], repo_id: str, revision: str, repo_type: str) -> Path:
    repo = _repo(cache_dir, repo_id, repo_type, revision)
    ref = repo.ref(revision)
    if not is_within(ref, repo.root):
        raise ValueError(f"{ref} resolves outside {repo.root}; refusing to touch it.")
    if not ref.is_file():
        raise FileNotFoundError(f"{_label(repo, revision)} has no ref in the cache ({ref} is absent).")
    return ref


def _snapshot(cache_dir: str | os.PathLike[str], repo_id: str, revision: str, repo_type: str) -> tuple[RepoCache, str]:
    repo = _repo(cache_dir, repo_id, repo_type, revision)
    if not is_within(repo.ref(revision), repo.root):
        raise ValueError(f"{repo.ref(revision)} resolves outside {repo.root}; refusing to follow it.")
    commit = repo.refs.commit_of(revision)
    if commit is None:
        raise FileNotFoundError(f"{_label(repo, revision)} has no usable ref in the cache ({repo.ref(revision)}).")
    folder = repo.snapshot_dir(commit)
    if not is_within(folder, repo.root):
        raise ValueError(f"{folder} resolves outside {repo.root}; refusing to follow it.")
    if not folder.is_dir():
        raise FileNotFoundError(f"{_label(repo, revision)} has no snapshot folder {folder}.")
    return repo, commit


def _entry(repo: RepoCache, commit: str, filename: str, *, need_bytes: bool = False) -> tuple[Path, Path]:
    """``(snapshot entry, blob it resolves to)``, both checked to stay inside the repo folder."""
    if (
        not isinstance(filename, str)
        or os.path.isabs(filename)
        or "\\" in filename
        or "\0" in filename
        or any(part in ("", ".", "..") for part in filename.split("/"))
    ):
        raise ValueError(f"filename={filename!r} is not a path inside a snapshot (no absolute paths, no '..').")
    link = repo.link(commit, filename)
    if not is_within(link.parent, repo.snapshot_dir(commit)):
        raise ValueError(f"{link.parent} resolves outside {repo.snapshot_dir(commit)}; refusing to follow it.")
    if not os.path.lexists(link):
        raise FileNotFoundError(f"{filename!r} of {repo.repo_type} {repo.repo_id!r} is not cached ({link}).")
    blob = Path(os.path.realpath(link)) if link.is_symlink() else link
    if not is_within(blob, repo.root) and blob != _store_file_of(repo, link):
        raise ValueError(f"{link} leads to {blob}, outside {repo.root}; refusing to touch it.")
    if not blob.is_file():
        raise FileNotFoundError(f"The blob of {filename!r} ({blob}) is not cached.")
    if need_bytes and blob.stat().st_size == 0:
        raise ValueError(f"{filename!r} is empty: there is no byte to damage.")
    return link, blob


def _store_file_of(repo: RepoCache, link: Path) -> Path | None:
    """The shared-store file behind a snapshot link, when its repo blob is a link into the store."""
    try:
        target = os.readlink(link)
    except OSError:
        return None
    name = os.path.basename(target)
    return repo.store.target(name) if os.path.normpath(link.parent / target) == str(repo.blob(name)) else None


@contextlib.contextmanager
def _writable(path: Path) -> Iterator[None]:
    """Damage a file the client made read-only (the shared store's 0444 files), then restore its mode."""
    mode = stat.S_IMODE(path.stat().st_mode)
    os.chmod(path, mode | stat.S_IWUSR)
    try:
        yield
    finally:
        os.chmod(path, mode)


def _etag(repo: RepoCache, commit: str, relpath: str, blob: Path) -> str:
    if blob.parent == repo.blobs:
        return blob.name
    info = (repo.listings.read(commit) or {}).get(relpath)
    if not info:
        raise FileNotFoundError(f"No cached listing names the blob of {relpath!r} ({repo.tree_cache(commit)}).")
    return str(info.get("lfs_sha256") or info["blob_id"])


def _write_orphan(repo: RepoCache, commit: str, relpath: str, blob: Path) -> Path:
    # The client's name for one download's temporary file: uuid4().hex[:8] between etag and suffix.
    orphan = repo.incomplete.path(_etag(repo, commit, relpath, blob), uuid.uuid4().hex[:8])
    data = blob.read_bytes()
    orphan.parent.mkdir(parents=True, exist_ok=True)
    with open(orphan, "xb") as handle:
        handle.write(data[: len(data) // 2])
    return orphan
