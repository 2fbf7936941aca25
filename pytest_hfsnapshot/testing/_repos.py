"""The local Hub's repos: git-like commits and trees, LFS pointers, Xet-backed files; no HTTP."""

from __future__ import annotations

import hashlib
import string
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..request import REPO_TYPES, repo_path

__all__ = ["LFS_SUFFIXES", "LFS_THRESHOLD", "Blob", "Commit", "Repo", "Repos", "git_blob_sha1", "is_lfs"]

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx", ".h5", ".msgpack", ".ckpt")
"""Files with these suffixes are stored as LFS, whatever their size."""

LFS_THRESHOLD = 1024 * 1024
"""Files of this many bytes or more are stored as LFS."""

_FIRST_COMMIT_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z; each commit one second later


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob holding ``data`` (what the Hub calls a small file's oid/ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str, size: int) -> bool:
    """Whether the local Hub stores ``path`` of ``size`` bytes as an LFS file."""
    return path.lower().endswith(LFS_SUFFIXES) or size >= LFS_THRESHOLD


@dataclass(frozen=True)
class Blob:
    """One file's bytes and the ids the Hub gives them (git oid; sha256 and xet hash for LFS)."""

    data: bytes
    oid: str  # git sha1 of what git stores: the data, or the LFS pointer
    sha256: str | None  # set for LFS files
    pointer_size: int | None
    xet_hash: str | None = None  # set for LFS files when the hub serves Xet storage

    @classmethod
    def of(cls, path: str, data: bytes) -> Blob:
        if not is_lfs(path, len(data)):
            return cls(data, git_blob_sha1(data), None, None)
        sha256 = hashlib.sha256(data).hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
        pointer_bytes = pointer.encode()
        return cls(data, git_blob_sha1(pointer_bytes), sha256, len(pointer_bytes))

    @property
    def etag(self) -> str:
        return self.sha256 or self.oid

    def tree_entry(self, path: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": self.oid, "size": len(self.data), "path": path}
        if self.sha256 is not None:
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": self.pointer_size}
        if self.xet_hash is not None:
            entry["xetHash"] = self.xet_hash
        return entry


@dataclass
class Commit:
    """One commit: its whole tree of files, its folders' tree ids, and any hostile raw entries."""

    sha: str
    files: dict[str, Blob]
    dirs: dict[str, str]  # folder path -> git tree oid
    date: str
    # Listing entries served beside the real files (hostile paths for security tests).
    raw: dict[str, tuple[dict[str, Any], bytes]] = field(default_factory=dict)


@dataclass
class Repo:
    """One repo: access flags, branches and tags (name -> commit id), and its commits."""

    repo_type: str
    repo_id: str
    private: bool
    gated: bool
    created_at: str
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        sha = self.branches.get(revision) or self.tags.get(revision) or revision
        return self.commits.get(sha)


def _git_tree_oids(files: Mapping[str, Blob]) -> tuple[str, dict[str, str]]:
    """Root tree oid and every folder's tree oid, computed the way git does."""
    children: dict[str, dict[str, tuple[bytes, bool]]] = {"": {}}
    for path in files:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            children.setdefault("/".join(parts[:depth]), {})
    oids: dict[str, str] = {}

    def oid_of(folder: str) -> str:
        entries: list[tuple[str, bytes, bytes]] = []  # (sort key, mode, name+oid)
        prefix = f"{folder}/" if folder else ""
        for path, blob in files.items():
            if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                name = path[len(prefix) :]
                entries.append((name, b"100644", name.encode() + b"\0" + bytes.fromhex(blob.oid)))
        for sub in children:
            if sub and sub.startswith(prefix) and "/" not in sub[len(prefix) :]:
                name = sub[len(prefix) :]
                entries.append((name + "/", b"40000", name.encode() + b"\0" + bytes.fromhex(oid_of(sub))))
        body = b"".join(mode + b" " + rest for _, mode, rest in sorted(entries))
        oid = hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()
        oids[folder] = oid
        return oid

    root = oid_of("")
    del oids[""]
    return root, oids


def check_repo(repo_id: str, repo_type: str) -> None:
    """Refuse a repo type we do not serve, or a repo id that is not ``name`` or ``org/name``."""
    if repo_type not in REPO_TYPES:
        raise ValueError(f"repo_type must be one of {REPO_TYPES}, got {repo_type!r}")
    parts = repo_id.split("/")
    allowed = set(string.ascii_letters + string.digits + "-_.")
    if len(parts) > 2 or any(not p or p in (".", "..") or not set(p) <= allowed for p in parts):
        raise ValueError(f"invalid repo id {repo_id!r}: expected 'name' or 'org/name'")


def resolve_path(repo_type: str, repo_id: str, commit: str, path: str) -> str:
    """``/{prefix}{repo}/resolve/{commit}/{path}``: the form a repo file's requests match as."""
    return f"/{repo_path(repo_id, repo_type)}/resolve/{commit}/{path}"


class Repos:
    """Every repo of one local Hub, by ``(repo_type, repo_id)``; ``lock`` guards them all."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._repos: dict[tuple[str, str], Repo] = {}
        self._commit_count = 0

    def get(self, repo_type: str, repo_id: str) -> Repo | None:
        with self.lock:
            return self._repos.get((repo_type, repo_id))

    def commit(
        self,
        repo_type: str,
        repo_id: str,
        blobs: dict[str, Blob],
        *,
        private: bool,
        gated: bool,
        branch: str,
        tag: str | None,
    ) -> str:
        """Commit ``blobs`` (the whole tree) on ``branch``, creating the repo on first use; the commit id."""
        with self.lock:
            repo = self._repos.get((repo_type, repo_id))
            self._commit_count += 1
            timestamp = _FIRST_COMMIT_TIME + self._commit_count
            date = datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            if repo is None:
                repo = Repo(repo_type, repo_id, private, gated, date)
                self._repos[(repo_type, repo_id)] = repo
            repo.private, repo.gated = private, gated
            parent = repo.branches.get(branch) or repo.branches.get("main")
            root, dirs = _git_tree_oids(blobs)
            header = f"tree {root}\n" + (f"parent {parent}\n" if parent else "")
            who = f"local-hub <local-hub@localhost> {timestamp} +0000"
            text = f"{header}author {who}\ncommitter {who}\n\nUpload {len(blobs)} files to {repo_id}\n"
            sha = hashlib.sha1(b"commit %d\0" % len(text.encode()) + text.encode()).hexdigest()
            repo.commits[sha] = Commit(sha, blobs, dirs, date)
            repo.branches[branch] = sha
            if tag is not None:
                repo.tags[tag] = sha
        return sha

    def add_raw(
        self, repo_type: str, repo_id: str, revision: str, path: str, served: dict[str, Any], data: bytes
    ) -> None:
        """Serve ``served`` (a listing entry) and ``data`` at ``path`` of the commit ``revision`` names now."""
        with self.lock:
            repo = self._repos.get((repo_type, repo_id))
            commit = repo.resolve(revision) if repo is not None else None
            if commit is None:
                raise KeyError(f"no {repo_type} repo {repo_id!r} at revision {revision!r}")
            commit.raw[path] = (served, data)

    def xet_contents(self) -> dict[str, bytes]:
        """The bytes of every Xet-backed file, by sha256 (what the CAS must hold)."""
        with self.lock:
            return {
                blob.sha256: blob.data
                for repo in self._repos.values()
                for commit in repo.commits.values()
                for blob in commit.files.values()
                if blob.sha256 is not None and blob.xet_hash is not None
            }

    def file_at(self, repo_type: str, repo_id: str, commit: str, path: str) -> Blob | None:
        with self.lock:
            repo = self._repos.get((repo_type, repo_id))
            found = repo.commits.get(commit) if repo is not None else None
            return found.files.get(path) if found is not None else None

    def paths_with_xet_hash(self, repo_type: str, repo_id: str, commit: str, xet_hash: str) -> tuple[str, ...]:
        """The resolve paths of the files of ``commit`` whose xet hash is ``xet_hash`` (the aliases)."""
        with self.lock:
            repo = self._repos.get((repo_type, repo_id))
            found = repo.commits.get(commit) if repo is not None else None
            files = found.files.items() if found is not None else ()
            return tuple(resolve_path(repo_type, repo_id, commit, p) for p, b in files if b.xet_hash == xet_hash)

    def has_xet_hash(self, repo_type: str, repo_id: str, xet_hash: str) -> bool:
        with self.lock:
            repo = self._repos.get((repo_type, repo_id))
            commits = repo.commits.values() if repo is not None else ()
            return any(b.xet_hash == xet_hash for c in commits for b in c.files.values())
