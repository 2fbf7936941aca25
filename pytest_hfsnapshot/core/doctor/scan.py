"""``pytest-hfsnapshot doctor``: every snapshot of a cache or a layer checked offline, in one pass.

Each is checked against our records of its commit, else the client's tree cache, else counted
unverifiable. It sends no request and writes nothing; repair and prune work from its report."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ...errors import HfSnapshotError, InvalidRequestError
from ...request import is_commit, repo_path
from ..cache import state, usage
from ..cache.formats import count, human_age, human_size
from ..cache.layers import DEAD_ERRNOS
from ..cache.layout import (
    INCOMPLETE_RE,
    STORE_DIR,
    XET_HASH_RE,
    RepoCache,
    list_names,
    repo_folder_name,
    repo_of_folder,
)
from ..cache.verify import Entry, ExpectedFile, Problem, ProblemKind, check_file, linked_blob_name
from .hashes import Failure, Hasher
from .locks import StaleLock, lock_held, stale_locks, stale_marker

#: The problem kinds, in the order a report lists them.
KINDS = (
    "missing",
    "dangling-link",
    "wrong-size",
    "wrong-hash",
    "incomplete",
    "stale-lock",
    "stale-lease",
    "unreferenced-blob",
    "bad-ref",
    "unverifiable",
)
#: Kinds about a file of a snapshot: repaired by fetching that file again.
FILE_KINDS = frozenset({"missing", "dangling-link", "wrong-size", "wrong-hash"})
#: Counted apart: a snapshot nothing can check is neither damaged nor healthy.
UNCOUNTED = frozenset({"unverifiable"})
#: What a cache folder may hold at its root besides repo folders.
CACHE_ROOT_NAMES = frozenset({STORE_DIR, ".locks", "CACHEDIR.TAG"})
#: The environment variable that sets the doctor's clock (epoch seconds): prune ages and lease
#: expiry are judged as if it were that time (tests move the clock forward with it).
NOW_ENV = "HFSNAPSHOT_DOCTOR_NOW"
_RCLONE_LINK = ".rclonelink"
NO_LISTING = "no listing (no record of the plugin's, no huggingface_hub tree cache): not checked"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem: ``kind`` (of :data:`KINDS`), the repo (empty for the shared store), the revision
    (a commit, a ref name, or empty), the path (a file of the snapshot, or an entry relative to the
    repo folder or the cache) and what is wrong. ``where`` is the file on disk it is about and
    ``size`` the bytes removing it would free (incomplete and unreferenced files)."""

    kind: str
    repo_id: str
    repo_type: str
    revision: str
    path: str
    detail: str
    where: str = ""
    size: int = 0

    def to_json(self) -> dict[str, str]:
        """The JSON form (``--json``): kind, repo, repo_type, revision, path, detail."""
        return {
            "kind": self.kind,
            "repo": self.repo_id,
            "repo_type": self.repo_type,
            "revision": self.revision,
            "path": self.path,
            "detail": self.detail,
        }

    @property
    def label(self) -> str:
        """``org/name@<commit 12>``, ``datasets/org/name``, or ``shared store``."""
        if not self.repo_id:
            return "shared store"
        name = repo_path(self.repo_id, self.repo_type)
        if not self.revision:
            return name
        return f"{name}@{self.revision[:12] if is_commit(self.revision) else self.revision}"

    def line(self) -> str:
        """The finding as one line of the report."""
        where = f" {self.path}:" if self.path else ":"
        return f"{self.kind:<17} {self.label}{where} {self.detail}"


@dataclasses.dataclass
class Blob:
    """One entry of a repo's ``blobs/``: its bytes (0 for a link; None until needed: a used blob's size is
    not read), and the store entry it links to."""

    name: str
    size: int | None
    store: str | None = None


@dataclasses.dataclass
class SnapshotState:
    """One snapshot of the cache: its commit, the refs naming it, and the blob names it uses."""

    commit: str
    refs: tuple[str, ...]
    listing: str
    blobs: set[str]
    xets: set[str]
    last_use: float | None = None


@dataclasses.dataclass
class RepoState:
    """One repo of the cache, as the scan found it."""

    repo: RepoCache
    snapshots: dict[str, SnapshotState]
    blobs: dict[str, Blob]
    #: Blob names (and Xet hashes) that listings of commits without a snapshot folder keep.
    kept: set[str]
    #: Paths of each commit found damaged (missing, dangling, wrong size or hash), by kind.
    damaged: dict[str, dict[str, str]]


@dataclasses.dataclass
class Report:
    """What :func:`scan` found."""

    root: Path
    layer: bool
    sha256: bool
    findings: list[Finding]
    repos: dict[str, RepoState]
    #: The shared store's files: Xet hash -> size.
    store: dict[str, int]
    files: int = 0
    bytes: int = 0
    hashed: int = 0
    in_flight: int = 0
    seconds: float = 0.0

    @property
    def problems(self) -> list[Finding]:
        """The findings that make the cache unhealthy (unverifiable snapshots are counted apart)."""
        return [f for f in self.findings if f.kind not in UNCOUNTED]

    @property
    def snapshots(self) -> int:
        """Snapshots checked against a listing (the unverifiable ones are counted apart)."""
        return sum(1 for r in self.repos.values() for snap in r.snapshots.values() if snap.listing)

    @property
    def unverifiable(self) -> int:
        return sum(1 for f in self.findings if f.kind == "unverifiable" and not f.path)

    def kinds(self) -> dict[str, int]:
        """How many findings of each kind, in :data:`KINDS` order (kinds with none left out)."""
        counted = {kind: 0 for kind in KINDS}
        for f in self.findings:
            counted[f.kind] += 1
        return {kind: n for kind, n in counted.items() if n}

    @property
    def reclaimable(self) -> int:
        """Bytes that unfinished downloads and unreferenced blobs hold."""
        return sum(f.size for f in self.findings if f.kind in ("incomplete", "unreferenced-blob"))

    def summary(self) -> dict[str, Any]:
        """The summary, as ``--json`` writes it."""
        return {
            "cache": str(self.root),
            "layer": self.layer,
            "sha256": self.sha256,
            "repos": len(self.repos),
            "snapshots": self.snapshots,
            "unverifiable": self.unverifiable,
            "files": self.files,
            "bytes": self.bytes,
            "hashed_bytes": self.hashed,
            "problems": len(self.problems),
            "kinds": self.kinds(),
            "reclaimable_bytes": self.reclaimable,
            "in_flight": self.in_flight,
            "seconds": round(self.seconds, 3),
        }

    def summary_lines(self) -> list[str]:
        """The summary, as the report's last lines."""
        how = f"{human_size(self.hashed)} hashed" if self.sha256 else "sizes only; --sha256 hashes the contents"
        checked = (
            f"checked {count(self.snapshots, 'snapshot')} of {count(len(self.repos), 'repo')} in {self.root}: "
            f"{count(self.files, 'file')}, {human_size(self.bytes)} ({how}) in {self.seconds:.2f}s"
        )
        problems = self.problems
        if problems:
            kinds = ", ".join(f"{kind} {n}" for kind, n in self.kinds().items() if kind not in UNCOUNTED)
            verdict = f"{count(len(problems), 'problem')} ({kinds})"
        else:
            verdict = "healthy: no problem found"
        extra = []
        if self.unverifiable:
            extra.append(f"{count(self.unverifiable, 'snapshot')} unverifiable (no listing: not checked)")
        if self.in_flight:
            extra.append(f"{count(self.in_flight, 'download')} in flight (left alone)")
        extra.append(f"{human_size(self.reclaimable)} reclaimable")
        return [checked, "; ".join([verdict, *extra])]


class Progress:
    """A status line redrawn on a terminal during a scan that lasts (nothing elsewhere)."""

    def __init__(self, stream: TextIO | None, *, after: float = 1.0, every: float = 0.2) -> None:
        self.stream = stream if stream is not None and stream.isatty() else None
        self.started = time.monotonic()
        self.after = after
        self.every = every
        self._shown = 0.0
        self._drawn = False

    def show(self, text: str, *, force: bool = False) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and (now - self.started < self.after or now - self._shown < self.every):
            return
        self._shown = now
        width = shutil.get_terminal_size().columns - 1
        print("\r" + text[:width].ljust(width), end="", file=self.stream, flush=True)
        self._drawn = True

    def clear(self) -> None:
        if self.stream is not None and self._drawn:
            width = shutil.get_terminal_size().columns - 1
            print("\r" + " " * width + "\r", end="", file=self.stream, flush=True)
            self._drawn = False


def now_from_env() -> float:
    """The doctor's clock: :data:`NOW_ENV` when set (a number of epoch seconds), else ``time.time()``."""
    raw = os.environ.get(NOW_ENV, "").strip()
    if not raw:
        return time.time()
    try:
        return float(raw)
    except ValueError:
        raise InvalidRequestError(f"{NOW_ENV}={raw!r} is not a number of seconds since the epoch.") from None


def open_cache(path: str | os.PathLike[str], *, layer: bool) -> Path:
    """The cache folder to check, resolved; InvalidRequestError naming it when it is not one.

    A cache holds only repo folders, ``blobs/``, ``.locks/`` and ``CACHEDIR.TAG``; an empty folder
    is an empty cache.
    """
    what = "cache layer" if layer else "cache folder"
    given = os.fspath(path)
    try:
        st = os.stat(given)
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidRequestError(f"The {what} {given} is not a folder: give a huggingface_hub cache folder.")
        with os.scandir(given) as entries:
            names = sorted(entry.name for entry in entries)
    except FileNotFoundError:
        hint = " Mount or create it first." if layer else " Give the cache with --cache-dir PATH (or HF_HUB_CACHE)."
        raise InvalidRequestError(f"The {what} {given} does not exist.{hint}") from None
    except OSError as error:
        raise InvalidRequestError(
            f"The {what} {given} cannot be read ({error.strerror}). Check that it is mounted and readable by this user."
        ) from None
    foreign = [name for name in names if name not in CACHE_ROOT_NAMES and repo_of_folder(name) is None]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        hint = ""
        if "hub" in foreign and os.path.isdir(os.path.join(given, "hub")):
            hint = f" Did you mean {os.path.join(given, 'hub')} (HF_HOME/hub)?"
        raise InvalidRequestError(
            f"{given} is not a huggingface_hub cache: it holds {shown}, which a cache never does (a cache holds only "
            f"models--*, datasets--*, spaces--* folders, blobs/, .locks/ and CACHEDIR.TAG). Give the cache folder "
            f"itself.{hint}"
        )
    return Path(os.path.realpath(given))


def scan(
    root: Path,
    *,
    layer: bool = False,
    sha256: bool = False,
    layers: Sequence[Path] = (),
    now: float | None = None,
    progress: Progress | None = None,
    only: Iterable[str] | None = None,
) -> Report:
    """Check every snapshot of the cache ``root`` (see the module docstring); no network, no write.

    ``layer``: read ``root`` as a read-only layer (by records and blob names). ``layers``: the
    read-only layers a writable cache's blobs may link into. ``now``: the clock for lease expiry
    and ages. ``only``: repo folder names to check (the others, and the shared store, are left out).
    A layer that fails while it is read (a dead mount) raises its OSError.
    """
    scanner = _Scanner(root, layer=layer, sha256=sha256, layers=layers, now=time.time() if now is None else now)
    scanner.progress = progress or Progress(None)
    return scanner.run(only)


class _Scanner:
    def __init__(self, root: Path, *, layer: bool, sha256: bool, layers: Sequence[Path], now: float) -> None:
        self.root = root
        self.layer = layer
        self.sha256 = sha256
        self.layers = tuple(layers)
        self.now = now
        self.progress = Progress(None)
        self.report = Report(root, layer, sha256, [], {}, {})
        #: Each snapshot file's bytes to hash, with its repo and commit.
        self.hasher: Hasher[tuple[RepoState, str]] = Hasher()
        self.links = _Links(root)
        self._seen: set[tuple[str, str, str, str, str]] = set()

    def run(self, only: Iterable[str] | None) -> Report:
        started = time.monotonic()
        wanted = None if only is None else set(only)
        names = sorted(name for name in list_names(self.root) if repo_of_folder(name) is not None)
        for lock in stale_locks(self.root, self.now, wanted):
            self.add(_lock_finding(lock, self.root))
        for name in names:
            if wanted is not None and name not in wanted:
                continue
            repo = RepoCache.of_folder(self.root, name)
            assert repo is not None
            if not stat.S_ISDIR(_lstat_mode(self.root / name)):
                continue
            state_ = RepoState(repo, {}, {}, set(), {})
            self.report.repos[name] = state_
            self._scan_repo(state_)
        if self.sha256:
            self._hash()
        for name in names:
            if name in self.report.repos:
                self._scan_blobs(self.report.repos[name])
        if wanted is None:
            self._scan_store()
        sort_findings(self.report.findings)
        self.report.seconds = time.monotonic() - started
        self.progress.clear()
        return self.report

    # --- findings -------------------------------------------------------------------------------
    def add(self, finding: Finding) -> None:
        # A damaged file that several commits of a repo link to is one problem (the key has no commit).
        key = (finding.kind, finding.repo_type, finding.repo_id, finding.path, finding.where)
        if finding.where and finding.kind in FILE_KINDS:
            if key in self._seen:
                return
            self._seen.add(key)
        self.report.findings.append(finding)

    def note(
        self, repo: RepoCache, kind: str, revision: str, path: str, detail: str, where: str = "", size: int = 0
    ) -> None:
        self.add(Finding(kind, repo.repo_id, repo.repo_type, revision, path, detail, where, size))

    def _file_problem(self, st: RepoState, commit: str, kind: str, path: str, detail: str, where: str = "") -> None:
        st.damaged.setdefault(commit, {})[path] = kind
        self.note(st.repo, kind, commit, path, detail, where)

    # --- one repo -------------------------------------------------------------------------------
    def _scan_repo(self, st: RepoState) -> None:
        repo = st.repo
        refs = self._scan_refs(st)
        commits = _commits(repo, self.layer)
        for commit in sorted(commits):
            snap = SnapshotState(commit, tuple(sorted(refs.get(commit, ()))), "", set(), set())
            if (self._check_layer_snapshot if self.layer else self._check_snapshot)(st, snap):
                st.snapshots[commit] = snap
                if not self.layer:
                    snap.last_use = usage.last_use(repo, commit)
        # Listings of commits a ref names but no snapshot holds keep their blobs (a download in its first steps).
        for commit in set(refs) - set(st.snapshots):
            tree = self._tree(repo, commit) or {}
            st.kept.update(f.blob_name for f in tree.values())
            st.kept.update(f.xet for f in tree.values() if f.xet)
        self._scan_incomplete(st)

    def _scan_refs(self, st: RepoState) -> dict[str, list[str]]:
        """Each ref file: ``bad-ref`` when empty, a link, or not a commit; the refs naming each commit."""
        repo = st.repo
        named: dict[str, list[str]] = {}
        for name, path in walk_entries(repo.root / "refs"):
            try:
                mode = os.lstat(path).st_mode
                if stat.S_ISLNK(mode):
                    problem = "a symlink, not a ref file"
                elif not stat.S_ISREG(mode):
                    problem = "not a regular file"
                else:
                    with open(path, "rb") as handle:
                        data = handle.read(256)
                    text = data.decode("ascii", errors="replace").strip()
                    if is_commit(text):
                        named.setdefault(text, []).append(name)
                        continue
                    problem = "empty" if not data else f"holds {count(len(data), 'byte')} that are not a commit id"
            except OSError as error:
                self._dead(error)
                problem = f"unreadable ({error.strerror})"
            self.note(repo, "bad-ref", name, f"refs/{name}", problem, str(path))
        return named

    def _raw_tree(self, repo: RepoCache, commit: str) -> dict[str, dict[str, Any]] | None:
        """huggingface_hub's cached listing of ``commit``, entries as its JSON has them, or None."""
        # The client keeps the listings it read in memory: one removed since is no listing.
        if not stat.S_ISREG(_lstat_mode(repo.tree_cache(commit))):
            return None
        try:
            # The disk as it is, read by hand in the known format (no client module, no in-memory copy);
            # through the client's own code otherwise (a format of another release).
            return repo.listings.read_file(commit) or repo.listings.read(commit)
        except OSError as error:
            self._dead(error)
            return None
        except HfSnapshotError:
            return None

    def _tree(self, repo: RepoCache, commit: str) -> dict[str, ExpectedFile] | None:
        return _parsed(repo, self._raw_tree(repo, commit))

    def _records(self, repo: RepoCache, commit: str) -> dict[str, ExpectedFile]:
        try:
            return state.vouched(repo, commit)
        except OSError as error:
            self._dead(error)
            return {}

    def _check_snapshot(self, st: RepoState, snap: SnapshotState) -> bool:
        """A snapshot folder of a writable cache, read through its links."""
        repo, commit = st.repo, snap.commit
        folder = repo.snapshot_dir(commit)
        if not stat.S_ISDIR(_lstat_mode(folder)):
            detail = f"snapshots/{commit} is not a folder (a symlink or a file): not checked"
            self.note(repo, "unverifiable", commit, "", detail, str(folder))
            return False
        snapshot_dir = str(folder)
        present = _names_below(snapshot_dir)
        records = self._records(repo, commit)
        raw = self._raw_tree(repo, commit)
        tree = _parsed(repo, None if raw is None else {p: raw[p] for p in present if p not in records and p in raw})
        if raw is not None and tree is None:
            raw = None  # an entry that cannot be trusted: the listing is not used at all
        snap.listing = "record" if records else "tree" if raw is not None else ""
        expected: dict[str, ExpectedFile] = {**records, **(tree or {})}
        unlisted = [name for name in present if name not in expected]
        for info in (raw or {}).values():
            snap.blobs.add(str(info.get("lfs_sha256") or info.get("blob_id")))
            if info.get("xet_hash"):
                snap.xets.add(str(info["xet_hash"]))
        for name in unlisted:
            blob = linked_blob_name(snapshot_dir, name)
            if blob is not None:
                snap.blobs.add(blob)
            link = os.path.join(snapshot_dir, name)
            if os.path.islink(link) and not os.path.exists(link):
                self._file_problem(st, commit, "dangling-link", name, "the link leads nowhere", link)
        if not snap.listing:
            self.note(repo, "unverifiable", commit, "", NO_LISTING)
            return True
        for name in unlisted:
            self.note(repo, "unverifiable", commit, name, "no listing of the commit names it")
        blobs = f"{repo.blobs}/"
        for f in expected.values():
            self.report.files += 1
            if self.report.files % 256 == 0:
                self._tick()
            path = self.links.fast_bytes(blobs, snapshot_dir, f)
            if path is None:
                f, path = self._slow_check(st, snap, snapshot_dir, f)
                if path is None:
                    continue
            snap.blobs.add(f.blob_name)
            if f.xet:
                snap.xets.add(f.xet)
            self.report.bytes += f.size
            if self.sha256:
                self.hasher.add(path, f, (st, commit))
        return True

    def _slow_check(
        self, st: RepoState, snap: SnapshotState, snapshot_dir: str, f: ExpectedFile
    ) -> tuple[ExpectedFile, str | None]:
        """:func:`check_file` of one entry; a finding when it fails. The entry (under the blob name its
        link gives, when that one holds the file) and where its bytes are, or None."""
        repo = st.repo
        problem = check_file(repo, snapshot_dir, f, self.layers)
        if problem is not None and problem.kind is ProblemKind.OTHER_BLOB:
            linked = linked_blob_name(snapshot_dir, f.path)
            if linked is not None:
                candidate = f._replace(blob=linked)
                again = check_file(repo, snapshot_dir, candidate, self.layers)
                if again is None or again.kind is not ProblemKind.OTHER_BLOB:
                    f, problem = candidate, again
        if problem is None:
            return f, _bytes_path(repo, snapshot_dir, f)
        snap.blobs.add(f.blob_name)
        if f.xet:
            snap.xets.add(f.xet)
        kind, detail = _describe(problem, f, listed_by=snap.listing)
        self._file_problem(st, snap.commit, kind, f.path, detail, _bytes_path(repo, snapshot_dir, f))
        return f, None

    def _check_layer_snapshot(self, st: RepoState, snap: SnapshotState) -> bool:
        """A commit of a layer, read by its records and blob names (never through ``snapshots/`` links)."""
        repo, commit = st.repo, snap.commit
        records = self._records(repo, commit)
        tree = self._tree(repo, commit)
        snap.listing = "record" if records else "tree" if tree is not None else ""
        if not snap.listing:
            self.note(repo, "unverifiable", commit, "", NO_LISTING)
            return True
        expected: dict[str, tuple[ExpectedFile, bool]] = {path: (f, True) for path, f in records.items()}
        for path, f in (tree or {}).items():
            expected.setdefault(path, (f, False))
            snap.blobs.add(f.blob_name)
            if f.xet:
                snap.xets.add(f.xet)
        for f, required in expected.values():
            file, problem = _layer_bytes(repo, self.root, f)
            if file is None and problem is None:
                if required:
                    self.report.files += 1
                    where = f"blobs/{f.blob_name}" + (f" nor the shared-store file {f.xet[:12]}" if f.xet else "")
                    self._file_problem(
                        st, commit, "missing", f.path, f"not in the layer: neither {where} (the record lists it)"
                    )
                continue  # not part of the selection this layer holds
            self.report.files += 1
            if self.report.files % 256 == 0:
                self._tick()
            snap.blobs.add(f.blob_name)
            if f.xet:
                snap.xets.add(f.xet)
            if problem is not None:
                kind, detail = _describe(problem, f, listed_by=snap.listing)
                self._file_problem(st, commit, kind, f.path, detail, str(file or ""))
                continue
            assert file is not None
            self.report.bytes += f.size
            if self.sha256:
                self.hasher.add(str(file), f, (st, commit))
        return True

    def _scan_incomplete(self, st: RepoState) -> None:
        repo = st.repo
        for name in list_names(repo.blobs):
            match = INCOMPLETE_RE.match(name) if name.endswith(".incomplete") else None
            if match is None:
                continue
            path = repo.blobs / name
            try:
                info = os.lstat(path)
            except OSError as error:
                self._dead(error)
                continue
            if not self.layer and lock_held(repo.blob_lock(match.group("etag")), self.now):
                self.report.in_flight += 1
                continue
            age = human_age(self.now - info.st_mtime)
            detail = f"an unfinished download ({human_size(info.st_size)}, {age} old) nobody is writing"
            self.note(repo, "incomplete", "", f"blobs/{name}", detail, str(path), info.st_size)

    def _scan_blobs(self, st: RepoState) -> None:
        """Every entry of the repo's ``blobs/``: what it holds, and ``unreferenced-blob`` for those nothing uses."""
        repo = st.repo
        used = set(st.kept)
        for snap in st.snapshots.values():
            used |= snap.blobs
        blobs = f"{repo.blobs}/"
        for entry in _entries(repo.blobs):
            name = entry.name
            if name.startswith(".") or (name.endswith(".incomplete") and INCOMPLETE_RE.match(name)):
                continue  # a download in flight, or a temporary file of the client's or ours
            blob_name = name[: -len(_RCLONE_LINK)] if self.layer and name.endswith(_RCLONE_LINK) else name
            try:
                if entry.is_symlink():
                    blob = Blob(blob_name, 0, None if self.layer else _xet_of(self.links.store_of(blobs, name)))
                elif entry.is_file(follow_symlinks=False):
                    unused = blob_name not in used
                    blob = Blob(blob_name, entry.stat(follow_symlinks=False).st_size if unused else None)
                else:
                    continue
            except OSError as error:
                self._dead(error)
                continue
            st.blobs[blob_name] = blob
            if blob_name in used:
                continue
            what = "a link into the shared store" if blob.store else human_size(blob.size or 0)
            detail = f"{what} that no snapshot uses"
            self.note(repo, "unreferenced-blob", "", f"blobs/{name}", detail, entry.path, blob.size or 0)

    # --- the shared store and the locks ------------------------------------------------------------
    def _scan_store(self) -> None:
        """The shared store's files (``unreferenced-blob`` when no used repo blob or listing names them)
        and its lock markers."""
        used: set[str] = set()
        for st in self.report.repos.values():
            used |= {x for x in st.kept if XET_HASH_RE.fullmatch(x)}
            live = set(st.kept)
            for snap in st.snapshots.values():
                used |= snap.xets
                live |= snap.blobs
            used |= {b.store for b in st.blobs.values() if b.store is not None and b.name in live}
        store_dir = self.root / STORE_DIR
        for prefix in list_names(store_dir):
            folder = store_dir / prefix
            if len(prefix) != 2 or not stat.S_ISDIR(_lstat_mode(folder)):
                continue
            for name in list_names(folder):
                path = folder / name
                if name.endswith((".lock", ".lock.soft")):
                    for lock in stale_marker(path, "stale-lock", self.now):
                        self.add(_lock_finding(lock, self.root))
                    continue
                if not XET_HASH_RE.fullmatch(name) or not name.startswith(prefix):
                    continue
                try:
                    info = os.lstat(path)
                except OSError as error:
                    self._dead(error)
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue
                self.report.store[name] = info.st_size
                if name in used:
                    continue
                self.add(
                    Finding(
                        "unreferenced-blob",
                        "",
                        "",
                        "",
                        f"{STORE_DIR}/{prefix}/{name}",
                        f"{human_size(info.st_size)} in the shared store that no snapshot uses",
                        str(path),
                        info.st_size,
                    )
                )

    # --- hashing ----------------------------------------------------------------------------------
    def _hash(self) -> None:
        """Hash every snapshot file's bytes once; ``wrong-hash`` (``missing`` when unreadable) for each that fails."""
        self.report.hashed, failures = self.hasher.run(self.progress.show)
        for failure in failures:
            self._file_problem(*failure.user, *_hash_problem(failure, self.root))

    def _tick(self) -> None:
        self.progress.show(f"hfsnapshot doctor: checked {count(self.report.files, 'file')}")

    def _dead(self, error: OSError) -> None:
        if self.layer and error.errno in DEAD_ERRNOS:
            raise error


class _Links:
    """huggingface_hub's links of a writable cache, read the quick way: snapshot entry -> repo blob ->
    shared-store file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        #: Store folders found to be real folders (no link on the way), by path.
        self._real: dict[str, bool] = {}

    def fast_bytes(self, blobs: str, snapshot_dir: str, f: ExpectedFile) -> str | None:
        """The file holding ``f``'s bytes when its entry is as huggingface_hub writes it and of the listed
        size (a link to ``blobs/<name>``, a regular blob or one linking into the shared store); else None.
        ``blobs``: the repo's blob folder, ending with ``/``."""
        name = f.blob or f.etag
        path = f.path
        try:
            if os.readlink(f"{snapshot_dir}/{path}") != "../" * (path.count("/") + 2) + "blobs/" + name:
                return None
            info = os.lstat(blobs + name)
            if stat.S_ISREG(info.st_mode):
                return blobs + name if info.st_size == f.size else None
            if not stat.S_ISLNK(info.st_mode):
                return None
            store = self.store_of(blobs, name)
            if store is None or (f.xet and not store.endswith(f.xet)):
                return None
            info = os.lstat(store)
        except OSError:
            return None
        return store if stat.S_ISREG(info.st_mode) and info.st_size == f.size else None

    def store_of(self, blobs: str, name: str) -> str | None:
        """The shared-store file a repo blob links to (``blobs/<xx>/<xet hash>`` of this cache, reached
        through no other link), or None."""
        target = os.path.normpath(os.path.join(blobs, os.readlink(blobs + name)))
        folder, xet = os.path.split(target)
        if not XET_HASH_RE.fullmatch(xet) or folder != f"{self.root}/{STORE_DIR}/{xet[:2]}":
            return None
        real = self._real.get(folder)
        if real is None:
            real = self._real[folder] = os.path.realpath(folder) == folder
        return target if real else None


def repo_folder(finding: Finding) -> str:
    """The repo folder name (``models--org--name``) a finding is about; empty for the shared store."""
    return repo_folder_name(finding.repo_id, finding.repo_type) if finding.repo_id else ""


def sort_findings(findings: list[Finding]) -> None:
    """Put findings in the report's order: repo by repo (the shared store last), kinds in :data:`KINDS` order."""
    findings.sort(key=_order)


# --- helpers -------------------------------------------------------------------------------------


def _commits(repo: RepoCache, layer: bool) -> set[str]:
    """The commits to check: snapshot folders; in a layer also those of records and listings."""
    found = {name for name in list_names(repo.root / "snapshots") if is_commit(name)}
    if layer:
        found.update(name.split(".", 1)[0] for name in list_names(repo.records_dir) if name.endswith(".json"))
        found.update(name[: -len(".json")] for name in list_names(repo.root / "trees") if name.endswith(".json"))
        found = {commit for commit in found if is_commit(commit)}
    return found


def _lock_finding(lock: StaleLock, root: Path) -> Finding:
    """The finding of a lock file whose holder is gone (of no repo when its folder name is none)."""
    found = repo_of_folder(lock.folder)
    repo_id, repo_type = (found[1], found[0]) if found else ("", "")
    relative = lock.path.relative_to(root).as_posix()
    return Finding(lock.kind, repo_id, repo_type, "", relative, lock.reason, str(lock.path))


def _hash_problem(failure: Failure[tuple[RepoState, str]], root: Path) -> tuple[str, str, str, str]:
    """The kind, path, words and file of a snapshot file whose contents failed (``missing`` when unreadable)."""
    f = failure.file
    if failure.error is not None:
        return "missing", f.path, f"unreadable ({failure.error})", failure.path
    what = "sha256" if f.lfs else "git-sha1"
    detail = f"{what} mismatch: the contents are not the listing's ({_short(failure.path, root)})"
    return "wrong-hash", f.path, detail, failure.path


def _describe(problem: Problem, f: ExpectedFile, *, listed_by: str) -> tuple[str, str]:
    """The doctor's kind and words for a problem :func:`check_file` found."""
    kind = problem.kind
    if kind is ProblemKind.MISSING:
        return "missing", "not in the snapshot" + (" (the record lists it)" if listed_by == "record" else "")
    if kind is ProblemKind.DANGLING_LINK:
        gone = {
            Entry.BLOB: f"its blob blobs/{f.blob_name}",
            Entry.STORE: f"the shared-store file {f.xet[:12] or 'it links to'}",
            Entry.LAYER: "the layer file its blob links to",
        }.get(problem.at, "what it leads to")
        return "dangling-link", f"{gone} is gone"
    if kind is ProblemKind.LINK_OUTSIDE:
        return "dangling-link", f"the link leads to {problem.found}, outside the repo's blobs/"
    if kind is ProblemKind.BLOB_LINK_OUTSIDE:
        return "dangling-link", (
            f"its blob blobs/{f.blob_name} links to {problem.found}, neither into the shared store nor into a "
            "configured cache layer"
        )
    if kind is ProblemKind.OTHER_BLOB:
        return "dangling-link", f"the link points at {problem.found}, not at a blob of the repo holding the file"
    if kind is ProblemKind.OTHER_STORE_FILE:
        return "wrong-hash", problem.describe()
    if kind is ProblemKind.WRONG_SIZE:
        where = f" ({problem.at.value})" if problem.at.value else ""
        return "wrong-size", f"{count(int(problem.found), 'byte')} instead of {problem.wanted}{where}"
    if kind is ProblemKind.NOT_REGULAR:
        return "missing", "not a regular file" + (f" ({problem.at.value})" if problem.at.value else "")
    if kind is ProblemKind.WRONG_HASH:
        return "wrong-hash", problem.describe()
    return "missing", problem.describe()


def _bytes_path(repo: RepoCache, snapshot_dir: str, f: ExpectedFile) -> str:
    """The file holding a snapshot file's bytes: the repo blob, or the store or layer file it links to."""
    link = os.path.join(snapshot_dir, f.path)
    if not os.path.islink(link):
        return link
    blob = os.path.join(repo.blobs, f.blob_name)
    try:
        target = os.readlink(blob)
    except OSError:
        return blob
    return os.path.normpath(os.path.join(repo.blobs, target))


def _layer_bytes(repo: RepoCache, root: Path, f: ExpectedFile) -> tuple[Path | None, Problem | None]:
    """The layer file holding ``f``'s bytes, by name (its repo blob, else its store file), or None and
    why the places it could be failed (None when it is simply not there). A dead layer raises."""
    problem: Problem | None = None
    for path in repo.bytes_in(root, f.blob_name, f.xet):
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            if error.errno in DEAD_ERRNOS:
                raise
            problem = Problem(ProblemKind.UNREADABLE, f.path, reason=str(error.strerror))
            continue
        if stat.S_ISLNK(info.st_mode):
            continue  # the layer's own link into its store: the store file is the next place
        if not stat.S_ISREG(info.st_mode):
            return path, Problem(ProblemKind.NOT_REGULAR, f.path, Entry.LAYER)
        if info.st_size != f.size:
            return path, Problem(
                ProblemKind.WRONG_SIZE, f.path, Entry.LAYER, found=str(info.st_size), wanted=str(f.size)
            )
        return path, None
    return None, problem


def _order(finding: Finding) -> tuple[bool, str, str, str, int, str]:
    """Repo by repo (the shared store last), each snapshot's findings together, kinds in :data:`KINDS` order."""
    return (
        not finding.repo_id,
        finding.repo_type,
        finding.repo_id,
        finding.revision if is_commit(finding.revision) else "",
        KINDS.index(finding.kind),
        finding.path,
    )


def _parsed(repo: RepoCache, raw: dict[str, dict[str, Any]] | None) -> dict[str, ExpectedFile] | None:
    """Listing entries parsed (see :func:`~pytest_hfsnapshot.core.engine.listing.parse`); None when one
    cannot be trusted."""
    if raw is None:
        return None
    if not raw:
        return {}
    # Imported here: the listing module brings the engine and the client's API, which a scan of a cache
    # the plugin recorded never needs.
    from ..engine import listing

    try:
        return listing.parse(repo, raw)
    except (HfSnapshotError, KeyError, TypeError, ValueError):
        return None


def _xet_of(store: str | None) -> str | None:
    return None if store is None else os.path.basename(store)


def _names_below(folder: str, prefix: str = "") -> list[str]:
    """The relative paths (``/``-separated) of every entry below ``folder`` that is not a folder, links
    included and never followed."""
    out: list[str] = []
    for entry in _entries(folder):
        if entry.is_dir(follow_symlinks=False):
            out += _names_below(entry.path, f"{prefix}{entry.name}/")
        else:
            out.append(prefix + entry.name)
    return out


def _entries(folder: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` in the order the filesystem gives (the report sorts its findings)."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def walk_entries(folder: Path) -> Iterator[tuple[str, Path]]:
    """Every entry below ``folder`` that is not a folder (links included, never followed): relative
    path (``/``-separated) and path, sorted."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            for name, path in walk_entries(Path(entry.path)):
                yield f"{entry.name}/{name}", path
        else:
            yield entry.name, Path(entry.path)


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _short(path: str, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return path


__all__ = [
    "CACHE_ROOT_NAMES",
    "FILE_KINDS",
    "KINDS",
    "NOW_ENV",
    "UNCOUNTED",
    "Finding",
    "Progress",
    "RepoState",
    "Report",
    "SnapshotState",
    "list_names",
    "now_from_env",
    "open_cache",
    "repo_folder",
    "scan",
    "sort_findings",
    "walk_entries",
]
