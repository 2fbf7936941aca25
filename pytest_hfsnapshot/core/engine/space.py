"""Whether snapshots fit in the cache's filesystem, and how a filesystem failure is said.

The margin is small on purpose: a check that refuses snapshots that would have fitted is worse than none."""

from __future__ import annotations

import dataclasses
import errno as errnos
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...errors import DiskError
from ...settings import say
from .._hf_compat import has_shared_blob, shared_store_enabled
from ..cache.formats import count, human_size
from ..cache.layout import RepoCache
from ..cache.verify import ExpectedFile
from ..hub import causes

#: The smallest margin kept free beyond the bytes to fetch: what the count leaves out (the
#: listing, refs, locks, our record).
MARGIN_FLOOR = 1024 * 1024
#: The margin as a share of the bytes to fetch, in percent, when that is larger than the floor:
#: filesystem overhead on large files and a little growth by other writers.
MARGIN_PERCENT = 1
#: Error numbers that mean "no room": their message gives the bytes needed and free.
SPACE_ERRNOS = frozenset(getattr(errnos, name) for name in ("ENOSPC", "EDQUOT") if hasattr(errnos, name))

#: What to do about each refusal; ``{move}`` is how this front end points the cache elsewhere.
_SPACE_ADVICE = (
    "Free space there: see what the cache holds with `hf cache ls`, remove repos you no longer need "
    "with `hf cache rm model/<org>/<name>` or old revisions with `hf cache prune`; or {move} a larger disk."
)
_ADVICE = {
    "EROFS": "Make the cache writable, or {move} a writable folder.",
    "EACCES": "Make the cache writable for this user, or {move} a writable folder.",
    "EPERM": "Make the cache writable for this user, or {move} a writable folder.",
    "EMFILE": "Too many files are open: raise the limit (`ulimit -n`) or run fewer processes at once.",
    "ENFILE": "Too many files are open on this system: close some, or run fewer processes at once.",
    "ENAMETOOLONG": "The path is too long for the filesystem: {move} a folder with a shorter path.",
    "EFBIG": "The filesystem cannot hold a file this large: {move} another filesystem.",
}
_DEFAULT_ADVICE = "Check the cache's filesystem, or {move} another folder."


@dataclasses.dataclass(frozen=True)
class Blob:
    """One file a transfer will write. ``key`` names the bytes on disk, so that a blob shared counts once."""

    key: str
    #: The repo path it is fetched for (for messages).
    path: str
    size: int


@dataclasses.dataclass(frozen=True)
class Need:
    """What one snapshot still has to fetch into ``cache_dir``."""

    label: str
    cache_dir: Path
    blobs: tuple[Blob, ...]

    @property
    def size(self) -> int:
        return sum(blob.size for blob in self.blobs)


@dataclasses.dataclass(frozen=True)
class Shortfall:
    """Snapshots that do not fit: the bytes to fetch, with the margin, and the bytes free."""

    cache_dir: Path
    to_fetch: int
    files: int
    needed: int
    free: int

    @property
    def margin(self) -> int:
        return self.needed - self.to_fetch


def need(repo: RepoCache, label: str, files: Iterable[ExpectedFile]) -> Need:
    """The blobs ``files`` (those not usable as cached) will make the client write, each once.

    A blob two snapshots of one repo share is one file, and so is a shared-store file, which
    serves every repo of the cache. A blob already on disk with the listing's size costs nothing:
    the client links it instead of downloading.
    """
    store = shared_store_enabled()
    blobs: dict[str, Blob] = {}
    for f in files:
        if _on_disk(repo, f, store=store):
            continue
        key = f"store/{f.xet}" if store and f.xet else f"{repo.folder_name}/{f.blob_name}"
        blobs.setdefault(key, Blob(key, f.path, f.size))
    return Need(label, repo.cache_dir, tuple(blobs.values()))


def shortfall(needs: Sequence[Need]) -> Shortfall | None:
    """None when every blob of ``needs`` (one cache) fits with the margin, or free space is unknown."""
    if not needs:
        return None
    cache_dir = needs[0].cache_dir
    blobs = {blob.key: blob for n in needs for blob in n.blobs}
    if not blobs:
        return None
    free, block = _free_and_block(cache_dir)
    if free is None:
        return None
    to_fetch = sum(blob.size for blob in blobs.values())
    rounded = sum(-(-blob.size // block) * block for blob in blobs.values())
    needed = rounded + max(MARGIN_FLOOR, to_fetch * MARGIN_PERCENT // 100)
    if needed <= free:
        return None
    return Shortfall(cache_dir, to_fetch, len(blobs), needed, free)


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Bytes still writable on the filesystem of ``folder`` (or its nearest existing parent)."""
    return _free_and_block(Path(folder))[0]


def not_enough_space(
    needs: Sequence[Need], short: Shortfall, *, repo_id: str | None = None, revision: str | None = None
) -> DiskError:
    """The error for snapshots refused before any transfer because they do not fit."""
    files = sorted((blob for n in needs for blob in n.blobs), key=lambda b: (-b.size, b.path))
    biggest = ", ".join(f"{b.path} {human_size(b.size)}" for b in files[:3])
    if len(needs) == 1:
        what = needs[0].label
        detail = f"{count(short.files, 'file')} to fetch: {biggest}{', ...' if len(files) > 3 else ''}"
    else:
        what = f"the {count(len(needs), 'snapshot')} to fetch"
        ranked = sorted(needs, key=lambda n: (-n.size, n.label))
        detail = f"{count(short.files, 'file')}; the biggest: " + ", ".join(
            f"{n.label} {human_size(n.size)}" for n in ranked[:3]
        )
    text = os.strerror(errnos.ENOSPC)
    message = (
        f"{text} (ENOSPC) for {what}: {human_size(short.needed)} needed in {short.cache_dir} "
        f"({human_size(short.to_fetch)} in {detail}; plus a {human_size(short.margin)} margin) and that "
        f"filesystem has {human_size(short.free)} free. Nothing was transferred. {advice(errnos.ENOSPC)} "
        f"To skip this check (a filesystem whose free space means nothing), use {say('space_check')}."
    )
    return DiskError(
        message,
        errno=errnos.ENOSPC,
        cause=_cause(errnos.ENOSPC, short.cache_dir),
        filename=files[0].path if files else None,
        folder=str(short.cache_dir),
        needed=short.needed,
        free=short.free,
        setting="space_check",
        repo_id=repo_id,
        revision=revision,
    )


def filesystem_error(
    number: int,
    *,
    label: str,
    cache_dir: Path,
    filename: str | None,
    folder: str | os.PathLike[str] | None,
    needed: int | None = None,
    repo_id: str | None = None,
    revision: str | None = None,
) -> DiskError:
    """The error for a write the filesystem refused (``number``: ENOSPC, EROFS, EACCES, ...)."""
    folder = str(folder) if folder is not None else str(cache_dir)
    where = f" while writing {filename}" if filename else ""
    message = f"{_said(number)}{where} for {label} in {folder}"
    free: int | None = None
    if number in SPACE_ERRNOS:
        free = free_bytes(cache_dir)
        sizes = [f"that filesystem has {human_size(free)} free" if free is not None else ""]
        if needed:
            sizes.insert(0, f"it still needs {human_size(needed)}")
        said = " and ".join(s for s in sizes if s)
        message += f": {said}" if said else ""
    message += f". {advice(number)}"
    return DiskError(
        message,
        errno=number,
        cause=_cause(number, cache_dir),
        filename=filename,
        folder=folder,
        needed=needed,
        free=free,
        repo_id=repo_id,
        revision=revision,
    )


def written_path(error: BaseException) -> tuple[str | None, str | None]:
    """The file name and the folder an OSError in ``error``'s chain names (one of our own writes), else Nones.

    A download's failed write names no file of the repo: the engine knows which files it was
    fetching, and says those instead.
    """
    for link in causes.chain(error):
        if isinstance(link, OSError) and isinstance(link.filename, str) and link.filename:
            return os.path.basename(link.filename), os.path.dirname(link.filename)
    return None, None


def advice(number: int) -> str:
    """What to do about a filesystem refusal with this error number."""
    if number in SPACE_ERRNOS:
        template = _SPACE_ADVICE
    else:
        template = _ADVICE.get(errnos.errorcode.get(number, ""), _DEFAULT_ADVICE)
    return template.format(move=f"point {say('cache_dir')} / HF_HUB_CACHE at")


def _said(number: int) -> str:
    """``No space left on device (ENOSPC)``: the system's own text and the error's name."""
    name = errnos.errorcode.get(number)
    return f"{os.strerror(number)} ({name or f'errno {number}'})"


def _cause(number: int, cache_dir: Path) -> str:
    # No sizes: they differ from one snapshot to the next, and the cause is what they share.
    return f"{_said(number)} in the cache {cache_dir}. {advice(number)}"


def _free_and_block(folder: Path) -> tuple[int | None, int]:
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        if hasattr(os, "statvfs"):
            st = os.statvfs(probe)
            return st.f_bavail * st.f_frsize, max(st.f_frsize, 1)
        return shutil.disk_usage(probe).free, 4096
    except OSError:
        return None, 4096


def _on_disk(repo: RepoCache, f: ExpectedFile, *, store: bool) -> bool:
    try:
        if os.stat(repo.blob(f.blob_name)).st_size == f.size:
            return True  # the client only links it
    except OSError:
        pass
    return store and _in_store(repo.cache_dir, f)


def _in_store(cache_dir: Path, f: ExpectedFile) -> bool:
    """A usable store file for ``f``, by the client's own test (it links such a file without reading it)."""
    return bool(f.xet) and has_shared_blob(cache_dir, f.xet, f.size)


__all__ = [
    "MARGIN_FLOOR",
    "MARGIN_PERCENT",
    "SPACE_ERRNOS",
    "Blob",
    "Need",
    "Shortfall",
    "advice",
    "filesystem_error",
    "free_bytes",
    "need",
    "not_enough_space",
    "shortfall",
    "written_path",
]
