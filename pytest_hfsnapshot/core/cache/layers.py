"""Read-only cache layers: caches searched, in order, before anything is fetched.

A layer may have lost its symlinks (rclone), so it is read by file names alone and never written;
the writable cache links to its files, which huggingface_hub then reads as its own."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import stat
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ...errors import HfSnapshotWarning, InvalidRequestError
from ...settings import LAYERS_ENV, Settings
from ..own_work import own_thread
from . import state
from .layout import RepoCache, dropped_layer_file, is_within
from .verify import ExpectedFile, Problem, ProblemKind, check_file, content_hash, hash_problem, link_target

if TYPE_CHECKING:
    from .locking import HeldCheck

log = logging.getLogger("pytest_hfsnapshot")

#: What a layer that stopped working answers, as opposed to a file that is not there.
DEAD_ERRNOS = frozenset(
    code
    for code in (
        errno.EIO,
        errno.ENOTCONN,
        errno.ESTALE,
        errno.ENODEV,
        errno.ENXIO,
        errno.EHOSTDOWN,
        errno.ETIMEDOUT,
        errno.ECONNABORTED,
    )
)

# Per process: the device each layer was on when first opened (an unmount shows another one), the
# layers each session opened (checked once: a later failure is the session's, not the caller's), and
# the layers left, by (session, layer).
_devices: dict[str, int] = {}
_opened: set[tuple[str, str]] = set()
_dropped: dict[tuple[str | None, str], str] = {}
_lock = threading.Lock()


def layer_roots(settings: Settings) -> list[Path]:
    """The settings' cache layers, as paths."""
    return [Path(layer) for layer in settings.cache_layers]


def env_layers() -> list[str]:
    """The layers :data:`LAYERS_ENV` names, in order (empty entries skipped)."""
    return [part for part in os.environ.get(LAYERS_ENV, "").split(os.pathsep) if part.strip()]


def open_layers(roots: Sequence[Path], *, cache_dir: Path, session: str | None) -> None:
    """Check, before any work, that every layer can be read and is not the writable cache.

    Raises InvalidRequestError naming the first that is not a readable folder. Each layer is
    checked once per ``session``: what fails later is the session's to survive (see :class:`Layers`).
    """
    cache = Path(os.path.realpath(cache_dir))
    for root in roots:
        if (session is not None and (session, str(root)) in _opened) or _is_dropped(session, root, cache):
            continue
        try:
            st = os.stat(root)
            if not stat.S_ISDIR(st.st_mode):
                raise InvalidRequestError(
                    f"The cache layer {root} is not a folder. A layer is a huggingface_hub cache folder that is "
                    "only read (a mounted bucket, a cache baked into an image): give its folder."
                )
            with os.scandir(root) as entries:
                next(entries, None)
        except FileNotFoundError:
            raise InvalidRequestError(
                f"The cache layer {root} does not exist. A layer is a huggingface_hub cache folder that is only "
                "read (a mounted bucket, a cache baked into an image): mount or create it first, or leave it out."
            ) from None
        except OSError as error:
            raise InvalidRequestError(
                f"The cache layer {root} cannot be read ({error.strerror}). Check that it is mounted and "
                "readable by this user, or leave it out of the layers."
            ) from None
        if is_within(cache, root) or is_within(root, cache):
            raise InvalidRequestError(
                f"The cache layer {root} overlaps the writable cache {cache}: a layer is only read and the "
                "writable cache is written, so neither may hold the other. Give two separate folders."
            )
        with _lock:
            _devices.setdefault(str(root), st.st_dev)
            if session is not None:
                _opened.add((session, str(root)))


@dataclasses.dataclass(frozen=True)
class Found:
    """A file a layer serves: the layer's file holding its bytes, and the entry the writable record keeps."""

    file: Path
    entry: ExpectedFile


class Layers:
    """The layers of one materialization, in order, those left in this session excepted.

    A layer that fails after it was opened (a dead FUSE mount answers ENOTCONN, a network
    filesystem EIO, an unmounted one shows another device) is left for the rest of the session
    with one warning: its files count as missing, the links into it as damage. The processes of
    one session learn of it from :func:`pytest_hfsnapshot.core.cache.layout.dropped_layer_file`.
    """

    def __init__(self, roots: Sequence[Path], *, cache_dir: Path, session: str | None, label: str) -> None:
        self._all = tuple(roots)
        self.cache_dir = cache_dir
        self.session = session
        self.label = label
        for root in self._all:
            if str(root) not in _devices:  # not opened in this process (a caller skipping open_layers)
                with contextlib.suppress(OSError):
                    device = os.stat(root).st_dev
                    with _lock:
                        _devices.setdefault(str(root), device)

    @property
    def roots(self) -> tuple[Path, ...]:
        """The layers still in use."""
        return tuple(root for root in self._all if not _is_dropped(self.session, root, self.cache_dir))

    def __bool__(self) -> bool:
        return bool(self._all)

    def probe(self) -> None:
        """Leave every layer that no longer answers, is gone, or shows another device than when it was opened.

        A folder below a mount point is gone once the mount is (ENOENT); the mount point itself
        shows the empty folder beneath it: another device.
        """
        for root in self.roots:
            seen = _devices.get(str(root))
            try:
                st = os.stat(root)
            except OSError as error:
                if error.errno in DEAD_ERRNOS or seen is not None:
                    self.drop(root, str(error.strerror))
                continue
            if seen is not None and st.st_dev != seen:
                self.drop(root, "it is no longer mounted: the folder shows another filesystem than at the start")

    def drop(self, root: Path, cause: str) -> None:
        """Leave ``root`` for the rest of the session; the first process of the session to do so warns."""
        key = (self.session, str(root))
        with _lock:
            if key in _dropped:
                return
            _dropped[key] = cause
        if not self._first_to_drop(root, cause):
            return
        warnings.warn(
            HfSnapshotWarning(
                f"hfsnapshot: the cache layer {root} failed ({cause}); it is left for the rest of this session "
                f"and snapshots come from the writable cache {self.cache_dir} (downloaded where needed). "
                "Check the mount."
            ),
            stacklevel=2,
        )

    def _first_to_drop(self, root: Path, cause: str) -> bool:
        """Write down for the session's other processes that ``root`` is left; True when none had yet."""
        if self.session is None:
            return True
        path = _dropped_path(self.cache_dir, self.session, root)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"layer": str(root), "cause": cause}), encoding="utf-8")
            # A hard link is made at once or not at all, and only once: exactly one process warns.
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:
            return True  # nothing can be shared: this process says it
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return True

    # --- what a layer holds -------------------------------------------------------------------
    def read_ref(self, repo: RepoCache, revision: str) -> str | None:
        """The commit the first layer holding ``refs/<revision>`` of the repo names (offline runs)."""
        for root in self.roots:
            commit = repo.in_cache(root).refs.read(revision)
            if commit is not None:
                return commit
        return None

    def listing(self, repo: RepoCache, commit: str) -> dict[str, dict[str, object]] | None:
        """The client's cached listing of ``commit`` in the first layer that has one."""
        for root in self.roots:
            try:
                raw = repo.in_cache(root).listings.read(commit)
            except OSError as error:
                self._failed(root, error)
                continue
            if raw is not None:
                return raw
        return None

    def find(
        self, repo: RepoCache, commit: str, files: Iterable[ExpectedFile], *, hash_all: bool, contents: bool = True
    ) -> dict[str, Found]:
        """The files of ``files`` the layers serve, by path, each from the first layer holding it good.

        A layer's file is good when it is a regular file of the listed size with no unfinished
        download beside it, and it hashes to the listing's etag (skipped, unless ``hash_all``, when
        a record in the layer vouches for it). A damaged one is never served. ``contents=False``:
        no hashing at all and nothing logged (a plan of what would be fetched, not a verdict).
        """
        wanted = {f.path: f for f in files}
        found: dict[str, Found] = {}
        for root in self.roots:
            if not wanted:
                break
            try:
                held = self._find_in(root, repo, commit, list(wanted.values()), hash_all=hash_all, contents=contents)
            except OSError as error:
                self._failed(root, error)
                continue
            for path, one in held.items():
                found[path] = one
                del wanted[path]
        return found

    def _find_in(
        self, root: Path, repo: RepoCache, commit: str, files: list[ExpectedFile], *, hash_all: bool, contents: bool
    ) -> dict[str, Found]:
        there = repo.in_cache(root)
        try:
            if not stat.S_ISDIR(os.lstat(there.root).st_mode):
                return {}
        except (FileNotFoundError, NotADirectoryError):
            return {}
        vouched = state.vouched(there, commit)
        orphans = {path.name.split(".", 1)[0]: path.name for path in there.incomplete.found()}
        candidates: list[tuple[Found, bool]] = []
        for f in files:
            record = vouched.get(f.path)
            trusted = record is not None and (record.etag, record.size, record.lfs) == (f.etag, f.size, f.lfs)
            entry = f._replace(blob=record.blob) if record is not None and trusted else f
            if entry.blob_name in orphans:
                problem: Problem | None = Problem(ProblemKind.INCOMPLETE_LEFT, f.path, found=orphans[entry.blob_name])
                file = None
            else:
                file, problem = _bytes_of(repo, root, entry)
            if file is None:
                if problem is not None and contents:
                    self._not_served(root, problem)
                continue
            candidates.append((Found(file, entry), contents and (hash_all or not trusted)))
        bad = _hash_failures([(one.entry, one.file) for one, hashed in candidates if hashed])
        for path in sorted(bad):
            self._not_served(root, bad[path])
        return {one.entry.path: one for one, _ in candidates if one.entry.path not in bad}

    def serving(self, repo: RepoCache, files: Iterable[ExpectedFile]) -> tuple[str, ...]:
        """The layers in use whose files the writable cache's blobs of ``files`` link to, in layer order."""
        targets = set()
        for f in files:
            with contextlib.suppress(OSError):
                targets.add(os.readlink(repo.blob(f.blob_name)))
        used = {root for root in self.roots for target in targets if target.startswith(str(root) + os.sep)}
        return tuple(str(root) for root in self.roots if root in used)

    def _failed(self, root: Path, error: OSError) -> None:
        if error.errno in DEAD_ERRNOS:
            self.drop(root, str(error.strerror))

    def _not_served(self, root: Path, problem: Problem) -> None:
        log.warning(
            "hfsnapshot: not serving %s of %s from the cache layer %s: %s; it is fetched into the writable cache",
            problem.path,
            self.label,
            root,
            problem.describe(),
        )


@dataclasses.dataclass(frozen=True)
class Served:
    """What the layers serve in place of the files the writable cache lacks or holds damaged."""

    #: The entries the record keeps for the files served, by path.
    entries: dict[str, ExpectedFile]
    #: The paths whose damage in the writable cache was removed.
    repaired: list[str]
    #: What is still missing or damaged, by path: the problems given, less the files served.
    problems: dict[str, Problem]


class Remover(Protocol):
    """What serving needs of a repo's repairer (:class:`~pytest_hfsnapshot.core.cache.repair.Repairer`,
    which imports this module): its repo, removal of damage, and the client's lock of a blob."""

    @property
    def repo(self) -> RepoCache: ...

    def remove(self, commit: str, f: ExpectedFile, problem: Problem) -> None: ...

    def blob_lock(self, etag: str) -> contextlib.AbstractContextManager[object]: ...


def serve(
    layers: Layers,
    repair: Remover,
    held: HeldCheck,
    commit: str,
    files: list[ExpectedFile],
    problems: Mapping[str, Problem],
    *,
    hash_all: bool,
) -> Served:
    """Link, in place of the files ``problems`` names, those the layers hold good.

    A file whose blob this cache still holds (a link is missing, not its bytes) is left to the
    client, which links it without a transfer.
    """
    left = dict(problems)
    if not layers or not left:
        return Served({}, [], left)
    repo = repair.repo
    wanted = [f for f in files if f.path in left]
    found = layers.find(repo, commit, wanted, hash_all=hash_all)
    snapshot_dir = str(repo.snapshot_dir(commit))
    served: dict[str, ExpectedFile] = {}
    repaired: list[str] = []
    for f in wanted:
        one = found.get(f.path)
        if one is None:
            continue
        problem = left[f.path]
        blob = repo.blob(one.entry.blob_name)
        if not problem.blob_damaged and os.path.lexists(blob) and not links_to(blob, one.file):
            continue
        if problem.kind is not ProblemKind.MISSING:
            held()
            repair.remove(commit, f, problem)
        if os.path.lexists(blob) and not os.path.islink(blob):
            continue  # a blob of this cache's own stays: the client links it
        if problem.kind is not ProblemKind.MISSING:
            repaired.append(f.path)
        held()  # a link into a layer is a write step like any other
        link_into_layer(repo, commit, one, repair.blob_lock)
        after = check_file(repo, snapshot_dir, one.entry, layers.roots)
        if after is not None:
            left[f.path] = after  # the layer failed meanwhile: repaired like any damage
            continue
        served[f.path] = one.entry
        del left[f.path]
    return Served(served, repaired, left)


def link_into_layer(
    repo: RepoCache, commit: str, found: Found, lock: Callable[[str], contextlib.AbstractContextManager[object]]
) -> None:
    """Make the writable cache serve ``found``: ``blobs/<etag>`` an absolute link to the layer's file,
    and the snapshot link to that blob; each replaced at once, under the client's lock of that blob.

    The writable blob must be absent or a link (a regular blob of the writable cache is its own).
    """
    entry = found.entry
    blob = repo.blob(entry.blob_name)
    link = repo.link(commit, entry.path)
    repo.make_folders(repo.blobs)
    repo.make_folders(link.parent)
    with lock(entry.blob_name):
        _replace_with_link(blob, str(found.file))
        _replace_with_link(link, link_target(entry.path, entry.blob_name))


def links_to(path: Path, target: Path) -> bool:
    """Whether ``path`` is a symlink whose target is exactly ``target``."""
    try:
        return os.readlink(path) == str(target)
    except OSError:
        return False


def _replace_with_link(path: Path, target: str) -> None:
    if links_to(path, Path(target)):
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _bytes_of(repo: RepoCache, root: Path, entry: ExpectedFile) -> tuple[Path | None, Problem | None]:
    """The layer's file holding ``entry``'s bytes, or None and why the places it could be failed
    (None as the reason when it is simply not there). A dead layer raises."""
    problem: Problem | None = None
    for path in repo.bytes_in(root, entry.blob_name, entry.xet):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            if error.errno in DEAD_ERRNOS:
                raise
            problem = Problem(ProblemKind.UNREADABLE, entry.path, reason=str(error.strerror))
            continue
        if stat.S_ISLNK(st.st_mode):
            continue  # the layer's own link into its store: the store file is the next place
        if not stat.S_ISREG(st.st_mode):
            problem = Problem(ProblemKind.NOT_REGULAR, entry.path)
        elif st.st_size != entry.size:
            problem = Problem(ProblemKind.WRONG_SIZE, entry.path, found=str(st.st_size), wanted=str(entry.size))
        elif os.path.realpath(path.parent) != str(path.parent):
            problem = Problem(
                ProblemKind.LINK_OUTSIDE, entry.path, found=os.path.realpath(path), wanted=entry.blob_name
            )
        else:
            return path, None
    return None, problem


def _hash_failures(items: list[tuple[ExpectedFile, Path]]) -> dict[str, Problem]:
    """The files whose contents do not hash to their etag, by path; a dead layer raises."""
    if not items:
        return {}

    def check(item: tuple[ExpectedFile, Path]) -> Problem | None:
        expected, path = item
        try:
            return None if content_hash(path, lfs=expected.lfs) == expected.etag else hash_problem(expected)
        except OSError as error:
            if error.errno in DEAD_ERRNOS:
                raise
            return Problem(ProblemKind.UNREADABLE, expected.path, reason=str(error.strerror))

    workers = min(len(items), os.cpu_count() or 1)
    with ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix="hfsnapshot-layer-hash", initializer=own_thread
    ) as pool:
        results = list(pool.map(check, items))
    return {problem.path: problem for problem in results if problem is not None}


def _dropped_path(cache_dir: Path, session: str, root: Path) -> Path:
    return dropped_layer_file(cache_dir, session, root)


def _is_dropped(session: str | None, root: Path, cache_dir: Path) -> bool:
    key = (session, str(root))
    with _lock:
        if key in _dropped:
            return True
    if session is None or not _dropped_path(cache_dir, session, root).exists():
        return False
    with _lock:
        _dropped[key] = "left by another process of the session"
    return True


__all__ = [
    "DEAD_ERRNOS",
    "LAYERS_ENV",
    "Found",
    "Layers",
    "Remover",
    "Served",
    "env_layers",
    "layer_roots",
    "link_into_layer",
    "links_to",
    "open_layers",
    "serve",
]
