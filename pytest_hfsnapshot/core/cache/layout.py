"""Where things live in a huggingface_hub cache, and where our own state lives beside it.

The one module that knows the layout by hand. Our state sits in ``.locks/hfsnapshot``, which the
client's cache tools skip, so no lock of ours is deleted while it can be held. A record only says
a snapshot was verified: each use checks its files again, so ``hf cache rm`` leaves nothing trusted."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import stat
import uuid
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import UnsafeCacheError
from ...request import is_commit
from .._hf_compat import client_listing_cache

#: Our state folder, relative to the cache root. What it holds::
#:
#:     locks/{repo folder}.lock             our per-repo kernel lock (never deleted), with .holder.json
#:                                          beside it, and .flock-probe
#:     locks/{repo folder}.softlock         the lease that replaces it where flock fails (its holder
#:                                          removes it when it lets go)
#:     records/{repo folder}/...            completeness records
#:     usage/{repo folder}/<commit>         when a snapshot of that commit was last handed out (its mtime)
#:     resolutions/{session}/...            branch resolutions shared by one test session
#:     refusals/{repo folder}.json          the Hub's last refusal of the repo (auth)
#:     outcomes/{session}/<key>.json        the failure memory shared by the workers of one test session
#:     gate/{session}/<endpoint>.json       rate-limit windows of one session (``gate``), each with a .lock
#:     outages/{session}/<endpoint>.json    endpoints one session found unreachable (``outage``)
OWN_DIR = os.path.join(".locks", "hfsnapshot")
#: The shared blob store's folder in the cache root (huggingface_hub's ``SHARED_BLOBS_DIR_NAME``).
STORE_DIR = "blobs"
XET_HASH_RE = re.compile(r"[0-9a-f]{64}")
# What a file name of ours keeps of an endpoint URL: the rest becomes "_".
_UNSAFE_IN_NAME_RE = re.compile(r"[^A-Za-z0-9.-]+")
INCOMPLETE_RE = re.compile(r"^(?P<etag>[^.]+)(?:\.[0-9a-f]{8})?\.incomplete$")
#: ``format_version`` of ``trees/<commit>.json`` in huggingface_hub 1.33 to 2.4 (used where the
#: client's own tree-cache code cannot be reached, and by ``doctor``'s read of the disk).
TREE_CACHE_FORMAT = 1
#: The mode of the refs and JSON files we write (what ``tempfile.mkstemp`` gave them from the start).
PRIVATE_MODE = 0o600


def partial_blob(blobs: str | os.PathLike[str], etag: str) -> Path:
    """``<blobs>/<etag>.incomplete``: the bytes a failed plain-HTTP transfer of the plugin's got, kept for
    the next transfer of that blob to go on from (``resume``). Named as huggingface_hub named its
    resumable downloads before 1.18: an unfinished download to the doctor and to repairs."""
    return Path(blobs) / f"{etag}.incomplete"


def repo_folder_name(repo_id: str, repo_type: str) -> str:
    """``models--org--name``: the client's folder name for a repo (huggingface_hub's own function)."""
    # Imported here: file_download pulls in the client's HTTP stack, which plugin start-up never needs.
    from huggingface_hub.file_download import repo_folder_name as client_folder_name

    return client_folder_name(repo_id=repo_id, repo_type=repo_type)


def own_dir(cache_dir: str | os.PathLike[str]) -> Path:
    """Our state folder in ``cache_dir`` (see the module docstring)."""
    return Path(cache_dir) / OWN_DIR


def flock_probe(folder: str | os.PathLike[str]) -> Path:
    """The file locked once to learn whether ``flock`` works in ``folder`` (kept: never delete a lock file)."""
    return Path(folder) / ".flock-probe"


def failure_memory_file(cache_dir: str | os.PathLike[str], session: str, key: str) -> Path:
    """Where the failure of one request (``key``) is kept for the other processes of ``session``."""
    return own_dir(cache_dir) / "outcomes" / session / f"{key}.json"


def gate_dir(cache_dir: str | os.PathLike[str], session: str) -> Path:
    """Where the rate-limit gate of ``session`` keeps its windows, one :func:`endpoint_file` each."""
    return own_dir(cache_dir) / "gate" / session


def outage_dir(cache_dir: str | os.PathLike[str], session: str) -> Path:
    """Where ``session`` writes down the endpoints it found unreachable, one :func:`endpoint_file` each."""
    return own_dir(cache_dir) / "outages" / session


def dropped_layer_file(cache_dir: str | os.PathLike[str], session: str, layer: str | os.PathLike[str]) -> Path:
    """Where ``session`` notes that the cache layer ``layer`` failed (a dead mount), beside its outages."""
    digest = hashlib.sha256(str(layer).encode()).hexdigest()[:16]
    return outage_dir(cache_dir, session) / f"layer-{digest}.json"


def endpoint_file(folder: str | os.PathLike[str], endpoint: str) -> Path:
    """The file of ``endpoint`` (``http://host:port[/api]``) in a session's gate or outage folder."""
    return Path(folder) / (_UNSAFE_IN_NAME_RE.sub("_", endpoint) + ".json")


def endpoint_lock(path: Path) -> Path:
    """The lock held while an :func:`endpoint_file` is read and rewritten (kept: never delete a lock file)."""
    return path.with_name(f"{path.name}.lock")


#: The folder-name prefix of each repo type (``models--org--name``), as huggingface_hub names them.
REPO_FOLDER_PREFIXES = {"models": "model", "datasets": "dataset", "spaces": "space"}


def repo_of_folder(name: str) -> tuple[str, str] | None:
    """``(repo_type, repo_id)`` of a repo folder name (``models--org--name``), or None for any other name.

    The inverse of :func:`repo_folder_name`: a repo id never holds ``--``, so every ``--`` is a ``/``.
    """
    prefix, sep, rest = name.partition("--")
    repo_type = REPO_FOLDER_PREFIXES.get(prefix)
    if repo_type is None or not sep or not rest or rest.startswith("-") or rest.endswith("-"):
        return None
    return repo_type, rest.replace("--", "/")


class SnapshotFile(NamedTuple):
    """Where a path of the form ``{cache}/models--org--name/snapshots/<commit>/<relpath>`` points."""

    cache_dir: Path
    repo_type: str
    repo_id: str
    commit: str
    relpath: str


def snapshot_file(path: str | os.PathLike[str]) -> SnapshotFile | None:
    """The cache, repo, commit and repo path a snapshot file's path names, or None for any other path."""
    parts = Path(os.path.abspath(path)).parts
    for index in range(len(parts) - 4, 0, -1):
        if parts[index + 1] != "snapshots" or not is_commit(parts[index + 2]):
            continue
        repo = repo_of_folder(parts[index])
        if repo is not None:
            relpath = "/".join(parts[index + 3 :])
            return SnapshotFile(Path(*parts[:index]), repo[0], repo[1], parts[index + 2], relpath)
    return None


def store_file(cache_dir: str | os.PathLike[str], xet_hash: str) -> Path:
    """``{cache}/blobs/<xx>/<xet hash>``: where the shared blob store keeps a Xet file's bytes."""
    return Path(cache_dir) / STORE_DIR / xet_hash[:2] / xet_hash


class RepoCache:
    """Paths of one repo inside one cache folder, with containment checks.

    The client's layout::

        {cache}/{models|datasets|spaces}--org--name/
            blobs/<etag>                     file contents (git sha1, or sha256 for LFS)
            blobs/<etag>.<8 hex>.incomplete  a download in flight, or orphaned by a kill
            blobs/<etag>.incomplete          the bytes a failed plain-HTTP transfer of the plugin's
                                             got, which the next one goes on from (``resume``)
            blobs/<sha256> -> ../../blobs/<xx>/<xet hash>   a Xet file kept in the shared store
            snapshots/<commit>/<path>        relative symlinks to ../../blobs/<etag>
            refs/<branch or tag>             the commit it pointed at when last resolved
            .no_exist/<commit>/<path>        a path the commit does not have (an empty marker)
            trees/<commit>.json              the client's cached listing (written by its own code)
        {cache}/blobs/<xx>/<xet hash>        the shared blob store (huggingface_hub >= 1.33): one
                                             read-only file per content, with ``.refs`` and ``.lock``
        {cache}/blobs/<xx>/<xet hash>.lock.soft         its lock of a store entry where flock fails
        {cache}/.locks/{repo folder}/<etag>.lock        the client's per-blob locks

    A read-only layer is read with the same layout, by file names alone (:meth:`bytes_in`).
    """

    def __init__(
        self, cache_dir: str | os.PathLike[str], repo_id: str, repo_type: str, *, folder_name: str | None = None
    ) -> None:
        self.cache_dir = Path(cache_dir).expanduser().resolve()
        self.repo_id = repo_id
        self.repo_type = repo_type
        # A name already known (read from a cache, or of the same repo) saves importing the client's
        # download module, which a scan of the cache (the doctor) never needs otherwise.
        self.folder_name = repo_folder_name(repo_id, repo_type) if folder_name is None else folder_name
        self.root = self.cache_dir / self.folder_name
        self.blobs = self.root / "blobs"

    @classmethod
    def of_folder(cls, cache_dir: str | os.PathLike[str], folder_name: str) -> RepoCache | None:
        """The repo whose folder in ``cache_dir`` is named ``folder_name`` (as read from the cache), or
        None when that is not a repo folder's name (see :func:`repo_of_folder`)."""
        found = repo_of_folder(folder_name)
        if found is None:
            return None
        repo_type, repo_id = found
        return cls(cache_dir, repo_id, repo_type, folder_name=folder_name)

    def in_cache(self, cache_dir: str | os.PathLike[str]) -> RepoCache:
        """The same repo in another cache folder (a read-only layer: only ever read through it)."""
        return RepoCache(cache_dir, self.repo_id, self.repo_type, folder_name=self.folder_name)

    # --- what the repo folder holds, each part with its reads and writes ----------------------
    @functools.cached_property
    def refs(self) -> Refs:
        return Refs(self)

    @functools.cached_property
    def listings(self) -> ListingCache:
        return ListingCache(self)

    @functools.cached_property
    def store(self) -> SharedStore:
        return SharedStore(self)

    @functools.cached_property
    def incomplete(self) -> IncompleteBlobs:
        return IncompleteBlobs(self)

    # --- huggingface_hub's own layout ---------------------------------------------------------

    def blob(self, etag: str) -> Path:
        return self.blobs / etag

    def snapshot_dir(self, commit: str) -> Path:
        return self.root / "snapshots" / commit

    def link(self, commit: str, relpath: str) -> Path:
        return self.snapshot_dir(commit).joinpath(*relpath.split("/"))

    def ref(self, revision: str) -> Path:
        return self.root / "refs" / revision

    def tree_cache(self, commit: str) -> Path:
        return self.root / "trees" / f"{commit}.json"

    def no_exist(self, commit: str, relpath: str) -> Path:
        """``.no_exist/<commit>/<path>``: the client's marker of a path the commit does not have."""
        return (self.root / ".no_exist" / commit).joinpath(*relpath.split("/"))

    def mark_absent(self, commit: str, relpath: str) -> None:
        """Write the client's marker of a path ``commit`` does not have, as it does on the Hub's 404."""
        marker = self.no_exist(commit, relpath)
        self.require_inside(marker)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def bytes_in(self, cache_dir: Path, blob_name: str, xet: str) -> tuple[Path, ...]:
        """Where another cache folder (a read-only layer) may keep a file's bytes, without links:
        this repo's ``blobs/<name>`` there, then the shared-store file of its Xet hash (when it has one).

        A layer copied without symlinks (rclone) has the store file but not the repo's link to it.
        """
        blob = Path(cache_dir) / self.folder_name / "blobs" / blob_name
        return (blob, store_file(cache_dir, xet)) if xet else (blob,)

    @property
    def client_locks(self) -> Path:
        """The folder of the client's per-blob locks of this repo (``.locks/<repo folder>``)."""
        return self.cache_dir / ".locks" / self.folder_name

    def blob_lock(self, etag: str) -> Path:
        """The client's per-blob lock: holding it means nobody is downloading that blob."""
        return self.client_locks / f"{etag}.lock"

    def make_folders(self, folder: Path) -> Path:
        """``make_folders`` below this cache, naming this repo in the error."""
        return make_folders(folder, self.cache_dir, repo_id=self.repo_id)

    def require_inside(self, path: Path) -> None:
        """Refuse to write or delete through a folder that resolves outside the repo's cache folder."""
        probe = path
        while not probe.exists() and probe != self.root and probe.parent != probe:
            probe = probe.parent
        if not is_within(probe, self.root) and not (probe == self.cache_dir and not self.root.is_symlink()):
            raise UnsafeCacheError(
                f"{path} resolves outside {self.root} (a symlink inside the cache leads elsewhere). "
                f"Refusing to touch it: remove the symlink or delete {self.root} and run again.",
                repo_id=self.repo_id,
            )

    # --- our own records ----------------------------------------------------------------------
    @property
    def own_dir(self) -> Path:
        return own_dir(self.cache_dir)

    @property
    def lock_path(self) -> Path:
        return self.own_dir / "locks" / f"{self.folder_name}.lock"

    @property
    def soft_lock_path(self) -> Path:
        return self.own_dir / "locks" / f"{self.folder_name}.softlock"

    @property
    def holder_path(self) -> Path:
        return self.own_dir / "locks" / f"{self.folder_name}.holder.json"

    @property
    def refusal_path(self) -> Path:
        """Why the Hub last refused this repo (gated, 401, private), for offline runs that follow."""
        return self.own_dir / "refusals" / f"{self.folder_name}.json"

    @property
    def implicit_refusal_path(self) -> Path:
        """How the Hub last refused an implicit load of this repo, and whether a token was set then."""
        return self.own_dir / "refusals" / f"{self.folder_name}.implicit.json"

    @property
    def openness_path(self) -> Path:
        """That the Hub served this repo's files to a request with no token (a session endpoint then
        serves its cached files to any process of a later session without asking)."""
        return self.own_dir / "open" / f"{self.folder_name}.json"

    @property
    def records_dir(self) -> Path:
        """The folder of this repo's records, every commit's and every selection's."""
        return self.own_dir / "records" / self.folder_name

    def record_path(self, commit: str, selection_key: str) -> Path:
        return self.records_dir / f"{commit}.{selection_key}.json"

    def record_paths(self, commit: str) -> list[Path]:
        """Every record of ``commit``, whatever its selection; an OSError other than "no such folder" propagates."""
        folder = self.records_dir
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        prefix = f"{commit}."
        return [folder / name for name in sorted(names) if name.startswith(prefix) and name.endswith(".json")]

    def usage_path(self, commit: str) -> Path:
        """The file whose modification time is the last use of a snapshot of ``commit`` (see :mod:`.usage`)."""
        return self.own_dir / "usage" / self.folder_name / commit

    def resolution_path(self, session: str, revision: str) -> Path:
        safe_rev = revision.replace("/", "%2F")
        return self.own_dir / "resolutions" / session / f"{self.folder_name}@{safe_rev}.json"

    # --- containment --------------------------------------------------------------------------
    def safe_relpath(self, relpath: str) -> str:
        """Reject a listing path that would land outside the snapshot folder."""
        parts = relpath.split("/")
        if (
            not relpath
            or relpath.startswith(("/", "\\"))
            or re.match(r"^[A-Za-z]:", relpath)
            or any(part in ("", ".", "..") for part in parts)
            or "\\" in relpath
            or "\x00" in relpath
        ):
            raise UnsafeCacheError(
                f"The Hub listing of {self.repo_id!r} names the file {relpath!r}, which would be written "
                "outside the snapshot folder. Refusing it: check the endpoint (HF_ENDPOINT) you are using.",
                repo_id=self.repo_id,
            )
        return relpath


class Refs:
    """The repo's ``refs/<branch or tag>``: the commit each pointed at when last resolved."""

    def __init__(self, repo: RepoCache) -> None:
        self.repo = repo

    def read(self, revision: str) -> str | None:
        """The commit a cached branch or tag points at, or None when absent, empty or garbage."""
        path = self.repo.ref(revision)
        try:
            if path.is_symlink() or not is_within(path, self.repo.root):
                return None
            text = path.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            return None
        return text if is_commit(text) else None

    def write(self, revision: str, commit: str) -> bool:
        """Point ``refs/<revision>`` at ``commit`` (atomically); True when it had to change."""
        if self.read(revision) == commit:
            return False
        path = self.repo.ref(revision)
        self.repo.make_folders(path.parent)
        atomic_write_text(path, commit, mode=PRIVATE_MODE)
        return True

    def commit_of(self, revision: str) -> str | None:
        """The commit ``revision`` names in this cache: itself when a commit id, else what its ref holds."""
        return revision if is_commit(revision) else self.read(revision)


class ListingCache:
    """The client's cached listings, ``trees/<commit>.json``, entries in their JSON form."""

    def __init__(self, repo: RepoCache) -> None:
        self.repo = repo

    def read(self, commit: str) -> dict[str, dict[str, Any]] | None:
        """The listing of ``commit``, or None; read through huggingface_hub's own tree-cache code (see
        :mod:`~pytest_hfsnapshot.core._hf_compat`) after refusing a planted link, else as :meth:`read_file`."""
        path = self.repo.tree_cache(commit)
        if path.is_symlink() or not is_within(path.parent, self.repo.root):
            return None
        client = client_listing_cache()
        if client is not None:
            return client.read(self.repo.root, commit)
        return self.read_file(commit)

    def read_file(self, commit: str) -> dict[str, dict[str, Any]] | None:
        """``trees/<commit>.json`` read from disk by hand, in the format huggingface_hub 1.33 to 2.4 write,
        or None (absent, a planted link, unreadable, another format, an entry that is not an object).

        What a check of the disk reads (``doctor``): the client's tree-cache module loads its HTTP stack,
        and its in-memory copy may differ from the disk.
        """
        path = self.repo.tree_cache(commit)
        if path.is_symlink() or not is_within(path.parent, self.repo.root):
            return None
        data = read_json(path)
        if not isinstance(data, dict) or data.get("format_version") != TREE_CACHE_FORMAT:
            return None
        files = data.get("files")
        if not isinstance(files, dict) or not all(isinstance(info, dict) for info in files.values()):
            return None
        return files

    def write(self, commit: str, files: dict[str, dict[str, Any]]) -> None:
        """Store a listing where and as the client keeps it (``xet_hash`` included), so that it
        neither lists the tree again nor sends a HEAD per Xet file."""
        repo = self.repo
        repo.make_folders(repo.tree_cache(commit).parent)
        client = client_listing_cache()
        if client is not None:
            client.write(repo.root, commit, files)
            return
        payload = {"format_version": TREE_CACHE_FORMAT, "files": files}
        atomic_write_json(repo.tree_cache(commit), payload, root=repo.cache_dir, repo_id=repo.repo_id)


class SharedStore:
    """The repo's links into the cache's shared blob store, ``{cache}/blobs/<xx>/<xet hash>``."""

    def __init__(self, repo: RepoCache) -> None:
        self.repo = repo

    def target(self, etag: str) -> Path | None:
        """The store file that ``blobs/<etag>`` links to, when it is a link into the store.

        Only the store's own shape counts: ``<cache>/blobs/<xx>/<xet hash>`` reached without any
        other symlink on the way. Any other link (or a regular blob) gives None.
        """
        blobs = self.repo.blobs
        try:
            target = os.readlink(os.path.join(blobs, etag))
        except OSError:
            return None
        resolved = os.path.normpath(os.path.join(blobs, target))
        name = os.path.basename(resolved)
        if not XET_HASH_RE.fullmatch(name) or resolved != str(store_file(self.repo.cache_dir, name)):
            return None
        if os.path.realpath(os.path.dirname(resolved)) != os.path.dirname(resolved):
            return None  # a link planted on the way to the store leads elsewhere
        return Path(resolved)

    def manifest(self, store: Path) -> Path:
        """``<xet hash>.refs`` beside a store entry: the repo links to it, one a line."""
        return store.with_name(f"{store.name}.refs")

    def lock(self, store: Path) -> Path:
        """huggingface_hub's lock of one store entry (held while it publishes, links or collects it)."""
        return store.with_name(f"{store.name}.lock")

    def soft_lock(self, store: Path) -> Path:
        """The marker file the client locks a store entry with where ``flock`` fails (``<lock>.soft``)."""
        return store.with_name(f"{store.name}.lock.soft")

    def drop_reference(self, store: Path, etag: str) -> bool:
        """Take ``blobs/<etag>`` of this repo out of the store entry's ``.refs`` manifest (call under its
        lock); whether the manifest named it. The client appends a line (relative to the cache) before
        it makes a link, and reads them when it collects garbage."""
        manifest = self.manifest(store)
        try:
            if manifest.is_symlink():
                return False
            lines = manifest.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeError):
            return False
        mine = f"{self.repo.folder_name}/blobs/{etag}"
        kept = [line for line in lines if line != mine]
        if len(kept) == len(lines):
            return False
        # The client's mode: every user of a shared cache appends to it.
        atomic_write_text(manifest, "".join(f"{line}\n" for line in kept), mode=0o666)
        return True

    def xet_hashes(self) -> set[str]:
        """The Xet hashes of the repo's files that the cache knows of: from the client's cached
        listings (every commit in ``trees/``) and from the repo's links into the store."""
        repo = self.repo
        found: set[str] = set()
        with contextlib.suppress(OSError):
            for entry in os.scandir(repo.root / "trees"):
                commit = entry.name.removesuffix(".json")
                if entry.name.endswith(".json") and is_commit(commit):
                    for info in (repo.listings.read(commit) or {}).values():
                        xet = info.get("xet_hash")
                        if isinstance(xet, str) and XET_HASH_RE.fullmatch(xet):
                            found.add(xet)
        with contextlib.suppress(OSError):
            for entry in os.scandir(repo.blobs):
                store = self.target(entry.name)
                if store is not None:
                    found.add(store.name)
        return found


class IncompleteBlobs:
    """The repo's ``blobs/<etag>.<8 hex>.incomplete``: downloads in flight, or orphaned by a kill."""

    def __init__(self, repo: RepoCache) -> None:
        self.repo = repo

    def path(self, etag: str, tag: str) -> Path:
        """Where the client streams a download of ``etag`` (``tag``: 8 hex, per download)."""
        return self.repo.blobs / f"{etag}.{tag}.incomplete"

    def found(self, etag: str | None = None) -> list[Path]:
        """The incomplete blobs there are (of one etag, or all), sorted."""
        try:
            entries = list(os.scandir(self.repo.blobs))
        except OSError:
            return []
        found = []
        for entry in entries:
            match = INCOMPLETE_RE.match(entry.name)
            if match and (etag is None or match.group("etag") == etag):
                found.append(Path(entry.path))
        return sorted(found)

    def any(self) -> bool:
        """Whether there is one (:meth:`found`, without building paths)."""
        try:
            names = os.listdir(self.repo.blobs)
        except OSError:
            return False
        return any(name.endswith(".incomplete") and INCOMPLETE_RE.match(name) for name in names)


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True when ``path``, with every symlink resolved, stays inside ``root``.

    ``root`` is taken literally (callers pass canonical paths), so a ``root`` that is itself a
    symlink to elsewhere does not count as inside.
    """
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    real_root = os.path.abspath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def make_folders(folder: Path, root: Path, *, repo_id: str | None = None) -> Path:
    """Create ``folder`` below ``root`` one level at a time, refusing any level that is a link or a file.

    ``root`` is trusted (a resolved cache folder); everything below it must be a real folder, so
    that a symlink planted in the cache can never lead a write or a delete outside it.
    """
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(current)
            st = os.lstat(current)
        if not stat.S_ISDIR(st.st_mode):
            kind = "symlink" if stat.S_ISLNK(st.st_mode) else "file"
            raise UnsafeCacheError(
                f"{current} in the cache is a {kind}, not a folder. Refusing to write through it: "
                "remove it and run again.",
                repo_id=repo_id,
            )
    return folder


def atomic_write_json(path: Path, data: Any, *, root: Path | None = None, repo_id: str | None = None) -> None:
    """Write JSON so readers see either the old file or the whole new one, never a torn one.

    With ``root``, the folders from ``root`` down to the file must be real folders (see make_folders).
    """
    if root is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        make_folders(path.parent, root, repo_id=repo_id)
    atomic_write_text(path, json.dumps(data, sort_keys=True, separators=(",", ":")), mode=PRIVATE_MODE)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) so readers see the old file or the whole new one.

    The file's permission bits are ``mode`` exactly when given, else what ``open`` gives (the
    umask's). The new bytes go to a temporary file beside ``path``, renamed over it when complete;
    on any failure the temporary file is removed and ``path`` left as it was.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any | None:
    """Parsed JSON, or None when absent or unreadable (a torn or foreign file is treated as absent)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def list_names(folder: Path) -> list[str]:
    """The names in ``folder``, sorted; none when it is missing or not a folder."""
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
