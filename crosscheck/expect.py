"""What a correct Hub serves for ``content.REPOS``, and the cache huggingface_hub builds from it."""

from __future__ import annotations

import hashlib
import http.client
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from huggingface_hub.file_download import repo_folder_name

from .content import Repo, git_blob_sha1, is_lfs, lfs_pointer, sha256

HTTP_TIMEOUT = 10.0


@dataclass(frozen=True)
class TreeEntry:
    """A file as ``list_repo_tree`` reports it: LFS files carry the pointer's git id."""

    size: int
    blob_id: str
    lfs: tuple[str, int, int] | None  # (sha256, size, pointer size)


def blob_name(path: str, data: bytes) -> str:
    """The cache's blob name: sha256 for LFS files, git sha1 for regular ones."""
    return sha256(data) if is_lfs(path, data) else git_blob_sha1(data)


def tree_entry(path: str, data: bytes) -> TreeEntry:
    if is_lfs(path, data):
        pointer = lfs_pointer(data)
        return TreeEntry(len(data), git_blob_sha1(pointer), (sha256(data), len(data), len(pointer)))
    return TreeEntry(len(data), git_blob_sha1(data), None)


def git_tree_oids(files: dict[str, bytes]) -> dict[str, str]:
    """Folder path -> the git tree id git gives it (LFS files stored as their pointers)."""
    stored = {path: lfs_pointer(data) if is_lfs(path, data) else data for path, data in files.items()}

    def tree(prefix: str) -> str:
        entries: dict[str, tuple[bytes, str]] = {}  # git sorts a folder as if named "<name>/"
        for path, data in stored.items():
            if not path.startswith(prefix):
                continue
            name, _, rest = path[len(prefix) :].partition("/")
            if rest:
                entries[name + "/"] = (b"40000 " + name.encode(), tree(prefix + name + "/"))
            else:
                entries[name] = (b"100644 " + name.encode(), git_blob_sha1(data))
        body = b"".join(mode + b"\0" + bytes.fromhex(oid) for _, (mode, oid) in sorted(entries.items()))
        return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()

    return {folder: tree(folder + "/") for folder in folders(files)}


def folders(paths: Iterable[str]) -> set[str]:
    """Every directory above the given repo paths."""
    out: set[str] = set()
    for path in paths:
        parent = posixpath.dirname(path)
        while parent:
            out.add(parent)
            parent = posixpath.dirname(parent)
    return out


def storage(cache_dir: Path, repo: Repo) -> Path:
    return cache_dir / repo_folder_name(repo_id=repo.repo_id, repo_type=repo.repo_type)


def snapshot_files(snapshot: Path) -> set[str]:
    return {p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if not p.is_dir()}


def assert_snapshot(cache_dir: Path, repo: Repo, commit: str, snapshot: Path, files: dict[str, bytes]) -> None:
    """The snapshot folder holds exactly ``files``, each a link to its correctly named blob."""
    folder = storage(cache_dir, repo)
    assert snapshot == folder / "snapshots" / commit
    assert snapshot_files(snapshot) == set(files)
    for name, data in files.items():
        link = snapshot / name
        assert link.is_symlink(), name
        assert link.read_bytes() == data, name
        assert link.resolve() == (folder / "blobs" / blob_name(name, data)).resolve(), name
    blobs = {p.name for p in (folder / "blobs").iterdir()}
    assert blobs == {blob_name(name, data) for name, data in files.items()}


def refs(cache_dir: Path, repo: Repo) -> dict[str, str]:
    """``refs/<name>`` -> commit, as huggingface_hub wrote them."""
    folder = storage(cache_dir, repo) / "refs"
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def fetch(method: str, url: str, headers: dict[str, str] | None = None, body: bytes | None = None) -> Reply:
    """One raw request, redirects not followed, so each server's own answer is what we see."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.netloc, timeout=HTTP_TIMEOUT)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=body, headers=headers or {})
        response = conn.getresponse()
        body = response.read()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, body)
    finally:
        conn.close()


def etag(value: str) -> str:
    """An ETag without the weak marker and quotes, as huggingface_hub normalizes it."""
    return value.removeprefix("W/").strip('"')
