"""Repair of one repo's cache: inspect a snapshot, adopt what is right, remove exactly what is damaged.

Every removal stays inside the repo's folder, never follows a symlink, and runs under the
client's own lock of that blob."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from ...errors import UnsafeCacheError
from .layers import Layers
from .layout import RepoCache
from .verify import ExpectedFile, Problem, ProblemKind, check_file, hash_mismatches, hash_problem, linked_blob_name

if TYPE_CHECKING:
    from .locking import HeldCheck

log = logging.getLogger("pytest_hfsnapshot")


@dataclasses.dataclass(frozen=True)
class Findings:
    """What :meth:`Repairer.inspect` found in a cached snapshot."""

    #: Why each file is not usable as cached, by path.
    problems: dict[str, Problem]
    #: Files found right under a blob name other than the listing's (see :meth:`Repairer.adopted`).
    adopted: dict[str, ExpectedFile]
    #: Whether a link or file planted where a snapshot folder belongs was removed.
    planted: bool


@dataclasses.dataclass(frozen=True)
class Cleared:
    """What :meth:`Repairer.clear` removed."""

    #: The paths whose damage was removed.
    repaired: list[str]
    #: Whether unfinished downloads (``.incomplete`` blobs) were in the repo's blob folder.
    orphans: bool


class Repairer:
    """Inspection and removal for one repo of the cache (``label`` names it in logs and errors)."""

    def __init__(self, repo: RepoCache, label: str, *, lock_timeout: float, layers: Layers | None = None) -> None:
        self.repo = repo
        self.label = label
        self.lock_timeout = lock_timeout
        #: The read-only layers whose files the repo's blobs may link to (see :func:`check_file`).
        self.layers = layers

    def _layer_roots(self) -> tuple[Path, ...]:
        return self.layers.roots if self.layers is not None else ()

    # --- inspection -----------------------------------------------------------------------------
    def inspect(self, commit: str, files: list[ExpectedFile], *, hash_all: bool) -> Findings:
        """What is wrong with the cached snapshot; removes planted links inside it first (see :meth:`folders`)."""
        _, planted = self.folders(commit, files, repair=True)
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        problems: dict[str, Problem] = {}
        adopted: dict[str, ExpectedFile] = {}
        layers = self._layer_roots()
        for f in files:
            problem = check_file(self.repo, snapshot_dir, f, layers)
            if problem is None:
                continue
            candidate = self.adopted(commit, f) if problem.kind is ProblemKind.OTHER_BLOB else None
            if candidate is not None:
                adopted[f.path] = candidate
            else:
                problems[f.path] = problem
        if hash_all:
            kept = {f.path: f for f in files if f.path not in problems and f.path not in adopted}
            for path in hash_mismatches(self.blob_pairs(commit, list(kept.values()))):
                problems[path] = hash_problem(kept[path])
        return Findings(problems, adopted, planted)

    def adopted(self, commit: str, f: ExpectedFile) -> ExpectedFile | None:
        """``f`` under the blob name its link points at, if that blob's contents have the listing's hash.

        The Hub's ETag of a small file is its git blob sha1, the listing's ``oid``; a server whose
        ETag differs makes the client name the blob after that ETag instead. The contents decide.
        """
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        name = linked_blob_name(snapshot_dir, f.path)
        if name is None or name == f.blob_name:
            return None
        candidate = f._replace(blob=name)
        if check_file(self.repo, snapshot_dir, candidate, self._layer_roots()) is not None:
            return None
        if hash_mismatches([(candidate, self.repo.blob(name))]):
            return None
        return candidate

    def folders(self, commit: str, files: list[ExpectedFile], *, repair: bool = False) -> tuple[bool, bool]:
        """``(safe, planted)``: the repo's folders and the snapshot's subfolders are real folders, and
        whether ``repair`` removed a planted link or file where a snapshot subfolder belongs.

        huggingface_hub never makes a snapshot subfolder a symlink, so with ``repair`` such a
        planted link is removed (the link itself, never what it points at). The repo folder,
        ``blobs/`` and ``snapshots/`` are not ours to remove: a link there is refused.
        """
        root = str(self.repo.root)
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        parents = {""}
        for f in files:
            parent = f.path.rpartition("/")[0]
            while parent and parent not in parents:
                parents.add(parent)
                parent = parent.rpartition("/")[0]
        fixed = [root, os.path.join(root, "blobs"), os.path.join(root, "snapshots")]
        inner = sorted(os.path.join(snapshot_dir, p) if p else snapshot_dir for p in parents)
        planted = False
        for folder in fixed + inner:
            try:
                st = os.lstat(folder)
            except FileNotFoundError:
                continue
            except OSError:
                return False, planted
            if stat.S_ISDIR(st.st_mode):
                continue
            if not repair:
                return False, planted
            kind = "symlink" if stat.S_ISLNK(st.st_mode) else "file"
            if folder in fixed:
                raise UnsafeCacheError(
                    f"{folder} in the cache is a {kind}, not a folder. Refusing to write through it: "
                    f"delete {root} and run again.",
                    repo_id=self.repo.repo_id,
                )
            log.warning("hfsnapshot: removing the %s %s planted inside %s", kind, folder, self.label)
            self.repo.require_inside(Path(folder).parent)
            os.unlink(folder)
            planted = True
        return True, planted

    def blob_pairs(self, commit: str, files: list[ExpectedFile]) -> list[tuple[ExpectedFile, Path]]:
        """Each file with the path its bytes are read from (its blob, or the file itself when not a link)."""
        snapshot_dir = self.repo.snapshot_dir(commit)
        out = []
        for f in files:
            link = snapshot_dir / f.path
            out.append((f, self.repo.blob(f.blob_name) if link.is_symlink() else link))
        return out

    # --- removal --------------------------------------------------------------------------------
    def remove(self, commit: str, f: ExpectedFile, problem: Problem) -> None:
        """Remove what ``problem`` makes bad: the link, and its blob when the bytes are at fault
        (:attr:`Problem.blob_damaged`); never following a symlink, only inside the repo folder.

        Where the blob is a link into the shared blob store, see :meth:`_unlink_from_store`.
        """
        link = self.repo.snapshot_dir(commit) / f.path
        self.repo.require_inside(link.parent)
        with self.blob_lock(f.blob_name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(link)
            if problem.blob_damaged:
                self.repo.require_inside(self.repo.blobs)
                store = self.repo.store.target(f.blob_name)
                if store is not None:
                    self._unlink_from_store(store, f)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.repo.blob(f.blob_name))

    def clear(
        self, held: HeldCheck, commit: str, files: list[ExpectedFile], problems: Mapping[str, Problem]
    ) -> Cleared:
        """Remove what ``problems`` makes bad before the files are fetched again, checking ``held``
        before each removal. A file simply not downloaded yet (no blob, no unfinished download of
        it) has nothing to remove."""
        blobs_before = blob_names(self.repo.blobs)
        orphans = self.repo.incomplete.found()
        interrupted = {p.name.split(".", 1)[0] for p in orphans}
        repaired: list[str] = []
        for f in files:
            problem = problems.get(f.path)
            if problem is None:
                continue
            if (
                problem.kind is ProblemKind.MISSING
                and f.blob_name not in blobs_before
                and f.blob_name not in interrupted
            ):
                continue  # simply not downloaded yet
            repaired.append(f.path)
            held()
            self.remove(commit, f, problem)
        return Cleared(repaired, bool(orphans))

    def _unlink_from_store(self, store: Path, f: ExpectedFile) -> None:
        """Remove the repo's link into the shared blob store, and the store file if it is damaged.

        All under huggingface_hub's lock for that store entry, as the client links and collects
        there. The store file is checked again under the lock: another process may have put a
        good copy there meanwhile, and a good store file serves other repos, so it stays. A bad
        one is unlinked, never written (it is read-only by design), so that the client fetches it
        again instead of linking it anew. The entry's ``.refs`` manifest loses this repo's line,
        which the client writes back when it links the repo again.
        """
        lock = FileLock(str(self.repo.store.lock(store)), mode=0o666, timeout=self.lock_timeout, is_singleton=False)
        with lock:
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(store)
                damaged = stat.S_ISREG(st.st_mode) and (st.st_size != f.size or bool(hash_mismatches([(f, store)])))
                if damaged:
                    log.info("hfsnapshot: removing the damaged shared blob %s of %s", store, self.label)
                    os.unlink(store)
            self.repo.store.drop_reference(store, f.blob_name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.repo.blob(f.blob_name))

    def remove_orphans(self) -> None:
        """Delete the repo's ``.incomplete`` blobs that nobody is writing, each under the client's blob lock.

        Every orphan of the repo goes, not only those of the selected files: a killed download
        of a file this request does not need is still debris nobody will ever resume.
        """
        for path in self.repo.incomplete.found():
            etag = path.name.split(".", 1)[0]
            try:
                with self.blob_lock(etag, timeout=0):
                    self.repo.require_inside(path.parent)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            except Timeout:
                log.info("hfsnapshot: %s is being downloaded by another process; leaving it", path.name)

    def blob_lock(self, etag: str, timeout: float | None = None) -> FileLock:
        """huggingface_hub's own per-blob lock (``.locks/<repo>/<etag>.lock``)."""
        path = self.repo.blob_lock(etag)
        self.repo.make_folders(path.parent)
        return FileLock(str(path), timeout=self.lock_timeout if timeout is None else timeout, is_singleton=False)


def blob_names(blobs: Path) -> set[str]:
    """The names in a repo's blob folder (none when it cannot be read)."""
    try:
        return set(os.listdir(blobs))
    except OSError:
        return set()


__all__ = ["Cleared", "Findings", "Repairer", "blob_names"]
