"""What ``doctor --repair`` and ``--prune-unused`` change, from a scan's report.

Repair fetches again through the engine; each removal is of one entry inside the cache, under the
lock its writers take, and leaves alone what a live process may be writing."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import HfSnapshotError, InvalidRequestError, LockTimeoutError
from ...request import SnapshotRequest, is_commit, repo_path
from ...settings import Settings, VerifyMode
from ..cache import state, usage
from ..cache.formats import count, human_size
from ..cache.layout import RepoCache, read_json, repo_of_folder, store_file
from ..cache.verify import linked_blob_name
from ..hub import outage
from .locks import holder_gone
from .scan import Finding, Report, RepoState, list_names, scan, walk_entries

if TYPE_CHECKING:
    from filelock import FileLock

# The locks (filelock) and the engine's repair are imported where they are used: a check alone, the
# command's common case, needs neither.

#: Blob locks held at once while a repo's unused blobs are removed (each is a file descriptor).
_BATCH = 256
_FNMATCH_SPECIAL = re.compile(r"([*?\[])")


@dataclasses.dataclass(frozen=True)
class Action:
    """One thing done, or for a dry run to be done: ``what`` is ``repaired``, ``removed``, ``pruned``,
    ``would-prune``, ``would-remove``, ``failed`` or ``skipped``."""

    what: str
    target: str
    detail: str
    size: int = 0
    #: The snapshot a repair made whole: (repo folder name, commit).
    snapshot: tuple[str, str] = ("", "")

    def line(self) -> str:
        return f"{self.what:<12} {self.target}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.what, "target": self.target, "detail": self.detail, "bytes": self.size}


@dataclasses.dataclass(frozen=True)
class Stale:
    """A snapshot prune removes: the repo folder's name, the commit, its last use, the bytes it alone frees."""

    folder: str
    commit: str
    label: str
    last_use: float
    size: int

    def to_json(self) -> dict[str, Any]:
        repo_type, repo_id = repo_of_folder(self.folder) or ("", "")
        used = datetime.fromtimestamp(self.last_use, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"repo": repo_id, "repo_type": repo_type, "revision": self.commit, "last_used": used, "bytes": self.size}


# --- repair --------------------------------------------------------------------------------------


def repair(report: Report, *, layers: Sequence[Path], lock_timeout: float, now: float) -> list[Action]:
    """Fetch the damaged files again (through the engine), then remove the debris a fresh scan finds."""
    actions: list[Action] = []
    session = "doctor-" + uuid.uuid4().hex[:16]
    try:
        for st in report.repos.values():
            for commit, damaged in sorted(st.damaged.items()):
                actions += _refetch(report.root, st, commit, damaged, layers, lock_timeout, session)
        for finding in report.findings:
            if finding.kind == "bad-ref":
                actions.append(_fix_ref(report.root, finding, lock_timeout, session))
    finally:
        outage.remove(report.root, session)
    fresh = scan(report.root, layers=layers, now=now)
    left = {f.where for f in fresh.findings if f.kind == "incomplete"}
    for f in report.findings:
        if f.kind == "incomplete" and f.where not in left and not os.path.lexists(f.where):
            # The engine removes a repo's orphans once its snapshot is whole.
            actions.append(Action("removed", f.label, f"{f.path} (an unfinished download)", f.size))
    return actions + remove_debris(fresh, now=now, lock_timeout=lock_timeout)


def _refetch(
    root: Path,
    st: RepoState,
    commit: str,
    damaged: dict[str, str],
    layers: Sequence[Path],
    lock_timeout: float,
    session: str,
) -> list[Action]:
    repo = st.repo
    label = f"{repo_path(repo.repo_id, repo.repo_type)}@{commit[:12]}"
    verify: VerifyMode = "sha256" if "wrong-hash" in damaged.values() else "size"
    settings = Settings(
        cache_dir=root,
        verify=verify,
        session=session,
        cache_layers=[os.fspath(layer) for layer in layers],
        lock_timeout=lock_timeout,
    )
    # Imported here: the engine pulls in huggingface_hub's HTTP stack, which a check alone never needs.
    from ..engine.engine import materialize_request

    actions = []
    for request in _requests_for(repo, commit, set(damaged)):
        try:
            snap = materialize_request(request, settings, warn_unmatched=False)
        except HfSnapshotError as error:
            actions.append(Action("failed", label, _first_line(error)))
            continue
        fixed = sorted(path for path in damaged if path in snap.files)
        how = ", hashed" if verify == "sha256" else ""
        detail = f"{', '.join(fixed)} (verified{how}; snapshot from {snap.source})"
        actions.append(Action("repaired", label, detail, snapshot=(repo.folder_name, commit)))
    return actions


def _fix_ref(root: Path, finding: Finding, lock_timeout: float, session: str) -> Action:
    """Point a bad ref at the commit the Hub says its branch or tag names now (one revision request,
    retried as the engine retries it), under the repo's lock."""
    from ..cache.locking import RepoLock
    from ..engine.engine import resolve_revision

    repo = RepoCache(root, finding.repo_id, finding.repo_type)
    try:
        request = SnapshotRequest.build(finding.repo_id, revision=finding.revision, repo_type=finding.repo_type)
        commit = resolve_revision(request, Settings(cache_dir=root, session=session, lock_timeout=lock_timeout))
        with RepoLock(repo, timeout=lock_timeout):
            repo.refs.write(finding.revision, commit)
    except HfSnapshotError as error:
        return Action("failed", finding.label, f"{finding.path}: {_first_line(error)}")
    return Action("repaired", finding.label, f"{finding.path} -> {commit} (what the Hub says it names now)")


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _requests_for(repo: RepoCache, commit: str, paths: set[str]) -> list[SnapshotRequest]:
    """The requests that make ``paths`` of the snapshot whole again: each record's own selection that
    lists one of them (so that its record is rewritten), and, for paths no record lists, one selecting
    exactly the files the snapshot holds (a snapshot only huggingface_hub's listing knows gets a record)."""
    requests: list[SnapshotRequest] = []
    covered: set[str] = set()
    for path in repo.record_paths(commit):
        data = read_json(path)
        if not isinstance(data, dict) or data.get("version") != state.RECORD_VERSION or data.get("commit") != commit:
            continue
        files = {entry[0] for entry in data.get("files", ()) if isinstance(entry, list) and entry}
        selection = data.get("selection")
        if not files & paths or not isinstance(selection, dict):
            continue
        try:
            request = SnapshotRequest.build(
                repo.repo_id,
                revision=commit,
                repo_type=repo.repo_type,
                allow_patterns=selection.get("allow_patterns"),
                ignore_patterns=selection.get("ignore_patterns"),
                metadata_only=bool(selection.get("metadata_only", False)),
            )
        except InvalidRequestError:
            continue
        if request not in requests:
            requests.append(request)
            covered |= files
    rest = paths - covered
    if rest:
        listed = set(repo.listings.read(commit) or {})
        present = {name for name in snapshot_files(repo.snapshot_dir(commit)) if name in listed}
        chosen = sorted(present | rest)
        requests.append(
            SnapshotRequest.build(
                repo.repo_id,
                revision=commit,
                repo_type=repo.repo_type,
                allow_patterns=[_FNMATCH_SPECIAL.sub(r"[\1]", path) for path in chosen],
            )
        )
    return requests


# --- debris --------------------------------------------------------------------------------------


def remove_debris(report: Report, *, now: float, lock_timeout: float) -> list[Action]:
    """Remove the lock markers whose holder is gone, the unfinished downloads nobody writes, and the
    blobs nothing uses, that ``report`` found (each checked again under its lock)."""
    from ..cache.repair import Repairer

    actions = [
        _remove_marker(Path(f.where), f, now)
        for f in report.findings
        if f.kind in ("stale-lock", "stale-lease") and f.where
    ]
    for st in report.repos.values():
        repo = st.repo
        label = repo_path(repo.repo_id, repo.repo_type)
        mine = [f for f in report.findings if (f.repo_id, f.repo_type) == (repo.repo_id, repo.repo_type)]
        orphans = {f.where: f.size for f in mine if f.kind == "incomplete"}
        if orphans:
            Repairer(repo, label, lock_timeout=lock_timeout).remove_orphans()
            for where, size in sorted(orphans.items()):
                gone = not os.path.lexists(where)
                name = f"blobs/{os.path.basename(where)}"
                actions.append(
                    Action("removed", label, f"{name} (an unfinished download)", size)
                    if gone
                    else Action("skipped", label, f"{name}: a live process is writing it")
                )
        unused = sorted(f.path.removeprefix("blobs/") for f in mine if f.kind == "unreferenced-blob")
        if unused:
            actions += remove_unused_blobs(repo, unused, lock_timeout=lock_timeout)
    store = sorted(Path(f.where).name for f in report.findings if f.kind == "unreferenced-blob" and not f.repo_id)
    actions += remove_store_files(report.root, store)
    return actions


def _remove_marker(path: Path, finding: Finding, now: float) -> Action:
    """Remove a lock marker whose holder is gone, unless it changed since it was judged.

    It is renamed aside first: when what was renamed is not the marker judged (a new holder took the
    lock in between), it is put back, unless yet another marker is there by then.
    """
    from ..cache.locking import read_marker

    marker = read_marker(path)
    if marker is None or holder_gone(marker, now) is None:
        return Action("skipped", finding.label, f"{finding.path}: taken by a live holder since the scan")
    aside = path.with_name(f".{path.name}.doctor-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return Action("removed", finding.label, f"{finding.path} (already gone)")
    moved = read_marker(aside)
    if moved is not None and (moved.get("inode"), moved.get("token")) == (marker.get("inode"), marker.get("token")):
        os.unlink(aside)
        return Action("removed", finding.label, f"{finding.path} (a lock marker whose holder is gone)")
    with contextlib.suppress(FileExistsError):
        os.link(aside, path)
    os.unlink(aside)
    return Action("skipped", finding.label, f"{finding.path}: taken by a live holder since the scan")


def remove_unused_blobs(repo: RepoCache, names: Sequence[str], *, lock_timeout: float) -> list[Action]:
    """Remove the repo's blobs among ``names`` that nothing uses, each under the client's lock of that
    blob, checked again once the locks are held (the client links a blob only under its lock)."""
    from filelock import Timeout

    from ..cache.repair import Repairer

    label = repo_path(repo.repo_id, repo.repo_type)
    repairer = Repairer(repo, label, lock_timeout=lock_timeout)
    actions = []
    for start in range(0, len(names), _BATCH):
        with contextlib.ExitStack() as held:
            locked = []
            for name in names[start : start + _BATCH]:
                try:
                    held.enter_context(repairer.blob_lock(name, timeout=0))
                except Timeout:
                    actions.append(Action("skipped", label, f"blobs/{name}: a live process holds its lock"))
                    continue
                locked.append(name)
            used = blobs_in_use(repo)
            for name in locked:
                if name in used:
                    continue
                size = _unlink_blob(repo, name, lock_timeout)
                if size is not None:
                    actions.append(Action("removed", label, f"blobs/{name} (no snapshot uses it)", size))
    return actions


def blobs_in_use(repo: RepoCache) -> set[str]:
    """Every blob name a snapshot of the repo links to, or a listing or record of one of its snapshots
    (or of a commit a ref names) lists: what must stay."""
    used: set[str] = set()
    commits = {name for name in list_names(repo.root / "snapshots") if is_commit(name)}
    for commit in commits:
        folder = repo.snapshot_dir(commit)
        for name in snapshot_files(folder):
            blob = linked_blob_name(str(folder), name)
            if blob is not None:
                used.add(blob)
        used.update(f.blob_name for f in state.vouched(repo, commit).values())
    for _, path in walk_entries(repo.root / "refs"):
        with contextlib.suppress(OSError):
            text = path.read_text(encoding="ascii", errors="replace").strip()
            if is_commit(text):
                commits.add(text)
    for commit in commits:
        for info in (repo.listings.read(commit) or {}).values():
            used.add(str(info.get("lfs_sha256") or info.get("blob_id")))
    return used


def _unlink_blob(repo: RepoCache, name: str, lock_timeout: float) -> int | None:
    """Remove ``blobs/<name>`` (call under its lock); its bytes, or None when it was gone already.

    A link into the shared store leaves the store entry's manifest first, under the entry's lock.
    """
    repo.require_inside(repo.blobs)
    path = repo.blob(name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    store = repo.store.target(name) if stat.S_ISLNK(info.st_mode) else None
    if store is not None:
        with _store_lock(store, lock_timeout):
            repo.store.drop_reference(store, name)
            os.unlink(path)
        return 0
    os.unlink(path)
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def remove_store_files(root: Path, names: Iterable[str]) -> list[Action]:
    """Remove shared-store files that no repo blob links to, each under the store entry's lock, checked
    there against its manifest (the client adds a line there before it links a repo blob)."""
    from filelock import Timeout

    actions = []
    for xet in names:
        store = store_file(root, xet)
        target = f"blobs/{xet[:2]}/{xet}"
        try:
            with _store_lock(store, 0):
                if _store_linked(root, store):
                    continue
                info = os.lstat(store)
                if not stat.S_ISREG(info.st_mode):
                    continue
                os.unlink(store)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(store.with_name(f"{xet}.refs"))
        except Timeout:
            actions.append(Action("skipped", "shared store", f"{target}: a live process holds its lock"))
            continue
        except FileNotFoundError:
            continue
        actions.append(Action("removed", "shared store", f"{target} (no snapshot uses it)", info.st_size))
    return actions


def _store_lock(store: Path, timeout: float) -> FileLock:
    # The client's lock of a store entry, in its mode: every user of a shared cache takes it.
    from filelock import FileLock

    return FileLock(str(store.with_name(f"{store.name}.lock")), mode=0o666, timeout=timeout, is_singleton=False)


def _store_linked(root: Path, store: Path) -> bool:
    """Whether a repo blob the store entry's manifest names is a link to it."""
    try:
        lines = store.with_name(f"{store.name}.refs").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError):
        return False
    for line in lines:
        parts = line.split("/")
        if len(parts) != 3 or parts[1] != "blobs" or any(p in ("", ".", "..") for p in parts):
            continue
        link = root.joinpath(*parts)
        with contextlib.suppress(OSError):
            if os.path.normpath(os.path.join(link.parent, os.readlink(link))) == str(store):
                return True
    return False


# --- prune ---------------------------------------------------------------------------------------


def stale_snapshots(report: Report, *, days: float, now: float) -> list[Stale]:
    """The snapshots whose last recorded use is older than ``days`` before ``now``, each with the bytes
    removing it frees: blobs and store files no other snapshot keeps, each counted once."""
    cutoff = now - days * 86400
    stale = {
        (folder, commit)
        for folder, st in report.repos.items()
        for commit, snap in st.snapshots.items()
        if snap.last_use is not None and snap.last_use < cutoff
    }
    kept: dict[str, set[str]] = {}
    kept_store: set[str] = set()
    for folder, st in report.repos.items():
        kept[folder] = set(st.kept)
        kept_store |= st.kept
        for commit, snap in st.snapshots.items():
            if (folder, commit) not in stale:
                kept[folder] |= snap.blobs
                kept_store |= snap.xets
        kept_store |= {b.store for b in st.blobs.values() if b.store is not None and b.name in kept[folder]}
    out = []
    counted: set[tuple[str, str]] = set()
    for folder, commit in sorted(stale):
        st = report.repos[folder]
        snap = st.snapshots[commit]
        size = 0
        stores = {x for x in snap.xets if x not in kept_store}
        for name in sorted(snap.blobs - kept[folder]):
            blob = st.blobs.get(name)
            if blob is None or (folder, name) in counted:
                continue
            counted.add((folder, name))
            size += blob.size if blob.size is not None else _size(st.repo.blob(name))
            if blob.store is not None and blob.store not in kept_store:
                stores.add(blob.store)
        for xet in sorted(stores):
            if ("", xet) not in counted and xet in report.store:
                counted.add(("", xet))
                size += report.store[xet]
        refs = f" ({', '.join(snap.refs)})" if snap.refs else ""
        label = f"{repo_path(st.repo.repo_id, st.repo.repo_type)}@{commit[:12]}{refs}"
        assert snap.last_use is not None
        out.append(Stale(folder, commit, label, snap.last_use, size))
    return out


def prune(
    report: Report, stale: Sequence[Stale], *, days: float, now: float, dry_run: bool, lock_timeout: float
) -> list[Action]:
    """Remove the ``stale`` snapshots (each repo under its lock, a busy repo left alone), then every blob
    nothing uses any more; with ``dry_run``, only say what would go."""
    from ..cache.locking import RepoLock, describe_holder

    cutoff = now - days * 86400
    actions: list[Action] = []
    if dry_run:
        for item in stale:
            actions.append(Action("would-prune", item.label, _last_used(item.last_use, now), item.size))
        unused = [f for f in report.findings if f.kind == "unreferenced-blob"]
        if unused:
            total = sum(f.size for f in unused)
            actions.append(Action("would-remove", "blobs nothing uses", count(len(unused), "blob"), total))
        return actions
    by_repo: dict[str, list[Stale]] = {}
    for item in stale:
        by_repo.setdefault(item.folder, []).append(item)
    for folder, items in sorted(by_repo.items()):
        repo = report.repos[folder].repo
        try:
            with RepoLock(repo, timeout=0.0):
                for item in items:
                    last = usage.last_use(repo, item.commit)
                    if last is None or last >= cutoff:
                        actions.append(Action("skipped", item.label, "used since the scan"))
                        continue
                    remove_snapshot(repo, item.commit)
                    actions.append(Action("pruned", item.label, _last_used(item.last_use, now), item.size))
        except LockTimeoutError as error:
            holder = describe_holder(error.holder or {})
            actions += [Action("skipped", item.label, f"the repo's lock is held by {holder}") for item in items]
        except HfSnapshotError as error:
            actions += [Action("failed", item.label, str(error)) for item in items]
    fresh = scan(report.root, now=now)
    unused_findings = [f for f in fresh.findings if f.kind == "unreferenced-blob"]
    pruned = Report(fresh.root, False, False, unused_findings, fresh.repos, fresh.store)
    actions += remove_debris(pruned, now=now, lock_timeout=lock_timeout)
    for st in fresh.repos.values():
        _remove_if_empty(st.repo)
    return actions


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def remove_snapshot(repo: RepoCache, commit: str) -> None:
    """Remove a snapshot: its folder (links only, never followed), the refs naming it, its listing,
    ``.no_exist`` markers, records and recorded use. Call under the repo's lock."""
    folder = repo.snapshot_dir(commit)
    repo.require_inside(folder)
    for path in (folder, repo.root / ".no_exist" / commit):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    for _, path in walk_entries(repo.root / "refs"):
        with contextlib.suppress(OSError):
            if not path.is_symlink() and path.read_text(encoding="ascii", errors="replace").strip() == commit:
                os.unlink(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(repo.tree_cache(commit))
    for record in repo.record_paths(commit):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(record)
    usage.forget(repo, commit)


def _remove_if_empty(repo: RepoCache) -> None:
    """Remove the repo folder's empty folders, and the folder itself when nothing is left in it."""
    if not repo.root.is_dir() or repo.root.is_symlink():
        return
    for dirpath, _, _ in sorted(os.walk(repo.root), key=lambda item: -len(item[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


def _last_used(when: float, now: float) -> str:
    stamp = datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"last used {stamp} ({(now - when) / 86400:.1f} days before)"


def snapshot_files(folder: Path) -> list[str]:
    """The paths of a snapshot folder's files and links (``/``-separated), sorted."""
    return [name for name, _ in walk_entries(folder)]


def size_text(actions: Iterable[Action]) -> str:
    """:func:`freed`, as users read it."""
    return human_size(freed(actions))


def freed(actions: Iterable[Action]) -> int:
    """Bytes the actions freed (or, for a dry run, would free): a pruned snapshot's own entries are links,
    its bytes are those of the blobs removed after it."""
    return sum(a.size for a in actions if a.what in ("removed", "would-prune", "would-remove"))


__all__ = [
    "Action",
    "Stale",
    "blobs_in_use",
    "freed",
    "prune",
    "remove_debris",
    "remove_snapshot",
    "remove_store_files",
    "remove_unused_blobs",
    "repair",
    "size_text",
    "snapshot_files",
    "stale_snapshots",
]
